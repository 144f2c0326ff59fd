// Token shard reader on arbitrary bytes (through a file: the reader maps it):
// only std::runtime_error / std::out_of_range may come out.
#include <unistd.h>

#include <cstdio>
#include <stdexcept>
#include <string>

#include "lockstep/data/shards.hpp"

extern "C" int LLVMFuzzerTestOneInput(const unsigned char* data, std::size_t size) {
  static const std::string path = "/tmp/lockstep_fuzz_shard_" + std::to_string(::getpid());
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  try {
    lockstep::data::Shard s(path);
    const std::uint64_t n = s.size() < 64 ? s.size() : 64;
    for (std::uint64_t i = 0; i < n; ++i) (void)s.token(i);
    for (std::uint64_t d = 0; d < s.header().n_documents && d < 8; ++d) (void)s.document_start(d);
  } catch (const std::runtime_error&) {
  } catch (const std::out_of_range&) {
  }
  return 0;
}
