// The LM head's GEMV, v2 (head_gemv.cu): ops::Linear's forward on the exact
// f16 copy of the weights (f16_pack), y[n, m] = canonical_nan(chain of
// fma(x[n, k], w[m, k], acc) over k ascending from +0) (+ b[m]) — the same
// cells as decode_linear.cu's chain_gemv_f16_rows_kernel, bit for bit.
// Callable from g++ code; launched on the default stream.
#pragma once

#include <cstddef>
#include <cstdint>

namespace lockstep::cuda::launch {

// Which kernel chain_gemv runs for f16 weights with K % 8 == 0 (16-byte aligned
// w and x): 1, decode_linear.cu's thread-a-row kernel; 2, v2 (KT 64, 4
// stages; the default since session 11, measured faster at 1, 8 and 32 rows);
// 3, v2 wide (KT 128, 3 stages). From the environment's
// LOCKSTEP_HEAD_GEMV = v1 | v2 | v2wide at first use (another value: an
// std::invalid_argument naming it); set_head_gemv_version(1, 2 or 3)
// overrides it (tests), 0 goes back to the environment.
int head_gemv_version();
void set_head_gemv_version(int version);

struct HeadGemvOptions {
  bool wide = false;           // KT 128 (256-byte runs of each row), 3 stages; else KT 64, 4 stages
  bool mul_add = false;        // DecodeLinearMutant::chain_mul_add: the product rounded before the add
  bool stage_early = false;    // planted: waits one copy group short (a stage read before its copy lands)
  bool k_descending = false;   // planted: each tile's 8-k groups chained backwards (deterministic)
  bool plant_no_stage_barrier = false;       // host emulator only: no barrier before a stage is read
  bool plant_refill_before_barrier = false;  // host emulator only: tile t - 1's stage refilled before the barrier
};

// y [N, M] from w16 [M, K] (f16 bits), x [N, K], b [M] or null. Preconditions
// (the caller's, decode_linear.cu's f16_rows_apply): K % 8 == 0, w16 and x
// 16-byte aligned; N, M, K within int.
void head_gemv_v2(const std::uint16_t* w16, const float* x, const float* b, std::size_t N, std::size_t M,
                  std::size_t K, float* y, const HeadGemvOptions& options);

}  // namespace lockstep::cuda::launch
