#include "lockstep/backend/cpu/int8_gemm.hpp"

#include <stdexcept>
#include <string>

#include "lockstep/ops/quant.hpp"
#include "lockstep/util/parallel.hpp"

namespace lockstep::cpu {
namespace {

void check_shape(std::size_t N, std::size_t M, std::size_t K) {
  if (K > ops::kMaxQuantK)
    throw std::invalid_argument("int8 GEMM " + std::to_string(N) + "×" + std::to_string(M) + "×" +
                                std::to_string(K) + ": K = " + std::to_string(K) + " exceeds " +
                                std::to_string(ops::kMaxQuantK) + ", the bound for exact int32 accumulation");
}

// The scalar reference: one dot product per cell. Accumulates in int32, which
// cannot overflow for codes in [-127, 127] and K <= kMaxQuantK.
void scalar_rows(const std::int8_t* A, const std::int8_t* B, std::int32_t* C, std::size_t N, std::size_t M,
                 std::size_t K, std::size_t ldc) {
  for (std::size_t n = 0; n < N; ++n) {
    const std::int8_t* a = A + n * K;
    for (std::size_t m = 0; m < M; ++m) {
      const std::int8_t* b = B + m * K;
      std::int32_t s = 0;
      for (std::size_t k = 0; k < K; ++k) s += static_cast<std::int32_t>(a[k]) * static_cast<std::int32_t>(b[k]);
      C[n * ldc + m] = s;
    }
  }
}

}  // namespace

void int8_gemm_nt(const std::int8_t* A, const std::int8_t* B, std::int32_t* C, std::size_t N, std::size_t M,
                  std::size_t K, int threads) {
  check_shape(N, M, K);
  util::parallel_for(N, threads, 16, [&](std::size_t lo, std::size_t hi) {
    scalar_rows(A + lo * K, B, C + lo * M, hi - lo, M, K, M);
  });
}

void int8_gemm_nt(const std::int8_t* A, const std::int8_t* B, std::int32_t* C, std::size_t N, std::size_t M,
                  std::size_t K) {
  int8_gemm_nt(A, B, C, N, M, K, 0);
}

std::string int8_gemm_choice_report() { return "int8 GEMM (CPU): scalar for small, medium, large; gated 1/1"; }

}  // namespace lockstep::cpu
