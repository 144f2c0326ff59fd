// Pre-tokenization: splitting text into the pieces that byte-level BPE
// encodes one at a time. Each splitter is a hand-written matcher equivalent to
// one regex (std::regex has no \p{L}); the regex is quoted beside it.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::tok {

enum class PreTokenizer {
  // GPT-2 (r50k_base, encoder.json + vocab.bpe, HF ByteLevel's default):
  //   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  kGpt2,
  // cl100k_base and LLaMA-3 (one regex for both):
  //   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
  //   ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
  kCl100k,
};

// "gpt2" or "cl100k".
std::string_view pre_tokenizer_name(PreTokenizer p);
// The regex the matcher implements, verbatim (as in HF tokenizer.json files).
std::string_view pre_tokenizer_regex(PreTokenizer p);
// The pre-tokenizer whose regex is `regex`; false if it is none of ours.
bool pre_tokenizer_from_regex(std::string_view regex, PreTokenizer& out);

// Length in bytes of the regex match at byte offset i (i < text.size()); the
// regexes match every position, so the result is >= 1.
std::size_t pre_token_length(PreTokenizer p, std::string_view text, std::size_t i);

// Splits text into consecutive pieces (they tile it) appended to out.
void pre_tokenize(PreTokenizer p, std::string_view text, std::vector<std::string_view>& out);

// A pre-tokenizer as GGUF's tokenizer.ggml.pre names it (llama.cpp's names;
// pre_names.cpp): a hand-written matcher, or regexes for RegexSplitter
// (regex_split.hpp), and the vocabulary flags llama.cpp ties to the name.
struct NamedPreTokenizer {
  PreTokenizer hand_written = PreTokenizer::kGpt2;  // used when regexes is empty
  std::vector<std::string> regexes;                  // else: split by these, in turn
  bool ignore_merges = false;                        // LLaMA-3: a piece that is a token is emitted whole
  bool add_bos = false;                              // llama.cpp's default when the file does not say
};
std::optional<NamedPreTokenizer> pre_tokenizer_by_name(std::string_view name);
// Every name pre_tokenizer_by_name knows, sorted.
std::vector<std::string> pre_tokenizer_names();
// o200k_base's regex (tiktoken; GPT-4o-style tokenizer.json files).
std::string_view o200k_regex();

}  // namespace lockstep::tok
