// The fast CPU matrix product, in the canonical order.
//
//   C[i*ldc + j] = chain over k = 0..K-1 of A(i,k)·B(k,j)
//   A(i,k) = A[i*sai + k*sak],  B(k,j) = B[k*sbk + j*sbj]
//   chain: acc = +0; acc = fma(A(i,k), B(k,j), acc) for k ascending; a NaN
//   result is written as the canonical NaN.
//
// This is bit for bit ops::matmul (src/lockstep/ops/op.hpp), the reference
// every op specification uses: register tiling, k-blocking (the partial
// accumulator parks in C between blocks, so each cell's sequence of fmas is
// unchanged), packing and threads change where values live and who computes
// them, never the order of the fmas. tests/cpu/gemm_test.cpp holds the
// bit-identity checks against the reference.
#pragma once

#include <cstddef>
#include <functional>

namespace lockstep::cpu {

// bias (optional, J values): C[i*ldc + j] = chain + bias[j] (the product's
// value, canonical NaN, then one add), as a separate bias pass would write.
void gemm(std::size_t I, std::size_t J, std::size_t K, const float* A, std::size_t sai, std::size_t sak,
          const float* B, std::size_t sbk, std::size_t sbj, float* C, std::size_t ldc, int threads,
          const float* bias = nullptr);

// B packed once, for products that reuse it (decoding reads each weight
// matrix once per token): B(k, j) at Bp[k·ldb + j], ldb = packed_ld(J), the
// padding zero; gemm_packed computes gemm's cells with gemm's chains (the
// same bits), its work split over column tiles (few rows).
std::size_t packed_ld(std::size_t J);
void pack_b(std::size_t J, std::size_t K, const float* B, std::size_t sbk, std::size_t sbj, float* Bp, int threads);
void gemm_packed(std::size_t I, std::size_t J, std::size_t K, const float* A, std::size_t sai, std::size_t sak,
                 const float* Bp, std::size_t ldb, float* C, std::size_t ldc, int threads);

// gemm's cells with gemm's chains (the same bits), B given column tile by
// column tile instead of as a matrix: fill(j0, jn, tile) writes B(k, j0 + j)
// at tile[k·tile_width() + j] for k < K, j < jn (the rest of each row is
// zeroed after it). For an operand never held whole as floats (a BitLinear
// weight held as 2-bit codes: one tile of floats a thread at a time). Column
// tiles across threads, all the rows on each.
using BTileFill = std::function<void(std::size_t j0, std::size_t jn, float* tile)>;
std::size_t tile_width();
void gemm_b_tiles(std::size_t I, std::size_t J, std::size_t K, const float* A, std::size_t sai, std::size_t sak,
                  const BTileFill& fill, float* C, std::size_t ldc, int threads);

// The three products of a linear layer (nn.Linear layout, W is [M, K]):
// Y = X·Wᵀ, dX = dY·W, dW = dYᵀ·X (sum over rows n ascending).
// Y = X·Wᵀ (+ b[m] after the product, when bias is given).
void gemm_xwt(std::size_t N, std::size_t M, std::size_t K, const float* X, const float* W, float* Y, int threads,
              const float* bias = nullptr);
void gemm_dyw(std::size_t N, std::size_t M, std::size_t K, const float* dY, const float* W, float* dX, int threads);
void gemm_dytx(std::size_t N, std::size_t M, std::size_t K, const float* dY, const float* X, float* dW, int threads);

}  // namespace lockstep::cpu
