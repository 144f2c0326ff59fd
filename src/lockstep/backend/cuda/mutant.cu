#include "lockstep/backend/cuda/mutant.hpp"

namespace lockstep::cuda {
namespace {
Mutant g_mutant = Mutant::none;
}

void set_mutant(Mutant m) { g_mutant = m; }
Mutant mutant() { return g_mutant; }

std::string_view mutant_name(Mutant m) {
  switch (m) {
    case Mutant::none: return "none";
    case Mutant::gemm_assign_not_accumulate: return "gemm: acc = instead of acc +=";
    case Mutant::gemm_no_bounds_guard: return "gemm: missing bounds guard";
    case Mutant::gemm_skip_last_column: return "gemm: last column skipped";
    case Mutant::gemm_missing_barrier: return "gemm: missing barrier";
    case Mutant::attention_drop_scale: return "attention: scale factor dropped";
    case Mutant::residual_flush_negative_zero: return "residual: -0 flushed to +0";
    case Mutant::layernorm_fused_mul_add: return "layernorm: fma where the spec has mul + add";
    case Mutant::adamw_decay_every_tensor: return "adamw: weight decay on every tensor (the decay flag ignored)";
    case Mutant::clip_without_epsilon: return "clip: max_norm / norm without the + 1e-6";
    case Mutant::clip_scales_up: return "clip: applied whenever it is not 1 (small gradients scaled up)";
    case Mutant::int8_dp4a_int16_accumulator: return "int8 gemm dp4a: int16 accumulator (wraps)";
    case Mutant::int8_imma_k_tail_dropped: return "int8 gemm imma: ragged-K tail tile dropped";
    case Mutant::int8_imma_last_column_skipped: return "int8 gemm imma: odd M's last column not stored";
    case Mutant::unit_attention_weights_round_down: return "unit attention: weight codes rounded down (+ 0.5 dropped)";
    case Mutant::rmsnorm_rows_blocked_lanes: return "rmsnorm (a CTA a row): lanes fold contiguous runs, not the canonical stride";
    case Mutant::row_quantize_first_warp_max: return "row_quantize_i8 (a CTA a row): max |x| over warp 0's elements only";
    case Mutant::col_quant_last_chunk_dropped: return "column quantizer 2-pass: the last chunk of rows left out of the absmax";
    case Mutant::col_quant_sums_in_pairs: return "column quantizer 2-pass: column sums added in pairs (reassociated)";
    case Mutant::col_quant_sums_tile_rows_swapped:
      return "column quantizer 2-pass, tiled sums: a tile's rows 64..127 added before rows 0..63";
    case Mutant::col_quant_codes_stale_subtile:
      return "column quantizer 2-pass, overlapped codes (v2): a sub-tile quantized from the previous one's registers";
    case Mutant::lora_scale_add_fused: return "lora: y + u*s as fma(u, s, y)";
    case Mutant::norm_quantize_stale_row: return "rmsnorm + row codes (fused): the codes of the staged x, not of y";
  }
  return "?";
}

}  // namespace lockstep::cuda
