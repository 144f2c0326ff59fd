// tiktoken rank files on arbitrary bytes, under each pre-tokenizer kind (the
// hand-written GPT-2 and cl100k matchers, o200k's regex through PCRE2), with
// a special token whose id the input picks (in a hole, above the ranks, or
// colliding with one). Only std::runtime_error may leave the parser; what
// loads must round-trip text exactly.
#include <memory>
#include <stdexcept>
#include <string_view>

#include "lockstep/tok/bpe.hpp"

extern "C" int LLVMFuzzerTestOneInput(const unsigned char* data, std::size_t size) {
  if (size < 3) return 0;
  static const auto o200k = std::make_shared<const lockstep::tok::RegexSplitter>(
      std::vector<std::string>{std::string(lockstep::tok::o200k_regex())});
  const int kind = data[0] % 3;
  const std::int32_t special_id = data[1] | (data[2] << 8);
  const std::string_view text(reinterpret_cast<const char*>(data) + 3, size - 3);
  try {
    const auto tok = lockstep::tok::parse_tiktoken(
        text, "fuzz", kind == 0 ? lockstep::tok::PreTokenizer::kGpt2 : lockstep::tok::PreTokenizer::kCl100k,
        {{"<|endoftext|>", special_id}}, "fuzz", kind == 2 ? o200k : nullptr);
    const std::string_view sample = text.substr(0, 96);
    if (tok.decode(tok.encode(sample)) != sample) __builtin_trap();
    const std::string with_special = std::string(sample.substr(0, 20)) + "<|endoftext|>" + std::string(sample.substr(20));
    if (tok.decode(tok.encode_with_specials(with_special)) != with_special) __builtin_trap();
  } catch (const std::runtime_error&) {
  }
  return 0;
}
