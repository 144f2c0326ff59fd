#include "lockstep/tok/pretokenize.hpp"

#include "lockstep/tok/unicode.hpp"

namespace lockstep::tok {

namespace {

using unicode::Cp;
using unicode::decode_at;
using unicode::kLetter;
using unicode::kNumber;
using unicode::kOther;
using unicode::kSpace;

constexpr std::string_view kGpt2Regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr std::string_view kCl100kRegex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// A view of the text with code-point steps. All offsets are byte offsets.
struct Text {
  std::string_view s;
  bool end(std::size_t i) const { return i >= s.size(); }
  Cp at(std::size_t i) const { return decode_at(s, i); }
  // End of the run of code points of class cls starting at i.
  std::size_t run(std::size_t i, std::uint8_t cls) const {
    while (!end(i)) {
      const Cp c = at(i);
      if (c.cls != cls) break;
      i += c.len;
    }
    return i;
  }
  bool is_newline(std::size_t i) const { return !end(i) && (s[i] == '\r' || s[i] == '\n'); }
};

// The contraction after an apostrophe at i: 's 't 'm 'd 're 've 'll.
// Returns the match length or 0. Case-insensitive (cl100k's (?i:...)) folds
// the way Unicode simple case folding does: S and U+017F LATIN SMALL LETTER
// LONG S match s; the other letters have only their ASCII case pair.
std::size_t contraction(const Text& t, std::size_t i, bool ignore_case) {
  if (t.s[i] != '\'' || t.end(i + 1)) return 0;
  const auto letter = [&](std::size_t k, char want, std::size_t& len) -> bool {
    if (t.end(k)) return false;
    const Cp c = t.at(k);
    len = c.len;
    if (c.cp == static_cast<std::uint32_t>(want)) return true;
    if (!ignore_case) return false;
    if (c.cp == static_cast<std::uint32_t>(want - 'a' + 'A')) return true;
    return want == 's' && c.cp == 0x017F;
  };
  std::size_t l1 = 0, l2 = 0;
  for (const char one : {'s', 't', 'm', 'd'}) {
    if (letter(i + 1, one, l1)) return 1 + l1;
  }
  for (const char* two : {"re", "ve", "ll"}) {
    if (letter(i + 1, two[0], l1) && letter(i + 1 + l1, two[1], l2)) return 1 + l1 + l2;
  }
  return 0;
}

// The whitespace alternatives shared by both regexes, at a white-space code
// point i:  \s+(?!\S) | \s+
// A run of white space followed by a non-space loses its last code point to
// the next piece (so " word" stays together), unless the run is one code
// point long; a run that ends the text is taken whole.
std::size_t whitespace_tail(const Text& t, std::size_t i) {
  std::size_t last = i;  // start of the last code point of the run
  std::size_t k = i;
  while (!t.end(k)) {
    const Cp c = t.at(k);
    if (c.cls != kSpace) break;
    last = k;
    k += c.len;
  }
  if (t.end(k)) return k - i;      // \s+(?!\S) at the end of the text
  if (last > i) return last - i;   // \s+(?!\S): back off one code point
  return k - i;                    // \s+: a single white-space code point
}

std::size_t match_gpt2(const Text& t, std::size_t i) {
  if (const std::size_t n = contraction(t, i, false)) return n;
  const Cp c0 = t.at(i);
  // ` ?\p{L}+ | ?\p{N}+ | ?[^\s\p{L}\p{N}]+`: an optional space, then a run
  // of one class.
  std::size_t j = i;
  Cp c = c0;
  if (c0.cp == ' ' && !t.end(i + 1)) {
    const Cp c1 = t.at(i + 1);
    if (c1.cls != kSpace) j = i + 1, c = c1;
  }
  if (c.cls != kSpace) return t.run(j, c.cls) - i;
  return whitespace_tail(t, i);
}

std::size_t match_cl100k(const Text& t, std::size_t i) {
  if (const std::size_t n = contraction(t, i, true)) return n;
  const Cp c0 = t.at(i);
  // [^\r\n\p{L}\p{N}]?\p{L}+
  if (c0.cls == kLetter) return t.run(i, kLetter) - i;
  if (c0.cls != kNumber && !t.is_newline(i) && !t.end(i + c0.len) &&
      t.at(i + c0.len).cls == kLetter) {
    return t.run(i + c0.len, kLetter) - i;
  }
  // \p{N}{1,3}
  if (c0.cls == kNumber) {
    std::size_t k = i;
    for (int n = 0; n < 3 && !t.end(k); ++n) {
      const Cp c = t.at(k);
      if (c.cls != kNumber) break;
      k += c.len;
    }
    return k - i;
  }
  // ` ?[^\s\p{L}\p{N}]+[\r\n]*`
  std::size_t j = kOther == c0.cls ? i : i + 1;
  if (c0.cls == kOther || (c0.cp == ' ' && !t.end(i + 1) && t.at(i + 1).cls == kOther)) {
    std::size_t k = t.run(j, kOther);
    while (t.is_newline(k)) ++k;
    return k - i;
  }
  // c0 is white space. `\s*[\r\n]+`: through the last \r or \n of the run.
  std::size_t k = i, after_newline = i;
  while (!t.end(k)) {
    const Cp c = t.at(k);
    if (c.cls != kSpace) break;
    k += c.len;
    if (c.cp == '\r' || c.cp == '\n') after_newline = k;
  }
  if (after_newline > i) return after_newline - i;
  // \s+(?!\S) | \s+
  return whitespace_tail(t, i);
}

}  // namespace

std::string_view pre_tokenizer_name(PreTokenizer p) {
  return p == PreTokenizer::kGpt2 ? "gpt2" : "cl100k";
}

std::string_view pre_tokenizer_regex(PreTokenizer p) {
  return p == PreTokenizer::kGpt2 ? kGpt2Regex : kCl100kRegex;
}

bool pre_tokenizer_from_regex(std::string_view regex, PreTokenizer& out) {
  if (regex == kGpt2Regex) {
    out = PreTokenizer::kGpt2;
    return true;
  }
  if (regex == kCl100kRegex) {
    out = PreTokenizer::kCl100k;
    return true;
  }
  return false;
}

std::size_t pre_token_length(PreTokenizer p, std::string_view text, std::size_t i) {
  const Text t{text};
  return p == PreTokenizer::kGpt2 ? match_gpt2(t, i) : match_cl100k(t, i);
}

void pre_tokenize(PreTokenizer p, std::string_view text, std::vector<std::string_view>& out) {
  std::size_t i = 0;
  while (i < text.size()) {
    const std::size_t n = pre_token_length(p, text, i);
    out.push_back(text.substr(i, n));
    i += n;
  }
}

}  // namespace lockstep::tok
