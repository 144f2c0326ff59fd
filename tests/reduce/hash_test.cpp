// Tensor hashing by bit pattern (src/lockstep/num/hash.*).
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "lockstep/num/hash.hpp"
#include "test_data.hpp"

namespace {

namespace num = lockstep::num;
namespace t = lockstep::test;
using num::float_of;
using num::HashDType;

// The six floats of the small known answers: 1, -0, +0, canonical NaN, -inf, 3.14159f.
std::array<float, 6> small_floats() {
  return {1.0f, float_of(0x80000000u), 0.0f, float_of(0x7FC00000u), float_of(0xFF800000u),
          3.14159f};
}

// Known answers computed with an independent implementation: Python's xxhash
// 4.1.0 (xxh3_64_intdigest, its bundled copy of the xxHash C library), over
// byte strings built with Python's struct module
// (`python3 tests/reduce/golden.py --hash` prints them).
TEST(Hash, KnownAnswersFromPythonXxhash) {
  const auto small = small_floats();
  const std::vector<float> thousand = t::golden_data(5, 1000);
  const std::vector<float> big = t::golden_data(6, 100000);
  const std::int64_t s23[] = {2, 3}, s32[] = {3, 2}, s6[] = {6}, s100k[] = {100000};
  const float scalar = 2.5f;
  struct Kat {
    const char* what;
    std::uint64_t got, want;
  };
  num::Hasher two;
  two.add(HashDType::f32, s23, small.data()).add(HashDType::f32, s100k, big.data());
  const Kat kats[] = {
      {"empty", num::hash_bytes("", 0), 0x2d06800538d394c2ull},
      {"\"lockstep\"", num::hash_bytes("lockstep", 8), 0x2f270043200950ecull},
      {"small floats", num::hash_bits(small.data(), small.size()), 0x281dbe944e050aafull},
      {"small, seed 12345", num::hash_bytes(small.data(), sizeof small, 12345),
       0x6fe535627bf92a85ull},
      {"1000 floats", num::hash_bits(thousand.data(), thousand.size()), 0xd9af0b5c0a25a31bull},
      {"100000 floats", num::hash_bits(big.data(), big.size()), 0x05a4a0bffe2c6877ull},
      {"tensor f32 [2,3]", num::hash_tensor(HashDType::f32, s23, small.data()),
       0x40d24c0aaef64f57ull},
      {"tensor f32 [3,2]", num::hash_tensor(HashDType::f32, s32, small.data()),
       0xa4173c033bad04d6ull},
      {"tensor f32 [6]", num::hash_tensor(HashDType::f32, s6, small.data()), 0x0de4e3f5edd637a3ull},
      {"tensor i32 [2,3]", num::hash_tensor(HashDType::i32, s23, small.data()),
       0xcc42f11619a57431ull},
      {"tensor f32 [] (scalar)", num::hash_tensor(HashDType::f32, {}, &scalar),
       0x69c793664f5ae9d1ull},
      {"two records", two.digest(), 0x6e02437776ae7de1ull},
  };
  int bad = 0;
  for (const Kat& k : kats) {
    if (k.got != k.want) {
      ++bad;
      ADD_FAILURE() << k.what << ": got " << num::hash_hex(k.got) << " want "
                    << num::hash_hex(k.want);
    }
  }
  std::printf("XXH3-64 known answers: %zu, %d wrong\n", std::size(kats), bad);
}

TEST(Hash, HexFormat) {
  EXPECT_EQ(num::hash_hex(0x2d06800538d394c2ull), "2d06800538d394c2");
  EXPECT_EQ(num::hash_hex(0x5ull), "0000000000000005");
}

TEST(Hash, SignedZerosAndNaNPayloadsDiffer) {
  const float pz = 0.0f, nz = float_of(0x80000000u);
  EXPECT_NE(num::hash_bits(&pz, 1), num::hash_bits(&nz, 1));
  const float n1 = float_of(0x7FC00000u), n2 = float_of(0x7FC00001u), n3 = float_of(0xFFC00000u);
  EXPECT_NE(num::hash_bits(&n1, 1), num::hash_bits(&n2, 1));
  EXPECT_NE(num::hash_bits(&n1, 1), num::hash_bits(&n3, 1));
  std::vector<float> a = t::golden_data(9, 1000), b = a;
  b[500] = -0.0f, a[500] = 0.0f;
  EXPECT_NE(num::hash_bits(a.data(), a.size()), num::hash_bits(b.data(), b.size()));
}

TEST(Hash, EveryOneBitFlipChangesTheHash) {
  // Every bit of a 3000-float tensor (96,000 flips) and of its shape header.
  const std::vector<float> x = t::golden_data(11, 3000);
  const std::int64_t shape[] = {30, 100};
  const std::uint64_t h0 = num::hash_tensor(HashDType::f32, shape, x.data());
  std::size_t flips = 0, same = 0;
  std::vector<float> y = x;
  for (std::size_t i = 0; i < y.size(); ++i) {
    for (int b = 0; b < 32; ++b) {
      const std::uint32_t u = num::bits_of(x[i]) ^ (1u << b);
      y[i] = float_of(u);
      ++flips;
      same += num::hash_tensor(HashDType::f32, shape, y.data()) == h0;
      y[i] = x[i];
    }
  }
  for (int b = 0; b < 63; ++b) {  // the first dim: 30 -> 30 ^ 2^b
    const std::int64_t d0 = shape[0] ^ (std::int64_t{1} << b);
    if (d0 <= 0 || d0 > shape[0]) continue;  // fewer elements: the data stays valid
    const std::int64_t other[] = {d0, shape[1]};
    ++flips;
    same += num::hash_tensor(HashDType::f32, other, y.data()) == h0;
  }
  std::printf("one-bit flips: %zu, %zu left the hash unchanged\n", flips, same);
  EXPECT_EQ(same, 0u);
  EXPECT_GT(flips, 96000u);
}

TEST(Hash, RecordLayoutIsAsDocumented) {
  // hash_tensor == hash_bytes of the hand-built record (u32 dtype, u32 rank,
  // u64 dims, bytes), and Hasher == hash of the concatenated records.
  const auto small = small_floats();
  const std::int64_t shape[] = {2, 3};
  // 4 + 4 + 2 * 8 header bytes, then the 24 data bytes.
  unsigned char rec[2 * 48];
  const std::uint32_t head[2] = {9, 2};  // i32 code, rank 2
  std::memcpy(rec, head, 8);
  for (std::size_t d = 0; d < 2; ++d) {
    const std::uint64_t u = static_cast<std::uint64_t>(shape[d]);
    std::memcpy(rec + 8 + 8 * d, &u, 8);
  }
  std::memcpy(rec + 24, small.data(), sizeof small);
  EXPECT_EQ(num::hash_tensor(HashDType::i32, shape, small.data()), num::hash_bytes(rec, 48));
  std::memcpy(rec + 48, rec, 48);  // the same record twice
  num::Hasher h;
  h.add(HashDType::i32, shape, small.data());
  const std::uint64_t first = h.digest();
  h.add(HashDType::i32, shape, small.data());
  EXPECT_EQ(first, num::hash_bytes(rec, 48));
  EXPECT_EQ(h.digest(), num::hash_bytes(rec, 96));
  EXPECT_EQ(h.digest(), h.digest());
}

TEST(Hash, RejectsBadInput) {
  const float x = 1.0f;
  const std::int64_t neg[] = {-1};
  EXPECT_THROW(num::hash_tensor(HashDType::f32, neg, &x), std::invalid_argument);
  EXPECT_THROW(num::hash_tensor(static_cast<HashDType>(99), {}, &x), std::invalid_argument);
  EXPECT_EQ(num::dtype_size(HashDType::bf16), 2u);
  EXPECT_EQ(num::dtype_size(HashDType::i64), 8u);
}

}  // namespace
