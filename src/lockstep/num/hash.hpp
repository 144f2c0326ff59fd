// Hashing tensors by bit pattern (DESIGN.md §1): -0 and +0 hash differently,
// every NaN payload hashes differently. XXH3-64 (xxHash 0.8, seed 0) over
// little-endian bytes; the exact bytes are written down in docs/NUMERICS.md
// ("Hashing and random numbers") so another tool can reproduce any hash:
//
//   hash_bits(x, n)   = XXH3_64bits(the n elements' raw bytes)
//   hash_tensor(...)  = XXH3_64bits(record), record =
//       u32 dtype code | u32 rank | u64 dim[0] ... u64 dim[rank-1] | raw bytes
//   Hasher            = XXH3_64bits(record_1 | record_2 | ...), streamed.
//
// All integers little-endian; the element bytes are the tensor's memory
// (row-major, as stored). The dtype and shape are hashed so that a reshape
// or a reinterpretation is not a collision.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

namespace lockstep::num {

// Element types a hash record names. The numbers are part of the hash layout:
// never renumber, only append.
enum class HashDType : std::uint32_t {
  f32 = 1,
  f16 = 2,
  bf16 = 3,
  f64 = 4,
  i8 = 5,
  u8 = 6,
  i16 = 7,
  u16 = 8,
  i32 = 9,
  u32 = 10,
  i64 = 11,
  u64 = 12,
};
std::size_t dtype_size(HashDType t);  // bytes per element

// XXH3-64 of raw bytes (seed 0 unless given).
std::uint64_t hash_bytes(const void* data, std::size_t nbytes, std::uint64_t seed = 0);

// Bit-pattern hashes of plain arrays: XXH3-64 of their bytes, nothing else.
std::uint64_t hash_bits(const float* x, std::size_t n);
std::uint64_t hash_bits(const std::int32_t* x, std::size_t n);
std::uint64_t hash_bits(const std::int8_t* x, std::size_t n);

// The record of one tensor (dtype, shape, bytes); `data` holds
// product(shape) * dtype_size(dtype) bytes. Rank 0 is a scalar (1 element).
std::uint64_t hash_tensor(HashDType dtype, std::span<const std::int64_t> shape, const void* data);

// Many tensors into one hash (a model's weights, a checkpoint): the same as
// hash_bytes over the concatenation of their records, in the order added.
class Hasher {
 public:
  Hasher();
  ~Hasher();
  Hasher(const Hasher&) = delete;
  Hasher& operator=(const Hasher&) = delete;

  Hasher& add(HashDType dtype, std::span<const std::int64_t> shape, const void* data);
  Hasher& add_bytes(const void* data, std::size_t nbytes);  // raw, no record header
  std::uint64_t digest() const;                             // may be called repeatedly

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// 16 lowercase hex digits, most significant first (as xxhsum prints XXH3-64).
std::string hash_hex(std::uint64_t h);

}  // namespace lockstep::num
