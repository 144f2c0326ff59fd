// GGUF tensor data decoders and the model loader on arbitrary bytes: the file
// parsed, every tensor decoded as typed storage, then loaded as a llama /
// bitnet model (both ternary holdings). Only std::runtime_error may come out,
// and its message is one line with no raw control byte.
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "lockstep/io/gguf.hpp"
#include "lockstep/io/gguf_tensor.hpp"
#include "lockstep/load/model_file.hpp"

namespace {
void check_message(const std::exception& e) {
  for (const char* p = e.what(); *p; ++p)
    if (static_cast<unsigned char>(*p) < 0x20) std::abort();  // an unescaped byte reached a message
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const unsigned char* data, std::size_t size) {
  const std::span<const unsigned char> bytes(data, size);
  try {
    const lockstep::io::GgufFile g = lockstep::io::gguf_parse(bytes, "fuzz");
    for (const auto& t : g.tensors) {
      try {
        std::uint64_t n = 1;
        for (auto d : t.dims) n *= d;
        if (n > (1u << 22)) continue;  // the decoders' output is sized by the header: keep the fuzzer's memory bounded
        (void)lockstep::io::gguf_storage(t, lockstep::io::gguf_tensor_data(bytes, g, t), "fuzz");
      } catch (const std::runtime_error& e) {
        check_message(e);
      }
    }
  } catch (const std::runtime_error& e) {
    check_message(e);
  }
  for (auto as : {lockstep::load::TernaryAs::f32_master, lockstep::load::TernaryAs::ternary2}) {
    try {
      (void)lockstep::load::load_gguf_model_bytes(bytes, "fuzz", {as});
    } catch (const std::runtime_error& e) {
      check_message(e);
    }
  }
  return 0;
}
