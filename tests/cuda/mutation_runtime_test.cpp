// The CUDA half of the mutation report (scripts/mutation_report.py --cuda):
// each CUDA kernel mutant of the catalogue (backend/cuda/mutant.hpp, planted by
// its runtime switch, no rebuild) against the two run-time instruments.
//   start-up gates: the gate cases of the mutant's kernel family (a subset of
//     what gate::require_all runs at start-up, so a rejection here is a
//     rejection there), clean and on a poisoned pool;
//   live audits:    the start-up gates pass first (Mutant::none), then the
//     mutant is switched on, as a bug that shows only after start-up would be,
//     and a forward + backward of the family's micro model runs under the
//     audits (OnMismatch::warn: every mismatch is counted). A mutant in a
//     kernel no audit watches (the residual add, LayerNorm, the optimizer)
//     prints "audits -".
// One line per mutant, which the script parses:
//   MUTANT <id> gates <rejected>/<outcomes> audits <mismatches>/<launches>|- first: <the first difference>
// The test fails when a mutant is caught by neither (and when the clean
// kernels do not pass: an instrument that fails without a mutant catches
// nothing).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "../common/tokens.hpp"
#include "lockstep/backend/cuda/audit.hpp"
#include "lockstep/backend/cuda/probe.hpp"
#include "lockstep/backend/cuda/gate.hpp"
#include "lockstep/backend/cuda/int8_gemm.hpp"
#include "lockstep/backend/cuda/mutant.hpp"
#include "lockstep/model/model.hpp"
#include "mutant_gates.hpp"

namespace {

namespace lc = lockstep::cuda;
namespace model = lockstep::model;
using lc::Mutant;

enum class Family { linear, attention, residual, layernorm, optimizer, int8, unit_attention, rmsnorm_rows, row_quantize,
                    col_quant, lora, norm_quantize };

struct Entry {
  const char* id;  // the catalogue's id (scripts/mutation_catalogue.py: cuda_mutant)
  Mutant m;
  Family family;
  int int8_impl = -1;  // the int8 implementation the audited run forces (int8_gemm_force)
};

const std::vector<Entry>& entries() {
  static const std::vector<Entry> e = {
      {"cuda-gemm-assign-not-accumulate", Mutant::gemm_assign_not_accumulate, Family::linear},
      {"cuda-gemm-no-bounds-guard", Mutant::gemm_no_bounds_guard, Family::linear},
      {"cuda-gemm-skip-last-column", Mutant::gemm_skip_last_column, Family::linear},
      {"cuda-gemm-missing-barrier", Mutant::gemm_missing_barrier, Family::linear},
      {"cuda-attention-drop-scale", Mutant::attention_drop_scale, Family::attention},
      {"cuda-residual-flush-negative-zero", Mutant::residual_flush_negative_zero, Family::residual},
      {"cuda-layernorm-fused-mul-add", Mutant::layernorm_fused_mul_add, Family::layernorm},
      {"cuda-adamw-decay-every-tensor", Mutant::adamw_decay_every_tensor, Family::optimizer},
      {"cuda-clip-without-epsilon", Mutant::clip_without_epsilon, Family::optimizer},
      {"cuda-clip-scales-up", Mutant::clip_scales_up, Family::optimizer},
      {"cuda-int8-dp4a-int16-accumulator", Mutant::int8_dp4a_int16_accumulator, Family::int8, 0},
      {"cuda-int8-imma-k-tail-dropped", Mutant::int8_imma_k_tail_dropped, Family::int8, 1},
      {"cuda-int8-imma-last-column-skipped", Mutant::int8_imma_last_column_skipped, Family::int8, 1},
      {"cuda-unit-attention-weights-round-down", Mutant::unit_attention_weights_round_down, Family::unit_attention},
      {"cuda-rmsnorm-rows-blocked-lanes", Mutant::rmsnorm_rows_blocked_lanes, Family::rmsnorm_rows},
      {"cuda-row-quantize-first-warp-max", Mutant::row_quantize_first_warp_max, Family::row_quantize},
      {"cuda-col-quant-last-chunk-dropped", Mutant::col_quant_last_chunk_dropped, Family::col_quant},
      {"cuda-col-quant-sums-in-pairs", Mutant::col_quant_sums_in_pairs, Family::col_quant},
      {"cuda-col-quant-sums-tile-rows-swapped", Mutant::col_quant_sums_tile_rows_swapped, Family::col_quant},
      {"cuda-col-quant-codes-stale-subtile", Mutant::col_quant_codes_stale_subtile, Family::col_quant},
      {"cuda-lora-scale-add-fused", Mutant::lora_scale_add_fused, Family::lora},
      {"cuda-norm-quantize-stale-row", Mutant::norm_quantize_stale_row, Family::norm_quantize},
  };
  return e;
}

// A mutant's gate cases: its kernel family's (mutant_gates.hpp, the map test_cuda_gate_mutants uses too).
std::vector<lc::gate::Case> gate_cases(const Entry& e) { return lockstep::test::family_cases(e.m); }

struct ScopedMutant {
  explicit ScopedMutant(Mutant m) { lc::set_mutant(m); }
  ~ScopedMutant() { lc::set_mutant(Mutant::none); }
};

// The audited pass: the family's micro model, ragged rows (3 x 37), ignored
// targets, forward and backward. Returns false when no audit watches the
// mutant's kernel.
struct AuditResult {
  bool watched = false;
  lc::audit::Stats stats;
  std::string threw;  // the pass stopped with this error (a non-finite loss, ...)
};

AuditResult audited_pass(const Entry& e) {
  AuditResult r;
  model::ModelConfig cfg;
  switch (e.family) {
    case Family::linear: cfg = model::preset("gpt2-micro"); break;
    case Family::attention: cfg = model::preset("llama-micro"); break;  // grouped-query
    case Family::int8:
      cfg = model::preset("gpt2-micro");
      cfg.linear = model::LinearMode::Units;
      break;
    default: return r;  // residual, layernorm, optimizer: no audited launch
  }
  r.watched = true;
  auto gpu = model::make_cuda_model(cfg, "warn");  // the start-up gates (once per process) under Mutant::none
  gpu->init(7);
  const std::int64_t B = 3, T = 37;
  auto in = lockstep::test::tokens(B * T, cfg.vocab_size, 1), tg = lockstep::test::tokens(B * T, cfg.vocab_size, 2);
  tg[5] = -1;
  if (e.int8_impl >= 0) lc::int8_gemm_force(e.int8_impl);
  lc::audit::reset_stats();
  try {
    ScopedMutant on(e.m);
    gpu->forward_backward(in, tg, B, T, false, 0);
  } catch (const std::exception& ex) {
    // Not an audit's verdict (they only warn here): reported, not counted.
    r.threw = ex.what();
  }
  r.stats = lc::audit::stats();
  if (e.int8_impl >= 0) lc::int8_gemm_force(-1);
  lc::audit::configure({});  // the next mutant's gate cases run unaudited, as at start-up
  return r;
}

TEST(CudaMutationRuntime, TheCleanKernelsPassTheGatesAndTheAudits) {
  std::string why;
  if (!lc::available(&why)) GTEST_SKIP() << why;
  ScopedMutant none(Mutant::none);
  std::vector<Family> run;  // each family's cases once
  for (const auto& e : entries()) {
    if (std::find(run.begin(), run.end(), e.family) != run.end()) continue;
    run.push_back(e.family);
    for (const auto& o : lc::gate::run_gates(gate_cases(e), {}))
      ASSERT_EQ(o.difference, "") << "unmutated: " << o.kernel << " on " << o.shape;
  }
  for (const auto& e : entries()) {
    if (e.family != Family::linear && e.family != Family::attention && e.family != Family::int8) continue;
    Entry clean = e;
    clean.m = Mutant::none;
    const auto r = audited_pass(clean);
    EXPECT_GT(r.stats.launches, 0u) << e.id << ": the audited pass audited nothing";
    EXPECT_EQ(r.stats.mismatches, 0u) << e.id << " unmutated: " << r.stats.first_report;
    EXPECT_EQ(r.threw, "") << e.id << " unmutated";
  }
}

TEST(CudaMutationRuntime, EveryCudaKernelMutantIsCaughtAtRunTime) {
  std::string why;
  if (!lc::available(&why)) GTEST_SKIP() << why;
  EXPECT_EQ(entries().size(), static_cast<std::size_t>(Mutant::norm_quantize_stale_row))
      << "a mutant of mutant.hpp is missing from this list";
  std::vector<std::string> missed;
  for (const auto& e : entries()) {
    std::vector<lc::gate::Outcome> outcomes;
    {
      ScopedMutant on(e.m);
      outcomes = lc::gate::run_gates(gate_cases(e), {});
    }
    std::size_t rejected = 0;
    std::string first;
    for (const auto& o : outcomes)
      if (!o.difference.empty()) {
        if (rejected++ == 0) first = o.kernel + " on " + o.shape + (o.poisoned ? " (dirty)" : "") + ": " + o.difference;
      }
    const AuditResult a = audited_pass(e);
    if (first.empty() && a.watched && a.stats.mismatches > 0) first = a.stats.first_report;
    const std::string audits = a.watched ? std::to_string(a.stats.mismatches) + "/" + std::to_string(a.stats.launches)
                                         : std::string("-");
    if (!a.threw.empty()) std::printf("note: %s: the audited pass threw: %.200s\n", e.id, a.threw.c_str());
    for (char& ch : first)
      if (ch == '\n') ch = ' ';
    std::printf("MUTANT %s gates %zu/%zu audits %s first: %.200s\n", e.id, rejected, outcomes.size(), audits.c_str(),
                first.c_str());
    std::fflush(stdout);
    if (rejected == 0 && !(a.watched && a.stats.mismatches > 0)) missed.push_back(e.id);
  }
  for (const auto& id : missed) ADD_FAILURE() << id << ": caught by neither the start-up gates nor the live audits";
}

}  // namespace
