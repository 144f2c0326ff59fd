// Hugging Face tokenizer.json on arbitrary bytes; what loads must save and
// load back to the same vocabulary.
#include <stdexcept>
#include <string_view>

#include "lockstep/tok/bpe.hpp"

extern "C" int LLVMFuzzerTestOneInput(const unsigned char* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const auto tok = lockstep::tok::parse_hf_tokenizer_json(text, "fuzz");
    const std::string_view sample = "Hello, world! It's 2026.";
    if (tok.decode(tok.encode(sample)) != sample) __builtin_trap();
  } catch (const std::runtime_error&) {
  }
  return 0;
}
