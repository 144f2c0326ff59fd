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

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

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

// The pieces behind int8_gemm_nt, open for tests and benchmarks (the gate takes
// any kernel, so a test can hand it a planted wrong one).
namespace int8 {

// One implementation, single-threaded: rows [0, N) of C (row stride ldc) from
// A [N, K] and B [M, K], both row-major. Any K <= kMaxQuantK, including 0.
using Kernel = void (*)(const std::int8_t* A, const std::int8_t* B, std::int32_t* C, std::size_t N,
                        std::size_t M, std::size_t K, std::size_t ldc);
struct Impl {
  const char* name = "";
  Kernel kernel = nullptr;  // nullptr: not compiled for this target
};
Impl scalar_impl();  // the reference: one int32 dot product per cell
// AVX-512 VNNI (vpdpbusd, u8×s8): B offset to unsigned by +128, corrected by
// 128·Σ_k A[n, k] per row, in wrapping int32 (int8_gemm_kernels.cpp says why
// that is exact).
Impl vnni_impl();
// VNNI for few rows: no packing, one dot product per cell (the same offset).
Impl vnni_dot_impl();
// AMX-INT8 tiles (tdpbssd, s8×s8 directly). The caller must hold the tile
// permission (probe_machine asks for it) and the CPU must have amx_int8.
Impl amx_impl();
// The AMX kernel with the tile instructions emulated in C++ (Intel's
// pseudo-code): its packing, padding and blocking, testable without AMX.
// Slow; never a candidate.
Impl amx_emulated_impl();

// What this machine offers, from cpuid and the kernel, not from compile flags.
struct Machine {
  bool vnni = false;           // avx512f + avx512bw + avx512_vnni, and the OS saves the zmm state
  bool amx_cpu = false;        // amx_tile + amx_int8, and the OS enables the tile state (XCR0)
  bool amx_permitted = false;  // arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) granted
};
// refuse_amx_permission: a test hook that pretends the kernel refused the tile
// permission (nothing is asked then).
Machine probe_machine(bool refuse_amx_permission = false);

// The implementations a machine can run (scalar first), and one line per one
// it cannot ("amx: cpu lacks amx_int8").
struct Candidates {
  std::vector<Impl> impls;
  std::vector<std::string> unavailable;
};
Candidates candidates_for(const Machine& machine);

// Shape classes for the race, by the product N·M·K.
enum class ShapeClass { small, medium, large };
inline constexpr std::size_t kShapeClasses = 3;
ShapeClass shape_class(std::size_t N, std::size_t M, std::size_t K);
const char* shape_class_name(ShapeClass c);

// The start-up gate: `kernel`, run through the same row/column split as
// int8_gemm_nt on `threads` threads, against the scalar reference on fixed
// ragged shapes and extreme codes (±127, up to K = kMaxQuantK). Stops at the
// first mismatching case; `failure` names it.
struct GateResult {
  bool passed = false;
  std::size_t cases = 0;  // cases run
  std::string failure;
};
GateResult gate(Kernel kernel, int threads = 0);
std::size_t gate_case_count();

// Gate every candidate, race the gated ones per shape class, keep the fastest.
struct Plan {
  std::array<Impl, kShapeClasses> chosen;
  std::string report;  // int8_gemm_choice_report()
};
Plan make_plan(const Candidates& candidates);

// The product through `kernel` on `threads` threads: rows (or, for few rows,
// columns) cut by util::parallel_for. Checks the K bound.
void run(Kernel kernel, const std::int8_t* A, const std::int8_t* B, std::int32_t* C, std::size_t N,
         std::size_t M, std::size_t K, int threads);

}  // namespace int8
}  // namespace lockstep::cpu
