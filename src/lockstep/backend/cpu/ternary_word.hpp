// The 2-bit code word of the decode GEMVs, host and device (the CPU's
// ternary_gemm.hpp and the CUDA ternary_gemv of backend/cuda/decode_linear.cu,
// which reaches it through backend/cuda/ternary_word.hpp):
// 16 ternary codes in a 32-bit word, code k (0..15) = 4j + i as the field
// code + 1 at bits 8i + 2j, so that (word >> 2j) & 0x03030303 holds the four
// fields of codes 4j .. 4j + 3 in four bytes, one byte each — the operand of
// one __dp4a against the four activation codes 4j .. 4j + 3 packed in an int.
// The fields carry +1: word_dot = Σ (code + 1) · x = Σ code · x + Σ x, exact
// in int32. tests/infer/ternary_word_test.cpp checks both on the CPU (the
// device's __dp4a is emulated there with the same integer sum).
// A row of K codes is ternary_units(K) units of 64 codes (four words, 16
// bytes); the codes past K are 0 (field 1).
#pragma once

#include <cstddef>
#include <cstdint>

#include "lockstep/num/fp.hpp"

namespace lockstep::cpu {

inline constexpr std::size_t kTernaryUnitCodes = 64;
inline constexpr std::size_t ternary_units(std::size_t K) { return (K + kTernaryUnitCodes - 1) / kTernaryUnitCodes; }

// codes[k] in {-1, 0, 1} for k < n (n <= 16); codes past n are 0. C: float
// (the device's packing from float codes) or int8 (ops::quantize_ternary's).
template <class C>
LOCKSTEP_HD inline std::uint32_t ternary_word(const C* codes, int n) {
  std::uint32_t word = 0;
  for (int j = 0; j < 4; ++j)
    for (int i = 0; i < 4; ++i) {
      const int k = 4 * j + i;
      const int field = k < n ? static_cast<int>(codes[k]) + 1 : 1;
      word |= static_cast<std::uint32_t>(field) << (8 * i + 2 * j);
    }
  return word;
}

// Four signed bytes of a and b multiplied and summed into c (CUDA's __dp4a).
LOCKSTEP_HD inline int dp4a_s8(int a, int b, int c) {
#if defined(__CUDA_ARCH__)
  return __dp4a(a, b, c);
#else
  for (int i = 0; i < 4; ++i)
    c += static_cast<int>(static_cast<std::int8_t>(static_cast<std::uint32_t>(a) >> (8 * i))) *
         static_cast<int>(static_cast<std::int8_t>(static_cast<std::uint32_t>(b) >> (8 * i)));
  return c;
#endif
}

// Σ over the word's 16 codes of (code + 1) · x, x the 16 activation codes as 4 ints
// (x[j] holds codes 4j .. 4j + 3, code 4j in its low byte).
LOCKSTEP_HD inline int ternary_word_dot(std::uint32_t w, const int* x) {
  int p = 0;
  for (int j = 0; j < 4; ++j) p = dp4a_s8(static_cast<int>((w >> (2 * j)) & 0x03030303u), x[j], p);
  return p;
}

}  // namespace lockstep::cpu
