// The start-up gate cases that run each CUDA kernel mutant's kernel (backend/cuda/mutant.hpp): one map
// for the two tests that plant them, test_cuda_gate_mutants (the full gates' verdicts) and
// test_cuda_mutation_runtime (the mutation report's CUDA half).
#pragma once

#include <vector>

#include "lockstep/backend/cuda/gate.hpp"
#include "lockstep/backend/cuda/mutant.hpp"

namespace lockstep::test {

// Which family's gates would run the mutated kernel.
inline std::vector<cuda::gate::Case> family_cases(cuda::Mutant m) {
  switch (m) {
    case cuda::Mutant::gemm_assign_not_accumulate:
    case cuda::Mutant::gemm_no_bounds_guard:
    case cuda::Mutant::gemm_skip_last_column:
    case cuda::Mutant::gemm_missing_barrier: return cuda::gate::cases_of({"linear", "bitlinear"});
    case cuda::Mutant::attention_drop_scale: return cuda::gate::cases_of({"attention"});
    case cuda::Mutant::residual_flush_negative_zero: return cuda::gate::cases_of({"residual"});
    case cuda::Mutant::layernorm_fused_mul_add: return cuda::gate::cases_of({"layernorm"});
    case cuda::Mutant::adamw_decay_every_tensor:
    case cuda::Mutant::clip_without_epsilon:
    case cuda::Mutant::clip_scales_up: return cuda::gate::train_cases();
    case cuda::Mutant::int8_dp4a_int16_accumulator:
    case cuda::Mutant::int8_imma_k_tail_dropped:
    case cuda::Mutant::int8_imma_last_column_skipped: return cuda::gate::cases_of({"int8_gemm"});
    case cuda::Mutant::unit_attention_weights_round_down: return cuda::gate::cases_of({"unit_attention"});
    case cuda::Mutant::rmsnorm_rows_blocked_lanes: return cuda::gate::cases_of({"rmsnorm"});
    case cuda::Mutant::row_quantize_first_warp_max: return cuda::gate::cases_of({"row_quantize_i8", "int8_linear"});
    case cuda::Mutant::col_quant_last_chunk_dropped:
    case cuda::Mutant::col_quant_sums_in_pairs:
    case cuda::Mutant::col_quant_sums_tile_rows_swapped:
    case cuda::Mutant::col_quant_codes_stale_subtile: return cuda::gate::cases_of({"col_quant"});
    case cuda::Mutant::lora_scale_add_fused: return cuda::gate::cases_of({"lora"});
    case cuda::Mutant::norm_quantize_stale_row: return cuda::gate::cases_of({"rmsnorm_quantize_i8"});
    case cuda::Mutant::none: return cuda::gate::all_cases();
  }
  return {};
}

}  // namespace lockstep::test
