#include "lockstep/dist/comm.hpp"

#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

namespace lockstep::dist {

namespace {
bool env_int(const char* name, int* out) {
  const char* v = std::getenv(name);
  if (!v || !*v) return false;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  if (*end != '\0' || x < 0 || x > (1 << 24)) return false;
  *out = static_cast<int>(x);
  return true;
}
}  // namespace

Launch launch_from_env() {
  Launch l;
  int size = 0, rank = 0;
  // OpenMPI's mpirun sets OMPI_COMM_WORLD_*; a PMIx launcher (OpenMPI 5, srun
  // --mpi=pmix) sets PMIX_RANK, with the size in OMPI_COMM_WORLD_SIZE or PMI_SIZE.
  const bool has_rank = env_int("OMPI_COMM_WORLD_RANK", &rank) || env_int("PMIX_RANK", &rank);
  const bool has_size = env_int("OMPI_COMM_WORLD_SIZE", &size) || env_int("PMI_SIZE", &size);
  if (!has_rank && !has_size) return l;
  l.under_launcher = true;
  l.rank = rank;
  l.world = has_size ? size : 1;
  return l;
}

std::string Comm::host_name() const {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "?";
  return buf;
}

std::vector<std::string> gather_strings(Comm& c, const std::string& mine, double timeout_s, const std::string& what) {
  const auto n = static_cast<std::size_t>(c.size());
  const auto r = static_cast<std::size_t>(c.rank());
  std::vector<std::uint64_t> lengths = gather_words(c, {mine.size()}, timeout_s, what);
  std::vector<std::size_t> offset(n), bytes(n);
  std::size_t total = 0;
  for (std::size_t q = 0; q < n; ++q) {
    offset[q] = total;
    bytes[q] = static_cast<std::size_t>(lengths[q]);
    total += bytes[q];
  }
  std::vector<std::byte> buf(total);
  if (!mine.empty()) std::memcpy(buf.data() + offset[r], mine.data(), mine.size());
  c.all_gather(buf.data(), offset, bytes, timeout_s, what);
  std::vector<std::string> out(n);
  for (std::size_t q = 0; q < n; ++q) out[q].assign(reinterpret_cast<const char*>(buf.data() + offset[q]), bytes[q]);
  return out;
}

std::vector<std::uint64_t> gather_words(Comm& c, const std::vector<std::uint64_t>& mine, double timeout_s,
                                        const std::string& what) {
  const auto n = static_cast<std::size_t>(c.size());
  const std::size_t w = mine.size();
  std::vector<std::uint64_t> out(n * w);
  std::vector<std::size_t> offset(n), bytes(n, w * 8);
  for (std::size_t q = 0; q < n; ++q) offset[q] = q * w * 8;
  std::memcpy(out.data() + static_cast<std::size_t>(c.rank()) * w, mine.data(), w * 8);
  c.all_gather(reinterpret_cast<std::byte*>(out.data()), offset, bytes, timeout_s, what);
  return out;
}

}  // namespace lockstep::dist
