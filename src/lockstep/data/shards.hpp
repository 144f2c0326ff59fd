// Token shards: the training data on disk, memory-mapped for reading.
//
// File format (".tokens", little-endian), version 1:
//   offset  size  field
//   0       8     magic "LSTOKENS"
//   8       4     format version (1)
//   12      4     bytes per token: 2 (vocab <= 65536) or 4
//   16      8     vocabulary size (every token id is below it)
//   24      8     number of tokens n
//   32      8     number of documents d
//   40      8     tokenizer fingerprint (a hash of the vocabulary; 0 = unknown)
//   48      16    reserved, zero
//   64      8·d   document start offsets (token index of each document's first token, ascending)
//   64+8d   n·w   the tokens
// Documents are stored back to back; a document's last token is usually the
// end-of-text token, which the writer does not add by itself.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace lockstep::data {

struct ShardHeader {
  std::uint32_t version = 1;
  std::uint32_t token_bytes = 2;
  std::uint64_t vocab_size = 0;
  std::uint64_t n_tokens = 0;
  std::uint64_t n_documents = 0;
  std::uint64_t tokenizer_fingerprint = 0;
};

// Writes documents (each a token sequence) as one shard, atomically. Throws
// std::invalid_argument if a token is outside [0, vocab_size).
void write_shard(const std::string& path, const std::vector<std::vector<std::int32_t>>& documents,
                 std::uint64_t vocab_size, std::uint64_t tokenizer_fingerprint = 0);

// A read-only, memory-mapped shard. Every header field and every document
// offset is validated on open; errors name the file and the field.
class Shard {
 public:
  explicit Shard(const std::string& path);
  ~Shard();
  Shard(Shard&& o) noexcept;
  Shard& operator=(Shard&&) = delete;
  Shard(const Shard&) = delete;
  Shard& operator=(const Shard&) = delete;

  const ShardHeader& header() const { return h_; }
  std::uint64_t size() const { return h_.n_tokens; }
  std::int32_t token(std::uint64_t i) const;
  // Copies tokens [begin, begin + n) into out (as int32).
  void read(std::uint64_t begin, std::uint64_t n, std::int32_t* out) const;
  std::uint64_t document_start(std::uint64_t d) const;

 private:
  std::string path_;
  ShardHeader h_;
  const std::uint8_t* map_ = nullptr;
  std::size_t map_size_ = 0;
  const std::uint8_t* tokens_ = nullptr;
  const std::uint8_t* docs_ = nullptr;
};

// Batches of training windows drawn from a shard: window b of step s starts
// at position floor(u · (n − T)) where u is 32 bits of Philox(seed, stream =
// step, index = b) mapped to [0, n − T) by a 64-bit multiply-shift. A batch is
// a pure function of (seed, step): resuming at step s needs no other state,
// and any device or thread count draws the same windows.
struct Batch {
  std::int64_t batch = 0, seq = 0;
  std::vector<std::int32_t> inputs;   // [batch, seq]
  std::vector<std::int32_t> targets;  // [batch, seq], inputs shifted by one
};
Batch sample_batch(const Shard& shard, std::uint64_t seed, std::uint64_t step, std::int64_t batch,
                   std::int64_t seq);

// Window b of step s in order: the (s·batch + b)-th window of seq+1 tokens,
// wrapping around (for evaluation: every token scored once per pass).
Batch sequential_batch(const Shard& shard, std::uint64_t first_window, std::int64_t batch, std::int64_t seq);

}  // namespace lockstep::data
