// Hugging Face tokenizer.json on arbitrary bytes (pre-tokenizer Sequences of
// Split regexes through PCRE2, Digits, ByteLevel; added tokens; the
// post-processor's BOS). Only std::runtime_error may leave the parser; what
// loads must round-trip text exactly, and save and load back to a tokenizer
// that encodes the same.
#include <stdexcept>
#include <string_view>

#include "lockstep/tok/bpe.hpp"

extern "C" int LLVMFuzzerTestOneInput(const unsigned char* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const auto tok = lockstep::tok::parse_hf_tokenizer_json(text, "fuzz");
    const std::string sample = "Hello, world! It's 2026.\n  x" + std::string(text.substr(text.size() - std::min<std::size_t>(text.size(), 64)));
    const auto ids = tok.encode(sample);
    if (tok.decode(ids) != sample) __builtin_trap();
    if (tok.decode(tok.encode_prompt(sample)).find(sample) == std::string::npos) __builtin_trap();
    const auto again = lockstep::tok::parse_hf_tokenizer_json(lockstep::tok::to_hf_tokenizer_json(tok), "fuzz-saved");
    if (again.encode(sample) != ids || again.add_bos() != tok.add_bos()) __builtin_trap();
  } catch (const std::runtime_error&) {
  } catch (const std::invalid_argument&) {
    // to_hf_tokenizer_json refuses a vocabulary whose token bytes repeat.
  }
  return 0;
}
