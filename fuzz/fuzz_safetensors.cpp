// safetensors reader on arbitrary bytes: only std::runtime_error may come out,
// and every tensor it accepts lies inside the file.
#include <cstdlib>
#include <stdexcept>
#include <vector>

#include "lockstep/io/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const unsigned char* data, std::size_t size) {
  try {
    const auto f = lockstep::io::SafetensorsFile::parse(std::vector<std::uint8_t>(data, data + size), "fuzz");
    for (const auto& t : f.tensors()) {
      const auto b = f.bytes(t.name);
      if (b.size() != t.end - t.begin) std::abort();
      if (t.dtype == lockstep::io::DType::F32) (void)f.f32(t.name);
    }
  } catch (const std::runtime_error&) {
  }
  return 0;
}
