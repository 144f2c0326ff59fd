// Known kernel bugs the gates must catch (issue: "the gates have teeth"). A
// launcher reads the active mutant and, only when it names that launcher's
// kernel, runs the buggy variant; with Mutant::none (always, outside the
// mutants test) every kernel is the clean one. Process-wide, not thread-safe:
// set it only in tests.
#pragma once

#include <string_view>

namespace lockstep::cuda {

enum class Mutant {
  none,
  gemm_assign_not_accumulate,  // acc = a·b instead of acc = fma(a, b, acc)     (gemm.cu)
  gemm_no_bounds_guard,        // loads past the matrix edge without the guard  (gemm.cu)
  gemm_skip_last_column,       // the last output column is never written       (gemm.cu)
  gemm_missing_barrier,        // a tile is overwritten before all threads read it (gemm.cu)
  attention_drop_scale,        // scores without the 1/sqrt(Dh) factor          (attention.cu)
  residual_flush_negative_zero,  // -0 written as +0                            (pointwise.cu)
  layernorm_fused_mul_add,     // fma where the spec has mul then add           (norm.cu)
  adamw_decay_every_tensor,    // AdamW decays norms and biases too (decay flag ignored) (optim.cu)
  clip_without_epsilon,        // clip = max_norm / norm, the + 1e-6 dropped     (optim.cu)
  clip_scales_up,              // the clip applied whenever it is not 1 (scales small gradients up) (optim.cu)
  int8_dp4a_int16_accumulator,  // the DP4A int8 GEMM sums in int16 (wraps)      (int8_gemm_kernels.cuh)
  int8_imma_k_tail_dropped,     // the IMMA int8 GEMM's k tiles rounded down: a ragged K loses its tail
  int8_imma_last_column_skipped,  // the IMMA int8 GEMM does not store an odd M's last column
  unit_attention_weights_round_down,  // the unit attention's weight codes floor(u·inv), the + 0.5 dropped (unit_attention.cu)
  rmsnorm_rows_blocked_lanes,  // RMSNorm's CTA-a-row path: lane j folds a contiguous run, not j, j+32, ... (norm.cu)
  row_quantize_first_warp_max,  // row_quantize_i8's CTA-a-row path: max |x| of warp 0's elements only (quant.cu)
  col_quant_last_chunk_dropped,  // the two-pass column quantizer joins every chunk of rows but the last (col_quant.cu)
  col_quant_sums_in_pairs,       // its fused column sums add rows in pairs, (x0 + x1) + ...: reassociated (col_quant.cu)
  col_quant_sums_tile_rows_swapped,  // the tiled sums kernel adds a tile's rows 64..127 before 0..63 (col_quant_sums.cu)
  col_quant_codes_stale_subtile,  // the overlapped steps and codes (v2) quantize a sub-tile from the previous one's registers (col_quant_codes.cu)
  lora_scale_add_fused,        // LoRA's y + u·s as fma(u, s, y): one rounding where the spec has two (lora.cu)
  norm_quantize_stale_row,     // the fused RMSNorm + int8 codes: y not written back over the staged row, so the codes are x's (norm.cu)
};

void set_mutant(Mutant m);
Mutant mutant();
std::string_view mutant_name(Mutant m);

// Whether the active mutant changed since the last call (first call: since
// Mutant::none): gate outcomes recorded under another mutant say nothing of
// the kernels now, so their keeper starts again (int8_gemm.cpp, col_quant.cpp).
struct MutantWatch {
  Mutant seen = Mutant::none;
  bool changed() {
    if (mutant() == seen) return false;
    seen = mutant();
    return true;
  }
};

}  // namespace lockstep::cuda
