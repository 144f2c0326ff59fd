// The R data reader (embedded corpus) on arbitrary bytes, both as an .rdb
// (zlib blobs) and as a bare serialization: only std::runtime_error may come out.
#include <stdexcept>

#include "lockstep/data/rdata.hpp"

extern "C" int LLVMFuzzerTestOneInput(const unsigned char* data, std::size_t size) {
  try {
    (void)lockstep::data::parse_rdb({data, size}, "fuzz");
  } catch (const std::runtime_error&) {
  }
  try {
    (void)lockstep::data::parse_r_character_vector({data, size}, "fuzz");
  } catch (const std::runtime_error&) {
  }
  return 0;
}
