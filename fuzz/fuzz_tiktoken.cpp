// tiktoken rank files on arbitrary bytes.
#include <stdexcept>
#include <string_view>

#include "lockstep/tok/bpe.hpp"

extern "C" int LLVMFuzzerTestOneInput(const unsigned char* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const auto tok = lockstep::tok::parse_tiktoken(text, "fuzz", lockstep::tok::PreTokenizer::kCl100k,
                                                   {{"<|endoftext|>", 1 << 20}}, "fuzz");
    const auto ids = tok.encode(text.substr(0, 64));
    if (tok.decode(ids) != text.substr(0, 64)) __builtin_trap();
  } catch (const std::runtime_error&) {
  }
  return 0;
}
