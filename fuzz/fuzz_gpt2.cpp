// GPT-2 encoder.json + vocab.bpe: the input is both, split at its first NUL.
#include <stdexcept>
#include <string_view>

#include "lockstep/tok/bpe.hpp"

extern "C" int LLVMFuzzerTestOneInput(const unsigned char* data, std::size_t size) {
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  const std::size_t nul = all.find('\0');
  const std::string_view enc = all.substr(0, nul), bpe = nul == std::string_view::npos ? "" : all.substr(nul + 1);
  try {
    const auto tok = lockstep::tok::parse_gpt2(enc, bpe, "fuzz");
    const std::string_view sample = "Hello, world! It's 2026.";
    if (tok.decode(tok.encode(sample)) != sample) __builtin_trap();
  } catch (const std::runtime_error&) {
  }
  return 0;
}
