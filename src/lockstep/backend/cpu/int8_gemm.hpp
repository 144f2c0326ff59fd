// The CPU int8 GEMM of the int8 units (issue 11), exact in int32.
//
//   C[n*M + m] = Σ_k A[n*K + k] · B[m*K + k]     (A is [N, K], B is [M, K]: "nt")
//
// Codes lie in [-127, 127], so |A·B| <= 127² < 2^14 and K <= ops::kMaxQuantK
// (131071) keeps every partial sum inside int32: the sum is exact, and any
// correct implementation (a plain loop, AVX-512 VNNI, AMX tiles) returns the
// same int32. The fastest one is therefore also the verifiable one.
//
// int8_gemm_nt picks among the implementations this machine offers: before the
// first product each one is checked bit-exact against the scalar reference
// (the start-up gate: ragged shapes, extreme codes, K at the bound), an
// implementation that fails is never used, and a short race per shape class
// keeps the fastest gated one. The choice changes no bit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace lockstep::cpu {

// C[n*M + m] = Σ_k A[n*K + k] · B[m*K + k], exact in int32 (codes in [-127,127]).
// Throws std::invalid_argument naming the shape ("int8 GEMM N×M×K: K = ... exceeds 131071, the bound
// for exact int32 accumulation") when K > ops::kMaxQuantK. Uses all hardware threads.
void int8_gemm_nt(const std::int8_t* A, const std::int8_t* B, std::int32_t* C,
                  std::size_t N, std::size_t M, std::size_t K);
// The same product on `threads` threads (<= 0: all hardware threads); the bits
// do not depend on it.
void int8_gemm_nt(const std::int8_t* A, const std::int8_t* B, std::int32_t* C,
                  std::size_t N, std::size_t M, std::size_t K, int threads);

// Which implementation int8_gemm_nt uses for a shape class on this machine, for reporting.
std::string int8_gemm_choice_report();

}  // namespace lockstep::cpu
