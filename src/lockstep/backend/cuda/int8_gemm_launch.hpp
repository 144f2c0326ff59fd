// Launchers of the int8 GEMM kernels (int8_gemm.cu, int8_gemm_kernels.cuh)
// and of cuBLASLt's int8 product, callable from g++ code (no CUDA headers
// here). Every pointer is a device pointer; every call is asynchronous on
// `stream` (nullptr: the default stream) and none synchronizes with the host.
//
// The product, exact in int32 (the operands are int8 codes, K <= 131071):
//   C[n*M + m] = sum over k of A[n*K + k] * B[m*K + k]      (C = A·Bᵀ, "NT")
// Every implementation writes exactly the N×M cells of C (nothing around
// them), zero-pads ragged tiles in shared memory (zeros are exact) and gives
// the same int32 as ops::int8_matmul_nt: integer addition is associative, so
// the order over k is free here (DESIGN.md §1, "Int8 units").
#pragma once

#include <cstddef>
#include <cstdint>

typedef struct CUstream_st* cudaStream_t;  // as cuda_runtime's driver_types.h declares it

namespace lockstep::cuda::launch {

// The int8 GEMM mutants of mutant.hpp as the kernels name them.
enum Int8Mut : int {
  kInt8Clean = 0,
  kInt8Dp4aInt16 = 1,        // dp4a: the accumulator held in int16 (wraps)
  kInt8ImmaKTailDropped = 2,  // imma: k tiles = K / 64 rounded down (the ragged-K tail is lost)
  kInt8ImmaLastColumn = 3,    // imma: a column without its pair (odd M, the last one) is not stored
};

// DP4A (__dp4a), 64×64 block tiles, 4×4 cells a thread, k in tiles of 64
// codes. Word loads where K % 4 == 0 and both operands are 4-byte aligned,
// guarded byte loads otherwise.
void int8_dp4a(const std::int8_t* A, const std::int8_t* B, std::int32_t* C, std::size_t N, std::size_t M,
               std::size_t K, cudaStream_t stream, int mut = kInt8Clean);

// Tensor cores: mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 (IMMA), warp
// tiles of 64×64 cells, fragments through ldmatrix from padded shared rows
// (80 bytes per 64 codes: no bank conflicts), k tiles of 64 codes in a
// 3-stage cp.async pipeline. Block tile `tile`: 0 = 128×128 (4 warps),
// 1 = 128×256 (8 warps). The cp.async (16-byte) loads need K % 16 == 0 and
// 16-byte aligned A and B; otherwise the same kernel loads the tiles with
// guarded byte loads (slower, same result). Where the output's blocks would
// leave multiprocessors idle (fewer blocks than multiprocessors) and K has at
// least 8 k tiles, the k tiles are split over up to 16 blocks per output tile
// (each at least 4 tiles) that add into C, zeroed first, with integer atomics:
// exact in any order.
constexpr int kImmaTiles = 2;
void int8_imma(int tile, const std::int8_t* A, const std::int8_t* B, std::int32_t* C, std::size_t N,
               std::size_t M, std::size_t K, cudaStream_t stream, int mut = kInt8Clean);
const char* imma_tile_name(int tile);  // "128x128", "128x256"

// cuBLASLt: cublasLtMatmul, CUDA_R_8I operands, CUBLAS_COMPUTE_32I, CUDA_R_32I
// output, in its TN form (C's column-major Mx N = Bᵀ-op · A). Returns "" when
// launched, otherwise why it did not (a requirement that does not hold for
// the shape, no algorithm found, a cuBLASLt status): nothing is launched then.
// Requirements (checked here): N, M, K >= 1, K % 4 == 0, M % 4 == 0, A, B and
// C 16-byte aligned.
const char* int8_cublaslt(const std::int8_t* A, const std::int8_t* B, std::int32_t* C, std::size_t N,
                          std::size_t M, std::size_t K, cudaStream_t stream);
// The requirement cuBLASLt's call checks, without calling it ("" when it holds).
const char* int8_cublaslt_requirement(const void* A, const void* B, const void* C, std::size_t N, std::size_t M,
                                      std::size_t K);

// Device time of `reps` calls of implementation `impl` after one warm-up
// (milliseconds, the minimum over the calls), CUDA events on the default
// stream: 0 = dp4a, 1 + t = imma tile t, 1 + kImmaTiles = cuBLASLt.
// Negative if the implementation cannot take the shape.
double int8_time_ms(int impl, const std::int8_t* A, const std::int8_t* B, std::int32_t* C, std::size_t N,
                    std::size_t M, std::size_t K, int reps);

// First cell where a[0..n) and b[0..n) differ on the device, or n (one
// launch, then a wait): for comparing a new implementation against a gated one
// on shapes too large for the CPU.
std::size_t int32_first_difference(const std::int32_t* a, const std::int32_t* b, std::size_t n);

}  // namespace lockstep::cuda::launch
