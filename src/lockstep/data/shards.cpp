#include "lockstep/data/shards.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

#include "lockstep/io/atomic_file.hpp"
#include "lockstep/num/rng.hpp"

namespace lockstep::data {
namespace {

constexpr char kMagic[8] = {'L', 'S', 'T', 'O', 'K', 'E', 'N', 'S'};
constexpr std::size_t kHeaderBytes = 64;

void put(std::vector<std::uint8_t>& b, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) b.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}

std::uint64_t get(const std::uint8_t* p, int bytes) {
  std::uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

void write_shard(const std::string& path, const std::vector<std::vector<std::int32_t>>& documents,
                 std::uint64_t vocab_size, std::uint64_t fingerprint) {
  if (vocab_size == 0 || vocab_size > (1ull << 31))
    throw std::invalid_argument(fmt::format("write_shard: vocabulary size {} out of range", vocab_size));
  const int width = vocab_size <= 65536 ? 2 : 4;
  std::uint64_t n = 0;
  for (const auto& d : documents) n += d.size();
  std::vector<std::uint8_t> head(kMagic, kMagic + 8);
  put(head, 1, 4);
  put(head, static_cast<std::uint64_t>(width), 4);
  put(head, vocab_size, 8);
  put(head, n, 8);
  put(head, documents.size(), 8);
  put(head, fingerprint, 8);
  put(head, 0, 8);
  put(head, 0, 8);
  std::uint64_t at = 0;
  for (const auto& d : documents) {
    put(head, at, 8);
    at += d.size();
  }
  io::write_file_atomic(path, [&](const io::ChunkWriter& w) {
    w(head);
    std::vector<std::uint8_t> buf;
    for (std::size_t di = 0; di < documents.size(); ++di) {
      buf.clear();
      for (std::int32_t t : documents[di]) {
        if (t < 0 || static_cast<std::uint64_t>(t) >= vocab_size)
          throw std::invalid_argument(
              fmt::format("write_shard: token {} of document {} is outside the vocabulary of {}", t, di, vocab_size));
        put(buf, static_cast<std::uint64_t>(t), width);
      }
      w(buf);
    }
  });
}

Shard::Shard(const std::string& path) : path_(path) {
  auto fail = [&](const std::string& msg) { throw std::runtime_error(fmt::format("{}: {}", path, msg)); };
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) fail(std::string("cannot open: ") + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    fail("cannot stat");
  }
  map_size_ = static_cast<std::size_t>(st.st_size);
  if (map_size_ < kHeaderBytes) {
    ::close(fd);
    fail(fmt::format("{} bytes is too short for the 64-byte header", map_size_));
  }
  void* m = ::mmap(nullptr, map_size_, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (m == MAP_FAILED) fail(std::string("cannot mmap: ") + std::strerror(errno));
  map_ = static_cast<const std::uint8_t*>(m);
  try {
    if (std::memcmp(map_, kMagic, 8) != 0) fail("not a lockstep token shard (bad magic)");
    h_.version = static_cast<std::uint32_t>(get(map_ + 8, 4));
    h_.token_bytes = static_cast<std::uint32_t>(get(map_ + 12, 4));
    h_.vocab_size = get(map_ + 16, 8);
    h_.n_tokens = get(map_ + 24, 8);
    h_.n_documents = get(map_ + 32, 8);
    h_.tokenizer_fingerprint = get(map_ + 40, 8);
    if (h_.version != 1) fail(fmt::format("unsupported format version {}", h_.version));
    if (h_.token_bytes != 2 && h_.token_bytes != 4) fail(fmt::format("bad bytes per token {}", h_.token_bytes));
    if (h_.vocab_size == 0 || (h_.token_bytes == 2 && h_.vocab_size > 65536))
      fail(fmt::format("vocabulary size {} does not fit {} bytes per token", h_.vocab_size, h_.token_bytes));
    const std::uint64_t room = map_size_ - kHeaderBytes;
    if (h_.n_documents > room / 8) fail(fmt::format("document count {} exceeds the file", h_.n_documents));
    const std::uint64_t after_docs = room - 8 * h_.n_documents;
    if (h_.n_tokens != after_docs / h_.token_bytes || after_docs % h_.token_bytes != 0)
      fail(fmt::format("file size {} does not match {} tokens of {} bytes and {} documents", map_size_,
                       h_.n_tokens, h_.token_bytes, h_.n_documents));
    docs_ = map_ + kHeaderBytes;
    tokens_ = docs_ + 8 * h_.n_documents;
    std::uint64_t prev = 0;
    for (std::uint64_t d = 0; d < h_.n_documents; ++d) {
      const std::uint64_t s = get(docs_ + 8 * d, 8);
      if (s < prev || s > h_.n_tokens || (d == 0 && s != 0))
        fail(fmt::format("document {} starts at {}, out of order or past the {} tokens", d, s, h_.n_tokens));
      prev = s;
    }
  } catch (...) {
    ::munmap(const_cast<std::uint8_t*>(map_), map_size_);
    throw;
  }
}

Shard::~Shard() {
  if (map_) ::munmap(const_cast<std::uint8_t*>(map_), map_size_);
}

Shard::Shard(Shard&& o) noexcept
    : path_(std::move(o.path_)), h_(o.h_), map_(o.map_), map_size_(o.map_size_), tokens_(o.tokens_), docs_(o.docs_) {
  o.map_ = nullptr;
}

std::int32_t Shard::token(std::uint64_t i) const {
  if (i >= h_.n_tokens) throw std::out_of_range(fmt::format("{}: token {} of {}", path_, i, h_.n_tokens));
  const auto v = get(tokens_ + i * h_.token_bytes, static_cast<int>(h_.token_bytes));
  if (v >= h_.vocab_size)
    throw std::runtime_error(fmt::format("{}: token {} at position {} is outside the vocabulary of {}", path_, v, i,
                                         h_.vocab_size));
  return static_cast<std::int32_t>(v);
}

void Shard::read(std::uint64_t begin, std::uint64_t n, std::int32_t* out) const {
  if (begin > h_.n_tokens || n > h_.n_tokens - begin)
    throw std::out_of_range(fmt::format("{}: tokens [{}, {}) of {}", path_, begin, begin + n, h_.n_tokens));
  for (std::uint64_t i = 0; i < n; ++i) out[i] = token(begin + i);
}

std::uint64_t Shard::document_start(std::uint64_t d) const {
  if (d >= h_.n_documents) throw std::out_of_range(fmt::format("{}: document {} of {}", path_, d, h_.n_documents));
  return get(docs_ + 8 * d, 8);
}

namespace {
void check_window(const Shard& shard, std::int64_t batch, std::int64_t seq) {
  if (batch < 1 || seq < 1) throw std::invalid_argument(fmt::format("batch {} and seq {} must be >= 1", batch, seq));
  if (shard.size() < static_cast<std::uint64_t>(seq) + 1)
    throw std::invalid_argument(
        fmt::format("the shard holds {} tokens, fewer than one window of seq+1 = {}", shard.size(), seq + 1));
}
void fill(const Shard& shard, Batch& b, std::int64_t row, std::uint64_t start) {
  std::vector<std::int32_t> w(static_cast<std::size_t>(b.seq) + 1);
  shard.read(start, w.size(), w.data());
  const auto at = static_cast<std::size_t>(row * b.seq);
  std::copy(w.begin(), w.end() - 1, b.inputs.begin() + static_cast<std::ptrdiff_t>(at));
  std::copy(w.begin() + 1, w.end(), b.targets.begin() + static_cast<std::ptrdiff_t>(at));
}
}  // namespace

Batch sample_batch(const Shard& shard, std::uint64_t seed, std::uint64_t step, std::int64_t batch, std::int64_t seq) {
  check_window(shard, batch, seq);
  Batch b{batch, seq, std::vector<std::int32_t>(static_cast<std::size_t>(batch * seq)),
          std::vector<std::int32_t>(static_cast<std::size_t>(batch * seq))};
  const std::uint64_t starts = shard.size() - static_cast<std::uint64_t>(seq);  // valid starts: [0, starts)
  for (std::int64_t r = 0; r < batch; ++r) {
    const std::uint64_t u = num::rng::bits32(seed, step, static_cast<std::uint64_t>(r));
    // Multiply-shift maps 32 random bits onto [0, starts); starts < 2^32 here
    // keeps the product in 64 bits (larger shards use two words).
    std::uint64_t start;
    if (starts <= (1ull << 32)) {
      start = (u * starts) >> 32;
    } else {
      const std::uint64_t hi = num::rng::bits32(seed, step ^ (1ull << 63), static_cast<std::uint64_t>(r));
      start = ((hi << 32) | u) % starts;
    }
    fill(shard, b, r, start);
  }
  return b;
}

Batch sequential_batch(const Shard& shard, std::uint64_t first_window, std::int64_t batch, std::int64_t seq) {
  check_window(shard, batch, seq);
  Batch b{batch, seq, std::vector<std::int32_t>(static_cast<std::size_t>(batch * seq)),
          std::vector<std::int32_t>(static_cast<std::size_t>(batch * seq))};
  const std::uint64_t windows = (shard.size() - 1) / static_cast<std::uint64_t>(seq);
  for (std::int64_t r = 0; r < batch; ++r) {
    const std::uint64_t w = (first_window + static_cast<std::uint64_t>(r)) % windows;
    fill(shard, b, r, w * static_cast<std::uint64_t>(seq));
  }
  return b;
}

}  // namespace lockstep::data
