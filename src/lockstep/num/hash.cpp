#include "lockstep/num/hash.hpp"

#include <bit>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

// xxHash is compiled into this file (header-only mode). GCC 12 reports a
// false "may be used uninitialized" inside its own AVX-512 intrinsics
// (_mm512_undefined_epi32) when xxHash's AVX-512 path is inlined; the
// location is in the intrinsics header, so the pragma must precede it.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#define XXH_INLINE_ALL
#include <xxhash.h>

namespace lockstep::num {

// The layout says "little-endian": on this (little-endian) host that is the
// memory as it is. A big-endian port would have to byte-swap here.
static_assert(std::endian::native == std::endian::little, "hash layout assumes little-endian");

std::size_t dtype_size(HashDType t) {
  switch (t) {
    case HashDType::i8:
    case HashDType::u8: return 1;
    case HashDType::f16:
    case HashDType::bf16:
    case HashDType::i16:
    case HashDType::u16: return 2;
    case HashDType::f32:
    case HashDType::i32:
    case HashDType::u32: return 4;
    case HashDType::f64:
    case HashDType::i64:
    case HashDType::u64: return 8;
  }
  throw std::invalid_argument("hash: unknown dtype code " +
                              std::to_string(static_cast<std::uint32_t>(t)));
}

std::uint64_t hash_bytes(const void* data, std::size_t nbytes, std::uint64_t seed) {
  return XXH3_64bits_withSeed(data, nbytes, seed);
}

std::uint64_t hash_bits(const float* x, std::size_t n) { return hash_bytes(x, n * sizeof(float)); }
std::uint64_t hash_bits(const std::int32_t* x, std::size_t n) {
  return hash_bytes(x, n * sizeof(std::int32_t));
}
std::uint64_t hash_bits(const std::int8_t* x, std::size_t n) { return hash_bytes(x, n); }

struct Hasher::State {
  XXH3_state_t xxh;
};

Hasher::Hasher() : state_(std::make_unique<State>()) { XXH3_64bits_reset(&state_->xxh); }
Hasher::~Hasher() = default;

Hasher& Hasher::add_bytes(const void* data, std::size_t nbytes) {
  if (nbytes > 0) XXH3_64bits_update(&state_->xxh, data, nbytes);
  return *this;
}

Hasher& Hasher::add(HashDType dtype, std::span<const std::int64_t> shape, const void* data) {
  // Validate everything before the first byte goes into the stream.
  std::size_t bytes = dtype_size(dtype);
  for (std::int64_t d : shape) {
    if (d < 0) throw std::invalid_argument("hash_tensor: negative dimension");
    bytes *= static_cast<std::size_t>(d);
  }
  const std::uint32_t head[2] = {static_cast<std::uint32_t>(dtype),
                                 static_cast<std::uint32_t>(shape.size())};
  add_bytes(head, sizeof head);
  for (std::int64_t d : shape) {
    const std::uint64_t u = static_cast<std::uint64_t>(d);
    add_bytes(&u, sizeof u);
  }
  return add_bytes(data, bytes);
}

std::uint64_t Hasher::digest() const { return XXH3_64bits_digest(&state_->xxh); }

std::uint64_t hash_tensor(HashDType dtype, std::span<const std::int64_t> shape, const void* data) {
  Hasher h;
  h.add(dtype, shape, data);
  return h.digest();
}

std::string hash_hex(std::uint64_t h) { return fmt::format("{:016x}", h); }

}  // namespace lockstep::num

#pragma GCC diagnostic pop
