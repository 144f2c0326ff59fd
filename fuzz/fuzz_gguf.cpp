// GGUF reader + tokenizer-from-metadata on arbitrary bytes: only
// std::runtime_error may come out.
#include <stdexcept>

#include "lockstep/io/gguf.hpp"
#include "lockstep/tok/gguf_vocab.hpp"

extern "C" int LLVMFuzzerTestOneInput(const unsigned char* data, std::size_t size) {
  try {
    const lockstep::io::GgufFile g = lockstep::io::gguf_parse({data, size}, "fuzz");
    auto tok = lockstep::tok::tokenizer_from_gguf(g);
    const auto ids = tok->encode("Hello world 123 'll \xF0\x9F\x98\x80");
    (void)tok->decode(ids);
  } catch (const std::runtime_error&) {
  }
  return 0;
}
