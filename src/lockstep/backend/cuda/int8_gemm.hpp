// The int8 GEMM of the units (issue 11), on device pointers:
//   C[n*M + m] = sum over k of A[n*K + k] * B[m*K + k]     (int8 codes, int32 out)
// exact, so every correct implementation gives the int32 of the CPU's
// ops::int8_matmul_nt (ops/quant.hpp). K <= 131071 (ops::kMaxQuantK) keeps the
// int32 sums from overflowing (|q·q| <= 127² < 2^14); a larger K is refused
// with a message naming the shape.
//
// Implementations (int8_gemm_launch.hpp): DP4A, tensor-core IMMA (mma.sync
// m16n8k32 s8) on two block tiles, and cuBLASLt's int8 matmul. Each is gated
// bit for bit against the CPU at start-up (gate_int8.cpp: ragged shapes,
// extreme codes, K = 131071, on a clean and a poisoned pool); one that fails a
// case is never used. A short race per shape class then keeps the fastest
// gated implementation (int8_selection(): its report is the line
// `lockstep train` prints). The choice changes no bit.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "lockstep/backend/cuda/int8_gemm_launch.hpp"

namespace lockstep::cuda {

enum class Int8Impl : int { dp4a = 0, imma_128x128 = 1, imma_128x256 = 2, cublaslt = 3 };
inline constexpr int kInt8Impls = 4;
std::string_view int8_impl_name(Int8Impl impl);  // "dp4a", "imma 128x128", "imma 128x256", "cublasLt"
bool int8_is_own(Int8Impl impl);                 // lockstep's own kernel (not cuBLASLt)

// Throws std::invalid_argument when K > 131071:
// "int8_gemm_nt: K 131072 > 131071 for the product N 3 M 5 K 131072: int32 sums could overflow".
void int8_check_shape(std::size_t N, std::size_t M, std::size_t K);

// The product with the implementation the race chose for the shape's class
// (the first call runs the int8 gates, if start-up did not, and the race).
// Asynchronous on `stream`.
void int8_gemm_nt(const std::int8_t* A, const std::int8_t* B, std::int32_t* C, std::size_t N, std::size_t M,
                  std::size_t K, cudaStream_t stream = nullptr);

// One named implementation, gated or not (the gates, the tests, the
// benchmark): "" when launched; otherwise why not (cuBLASLt's requirements),
// and nothing was launched. The active int8 mutant (mutant.hpp) is planted in
// the kernel it names.
std::string int8_gemm_nt_with(Int8Impl impl, const std::int8_t* A, const std::int8_t* B, std::int32_t* C,
                              std::size_t N, std::size_t M, std::size_t K, cudaStream_t stream = nullptr);

// Shape classes of the race: by N·M·K (small < 2^28 <= medium < 2^33 <=
// large), and apart for calls the 16-byte loads cannot take (K % 16 != 0 or
// A or B not 16-byte aligned: "ragged").
enum class Int8Class : int { small, medium, large, small_ragged, medium_ragged, large_ragged };
inline constexpr int kInt8Classes = 6;
Int8Class int8_class_of(const void* A, const void* B, std::size_t N, std::size_t M, std::size_t K);
std::string_view int8_class_name(Int8Class c);

struct Int8Selection {
  std::array<bool, kInt8Impls> admitted{};       // passed its every gate case, failed none
  std::array<std::string, kInt8Impls> refused;   // why not admitted: the first failing case
  std::array<int, kInt8Impls> cases_passed{};    // gate outcomes (both passes)
  std::array<Int8Impl, kInt8Classes> choice{};   // fastest admitted on the class's race shape
  std::array<Int8Impl, kInt8Classes> own{};      // fastest admitted own kernel (when cuBLASLt cannot take a call)
  std::array<std::array<double, kInt8Impls>, kInt8Classes> tops{};  // race result, TOPS; < 0: not run
  std::string report;  // "int8 GEMM (CUDA): ..." (one line)
};
// The gates' verdict (running the int8 gate cases if start-up did not) and
// the race, once per process. Throws std::runtime_error if no own kernel passed.
const Int8Selection& int8_selection();
std::string int8_report();  // int8_selection().report

// --- the gates' bookkeeping (gate_int8.cpp) ---------------------------------------
// One gate outcome of `impl` ("" = pass).
void int8_gate_record(Int8Impl impl, const std::string& difference, const std::string& where);
// Tests only: forget the gate outcomes and the race (after a planted mutant).
void int8_selection_reset();
// Gates and tests only: every int8_gemm_nt call runs `impl` instead of the
// race's choice (-1: the choice again), gated or not — so an op over the GEMM
// is gated under each implementation (gate_driver.cpp's variants). A forced
// cuBLASLt that cannot take a call falls back to dp4a.
void int8_gemm_force(int impl);

}  // namespace lockstep::cuda
