// The general pre-tokenizer: text split by a sequence of regexes, through
// PCRE2 (Debian's libpcre2-8), for the pre-tokenizers that have no
// hand-written matcher (pretokenize.hpp).
//
// Semantics are Hugging Face tokenizers' Sequence of Split(pattern,
// "isolated") pre-tokenizers, which is also what llama.cpp's regex_exprs
// lists do: the first regex cuts the text into its matches and the text
// between them; each further regex cuts every piece the same way; empty
// pieces are dropped. Matches are found left to right as HF's Oniguruma
// iterator finds them (an empty match right where the previous match ended
// is skipped by one character).
//
// Unicode classes: \p{..} of a general category (L, Lu, M, N, Nd, P, S, Z,
// C, ...), \s \S (White_Space), \d \D (Nd), \w \W and \b \B (Oniguruma's
// word characters: L, M, N, Pc) are rewritten to explicit code-point ranges
// from lockstep's own Unicode 16 tables before PCRE2 sees the pattern, so they
// agree with the hand-written matchers and with HF (Oniguruma, Unicode 16)
// rather than with PCRE2's built-in tables (Unicode 14 in Debian 12, whose \w
// leaves out marks). Other properties (scripts such as \p{Han}) are PCRE2's. ^ and $
// match at line ends (PCRE2_MULTILINE), as in Oniguruma's Ruby syntax.
//
// Bytes that are not valid UTF-8 (regexes see code points): each such byte
// is a piece of its own, and the valid text between them is split as above,
// so every byte string splits and the pieces tile it.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::tok {

// False in a build without PCRE2 (CMake found no libpcre2-8): then every
// RegexSplitter constructor throws std::invalid_argument saying so.
bool regex_pre_tokenizers_available();

class RegexSplitter {
 public:
  // Throws std::invalid_argument naming the pattern and PCRE2's message (with
  // its offset) for a pattern that does not compile.
  explicit RegexSplitter(std::vector<std::string> patterns);
  ~RegexSplitter();
  RegexSplitter(const RegexSplitter&) = delete;
  RegexSplitter& operator=(const RegexSplitter&) = delete;

  // Appends the pieces of text (views into it) to out; they tile text.
  // Throws std::runtime_error if PCRE2 fails on a match (a resource limit).
  void split(std::string_view text, std::vector<std::string_view>& out) const;

  const std::vector<std::string>& patterns() const { return patterns_; }

 private:
  struct Compiled;
  void split_valid(std::string_view text, std::vector<std::string_view>& out) const;
  std::vector<std::string> patterns_;
  std::vector<std::unique_ptr<Compiled>> compiled_;
};

// The pattern as PCRE2 is given it (the Unicode classes spelled out as
// ranges); exposed for tests. Throws std::invalid_argument on a \p{..} that
// is not closed.
std::string pcre2_pattern_for(std::string_view pattern);

}  // namespace lockstep::tok
