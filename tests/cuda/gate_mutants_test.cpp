// The gates have teeth: with each known kernel bug of mutant.hpp switched on,
// running every gate (gate::all_cases(), clean and dirty-buffer passes) must
// reject at least one case; with Mutant::none every case passes. A mutant
// whose kernel family has no gate cases yet (its kernels are written
// elsewhere) is skipped, not failed.
//
// The GEMM has several kernels (gemm.cu's 128×128 and 64×64 tiles, the
// shape-fitted tiles of gemm_tiled.cu) and the launcher plants a gemm mutant
// in whichever the tile rule picks. The gate driver runs the small linear
// cases once per block tile, forced (Case::tile, gemm_tile_override); so each
// gemm mutant is also checked in every tiled kernel, on the forced linear
// cases whose products all take 16-byte loads and on those that take scalar
// loads, and on the gate cases the rule itself sends to a tiled kernel; the
// launch counts (gemm_tile_launches) show which kernel ran.
//
// The optimizer mutants (AdamW's decay flag ignored, the clip's epsilon
// dropped, the clip applied above 1) are rejected by the optimizer's cases
// (gate_train.cpp) and by no op gate.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "lockstep/backend/cuda/gate.hpp"
#include "lockstep/backend/cuda/gemm_launch.hpp"
#include "lockstep/backend/cuda/mutant.hpp"
#include "lockstep/backend/cuda/probe.hpp"
#include "mutant_gates.hpp"

namespace {

namespace lc = lockstep::cuda;
using lc::Mutant;
using lockstep::test::family_cases;

const std::vector<Mutant>& all_mutants() {
  static const std::vector<Mutant> m = {
      Mutant::gemm_assign_not_accumulate, Mutant::gemm_no_bounds_guard,       Mutant::gemm_skip_last_column,
      Mutant::gemm_missing_barrier,       Mutant::attention_drop_scale,       Mutant::residual_flush_negative_zero,
      Mutant::layernorm_fused_mul_add,    Mutant::adamw_decay_every_tensor,   Mutant::clip_without_epsilon,
      Mutant::clip_scales_up,             Mutant::int8_dp4a_int16_accumulator, Mutant::int8_imma_k_tail_dropped,
      Mutant::int8_imma_last_column_skipped, Mutant::unit_attention_weights_round_down,
      Mutant::rmsnorm_rows_blocked_lanes, Mutant::row_quantize_first_warp_max,
      Mutant::col_quant_last_chunk_dropped, Mutant::col_quant_sums_in_pairs, Mutant::col_quant_sums_tile_rows_swapped,
      Mutant::col_quant_codes_stale_subtile,
      Mutant::lora_scale_add_fused,       Mutant::norm_quantize_stale_row,
  };
  return m;
}


// Sets a mutant for one scope; back to none on the way out (also on failure).
struct ScopedMutant {
  explicit ScopedMutant(Mutant m) { lc::set_mutant(m); }
  ~ScopedMutant() { lc::set_mutant(Mutant::none); }
};

// Every enumerator appears exactly once above (a new one must be added here:
// the switch in family_cases has no default, so -Wswitch names it).
TEST(CudaGateMutants, ListCoversTheEnum) {
  EXPECT_EQ(all_mutants().size(), static_cast<std::size_t>(Mutant::norm_quantize_stale_row));
}

TEST(CudaGateMutants, CleanKernelsPassEveryGate) {
  std::string why;
  if (!lc::available(&why)) GTEST_SKIP() << why;
  ScopedMutant none(Mutant::none);
  const auto cases = lc::gate::all_cases();
  const auto outcomes = lc::gate::run_gates(cases, {});
  for (const auto& o : outcomes)
    EXPECT_EQ(o.difference, "") << o.kernel << " on " << o.shape << (o.poisoned ? " (dirty pass)" : "");
  std::printf("Mutant::none: %zu gate cases x 2 passes, all pass\n", cases.size());
  // Where the start-up time goes: seconds per kernel (both passes), the ten largest.
  std::map<std::string, std::pair<double, int>> per_kernel;
  double total = 0;
  for (const auto& o : outcomes) {
    per_kernel[o.kernel].first += o.seconds;
    per_kernel[o.kernel].second += 1;
    total += o.seconds;
  }
  std::vector<std::pair<double, std::string>> slow;
  for (const auto& [k, v] : per_kernel)
    slow.emplace_back(v.first, k + " (" + std::to_string(v.second) + " runs)");
  std::sort(slow.rbegin(), slow.rend());
  std::printf("gate time %.2f s; slowest kernels:\n", total);
  for (std::size_t i = 0; i < slow.size() && i < 10; ++i) std::printf("  %7.3f s  %s\n", slow[i].first, slow[i].second.c_str());
  std::vector<const lc::gate::Outcome*> by_case;
  for (const auto& o : outcomes) by_case.push_back(&o);
  std::sort(by_case.begin(), by_case.end(), [](auto* a, auto* b) { return a->seconds > b->seconds; });
  std::printf("slowest cases:\n");
  for (std::size_t i = 0; i < by_case.size() && i < 10; ++i)
    std::printf("  %7.3f s  %s on %s%s\n", by_case[i]->seconds, by_case[i]->kernel.c_str(), by_case[i]->shape.c_str(),
                by_case[i]->poisoned ? " (dirty)" : "");
}

class CudaGateMutant : public ::testing::TestWithParam<Mutant> {};

TEST_P(CudaGateMutant, IsRejectedByAGate) {
  std::string why;
  if (!lc::available(&why)) GTEST_SKIP() << why;
  const Mutant m = GetParam();
  if (family_cases(m).empty())
    GTEST_SKIP() << lc::mutant_name(m) << ": its kernel family has no gate cases in this build yet";
  const auto cases = lc::gate::all_cases();
  std::vector<lc::gate::Outcome> outcomes;
  {
    ScopedMutant on(m);
    outcomes = lc::gate::run_gates(cases, {});
  }
  std::size_t rejected = 0;
  const lc::gate::Outcome* first = nullptr;
  for (const auto& o : outcomes)
    if (!o.difference.empty()) {
      ++rejected;
      if (first == nullptr) first = &o;
    }
  ASSERT_NE(first, nullptr) << "mutant '" << lc::mutant_name(m) << "' passed every gate (" << outcomes.size()
                            << " outcomes): the gates have no teeth for it";
  std::printf("mutant '%s': rejected by %zu of %zu gate outcomes; first: %s on %s%s: %s\n",
              std::string(lc::mutant_name(m)).c_str(), rejected, outcomes.size(), first->kernel.c_str(),
              first->shape.c_str(), first->poisoned ? " (dirty pass)" : "", first->difference.c_str());
  // The mutant is off again: the device is still healthy and the gates pass.
  lc::gate::Options clean_only;
  clean_only.dirty_pass = false;
  const auto after = lc::gate::run_gates(cases, clean_only);
  for (const auto& o : after) EXPECT_EQ(o.difference, "") << "after the mutant: " << o.kernel << " on " << o.shape;
}

// --- The optimizer mutants ---------------------------------------------------

// Issue 10: a planted AdamW bug and a planted clip bug passed every start-up
// gate, because no gate ran the optimizer's kernels. Now the optimizer's own
// cases (gate_train.cpp) reject each, while the op gates still cannot see
// them (so it is those cases that do the work, and each mutant is reached).
class CudaOptimizerMutant : public ::testing::TestWithParam<Mutant> {};

TEST_P(CudaOptimizerMutant, IsRejectedByTheOptimizerGatesOnly) {
  std::string why;
  if (!lc::available(&why)) GTEST_SKIP() << why;
  const Mutant m = GetParam();
  const auto train = lc::gate::train_cases();
  std::set<std::string> train_kernels;
  for (const auto& c : train) train_kernels.insert(c.kernel);
  std::vector<lc::gate::Case> op_cases;  // every other case of all_cases(): the ops' gates
  for (auto& c : lc::gate::all_cases())
    if (train_kernels.count(c.kernel) == 0) op_cases.push_back(std::move(c));
  ASSERT_FALSE(op_cases.empty());
  lc::gate::Options clean_only;
  clean_only.dirty_pass = false;
  std::vector<lc::gate::Outcome> on_ops, on_train;
  {
    ScopedMutant on(m);
    on_ops = lc::gate::run_gates(op_cases, clean_only);
    on_train = lc::gate::run_gates(train, {});
  }
  for (const auto& o : on_ops)
    EXPECT_EQ(o.difference, "") << "an op gate saw the optimizer mutant: " << o.kernel << " on " << o.shape;
  std::map<std::string, std::size_t> by_kernel;
  std::size_t rejected = 0;
  const lc::gate::Outcome* first = nullptr;
  for (const auto& o : on_train)
    if (!o.difference.empty()) {
      ++rejected;
      ++by_kernel[o.kernel];
      if (first == nullptr) first = &o;
    }
  ASSERT_NE(first, nullptr) << "mutant '" << lc::mutant_name(m) << "' passed every optimizer gate ("
                            << on_train.size() << " outcomes)";
  std::string kernels;
  for (const auto& [k, n] : by_kernel) kernels += (kernels.empty() ? "" : ", ") + k + " " + std::to_string(n);
  std::printf("mutant '%s': passes all %zu op gate cases; rejected by %zu of %zu optimizer gate outcomes (%s); "
              "first: %s on %s%s: %s\n",
              std::string(lc::mutant_name(m)).c_str(), on_ops.size(), rejected, on_train.size(), kernels.c_str(),
              first->kernel.c_str(), first->shape.c_str(), first->poisoned ? " (dirty pass)" : "",
              first->difference.c_str());
  const auto after = lc::gate::run_gates(train, clean_only);
  for (const auto& o : after) EXPECT_EQ(o.difference, "") << "after the mutant: " << o.kernel << " on " << o.shape;
}

INSTANTIATE_TEST_SUITE_P(OptimizerMutants, CudaOptimizerMutant,
                         ::testing::Values(Mutant::adamw_decay_every_tensor, Mutant::clip_without_epsilon,
                                           Mutant::clip_scales_up),
                         [](const ::testing::TestParamInfo<Mutant>& p) {
                           switch (p.param) {
                             case Mutant::adamw_decay_every_tensor: return std::string("adamw_decay_every_tensor");
                             case Mutant::clip_without_epsilon: return std::string("clip_without_epsilon");
                             case Mutant::clip_scales_up: return std::string("clip_scales_up");
                             default: return std::string("other");
                           }
                         });

// --- The gemm mutants in the tiled kernels ----------------------------------

namespace ll = lockstep::cuda::launch;

const std::vector<Mutant>& gemm_mutants() {
  static const std::vector<Mutant> m = {Mutant::gemm_assign_not_accumulate, Mutant::gemm_no_bounds_guard,
                                        Mutant::gemm_skip_last_column, Mutant::gemm_missing_barrier};
  return m;
}

// The tiled kernels' override numbers (gemm_tiled.cu).
std::vector<int> tiled_tiles() {
  std::vector<int> t;
  for (int i = 1; i <= ll::kGemmTiles; ++i) {
    int bm = 0, bn = 0;
    if (ll::detail::tiled_shape(i, bm, bn)) t.push_back(i);
  }
  return t;
}

struct LinearShape {
  std::size_t rows = 0, in = 0, out = 0;
};
// ops::Linear::gate_cases()' shape text: "rows R in I out O[ ...]".
bool parse_shape(const std::string& s, LinearShape& d) {
  return std::sscanf(s.c_str(), "rows %zu in %zu out %zu", &d.rows, &d.in, &d.out) == 3;
}

// The linear_fwd/linear_bwd gate cases that force block tile t, split by load
// path: `vec` where in and out are multiples of 4 (every product of the case
// takes 16-byte loads on both operands), `scalar` otherwise.
struct LinearGroups {
  std::vector<lc::gate::Case> vec, scalar;
};
LinearGroups forced_linear_cases(int t) {
  LinearGroups g;
  for (const auto& c : lc::gate::cases_of({"linear"})) {
    LinearShape d;
    if (c.tile != t || !parse_shape(c.shape, d)) continue;
    (d.in % 4 == 0 && d.out % 4 == 0 ? g.vec : g.scalar).push_back(c);
  }
  return g;
}

// Launches per tile since the last reset, as "t3 12, t7 4" (tiles with none left out).
std::string launch_summary() {
  std::string s;
  for (int t = 1; t <= ll::kGemmTiles; ++t)
    if (ll::gemm_tile_launches(t) > 0)
      s += (s.empty() ? "t" : ", t") + std::to_string(t) + " " + std::to_string(ll::gemm_tile_launches(t));
  return s.empty() ? "none" : s;
}
long launches_other_than(const std::vector<int>& tiles) {
  long n = 0;
  for (int t = 1; t <= ll::kGemmTiles; ++t) {
    bool in = false;
    for (int u : tiles) in = in || u == t;
    if (!in) n += ll::gemm_tile_launches(t);
  }
  return n;
}

std::size_t count_rejected(const std::vector<lc::gate::Outcome>& outcomes, const lc::gate::Outcome** first) {
  std::size_t n = 0;
  *first = nullptr;
  for (const auto& o : outcomes)
    if (!o.difference.empty()) {
      ++n;
      if (*first == nullptr) *first = &o;
    }
  return n;
}

// The control: with no mutant, every tiled kernel forced passes the same gate
// cases (clean and dirty passes), so a rejection below is the mutant's.
TEST(CudaGateMutants, CleanTiledKernelsPassTheLinearGates) {
  std::string why;
  if (!lc::available(&why)) GTEST_SKIP() << why;
  ScopedMutant none(Mutant::none);
  std::size_t vec = 0, scalar = 0;
  for (int t : tiled_tiles()) {
    const LinearGroups groups = forced_linear_cases(t);
    ASSERT_FALSE(groups.vec.empty()) << "tile " << t;
    ASSERT_FALSE(groups.scalar.empty()) << "tile " << t;
    vec = groups.vec.size();
    scalar = groups.scalar.size();
    ll::gemm_tile_launches_reset();
    for (const auto* cases : {&groups.vec, &groups.scalar})
      for (const auto& o : lc::gate::run_gates(*cases, {}))
        EXPECT_EQ(o.difference, "") << "tile " << t << ": " << o.kernel << " on " << o.shape
                                    << (o.poisoned ? " (dirty pass)" : "");
    EXPECT_GT(ll::gemm_tile_launches(t), 0) << "tile " << t;
    EXPECT_EQ(launches_other_than({t}), 0) << "tile " << t << " forced, launches: " << launch_summary();
  }
  std::printf("clean tiled kernels %zu forced: %zu + %zu small linear cases x 2 passes each, all pass\n",
              tiled_tiles().size(), vec, scalar);
}

class CudaGemmMutantTiled : public ::testing::TestWithParam<Mutant> {};

// Each tiled kernel forced in turn: the mutant must be rejected on the
// 16-byte-load cases and on the scalar-load cases, and only that kernel ran.
TEST_P(CudaGemmMutantTiled, IsRejectedInEveryTiledKernel) {
  std::string why;
  if (!lc::available(&why)) GTEST_SKIP() << why;
  const Mutant m = GetParam();
  lc::gate::Options clean_only;
  clean_only.dirty_pass = false;
  for (int t : tiled_tiles())
    for (int v = 0; v < 2; ++v) {
      const LinearGroups groups = forced_linear_cases(t);
      const auto& cases = v == 0 ? groups.vec : groups.scalar;
      std::vector<lc::gate::Outcome> outcomes;
      ll::gemm_tile_launches_reset();
      {
        ScopedMutant on(m);
        outcomes = lc::gate::run_gates(cases, clean_only);
      }
      const std::string launches = launch_summary();
      EXPECT_GT(ll::gemm_tile_launches(t), 0) << "tile " << t;
      EXPECT_EQ(launches_other_than({t}), 0) << "tile " << t << " forced, launches: " << launches;
      const lc::gate::Outcome* first = nullptr;
      const std::size_t rejected = count_rejected(outcomes, &first);
      EXPECT_NE(first, nullptr) << "mutant '" << lc::mutant_name(m) << "' in tile " << t << " passed every "
                                << (v == 0 ? "16-byte-load" : "scalar-load") << " linear case";
      if (first != nullptr)
        std::printf("mutant '%s', tile %d, %s loads: rejected by %zu of %zu cases (launches: %s); first: %s on %s: %s\n",
                    std::string(lc::mutant_name(m)).c_str(), t, v == 0 ? "16-byte" : "scalar", rejected,
                    outcomes.size(), launches.c_str(), first->kernel.c_str(), first->shape.c_str(),
                    first->difference.c_str());
    }
}

// No override: the gate cases the tile rule itself sends to a tiled kernel
// (linear_fwd and bitlinear_fwd at rows 512 in 768 out 2304, and linear_fwd
// at rows 516 in 772 out 2300, whose k is off every tiled kernel's k tiles)
// reject the mutant.
TEST_P(CudaGemmMutantTiled, IsRejectedWhereTheRulePicksATiledKernel) {
  std::string why;
  if (!lc::available(&why)) GTEST_SKIP() << why;
  const Mutant m = GetParam();
  std::vector<lc::gate::Case> cases;
  for (const auto& c : lc::gate::cases_of({"linear", "bitlinear"})) {
    LinearShape d;
    if ((c.kernel == "linear_fwd" || c.kernel == "bitlinear_fwd") && c.tile == 0 && parse_shape(c.shape, d) &&
        (d.rows == 512 || d.rows == 516))
      cases.push_back(c);
  }
  ASSERT_FALSE(cases.empty()) << "the linear gate cases have no rows-512/516 forward case any more";
  lc::gate::Options clean_only;
  clean_only.dirty_pass = false;
  std::vector<lc::gate::Outcome> outcomes;
  ll::gemm_tile_launches_reset();
  {
    ScopedMutant on(m);
    outcomes = lc::gate::run_gates(cases, clean_only);
  }
  const std::string launches = launch_summary();
  EXPECT_EQ(launches_other_than(tiled_tiles()), 0) << "the rule left the tiled kernels: " << launches;
  const lc::gate::Outcome* first = nullptr;
  const std::size_t rejected = count_rejected(outcomes, &first);
  ASSERT_NE(first, nullptr) << "mutant '" << lc::mutant_name(m) << "' passed the rule-routed tiled cases ("
                            << launches << ")";
  std::printf("mutant '%s', tile rule (launches: %s): rejected by %zu of %zu cases; first: %s on %s: %s\n",
              std::string(lc::mutant_name(m)).c_str(), launches.c_str(), rejected, outcomes.size(),
              first->kernel.c_str(), first->shape.c_str(), first->difference.c_str());
}

std::string gemm_mutant_name(const ::testing::TestParamInfo<Mutant>& p) {
  switch (p.param) {
    case Mutant::gemm_assign_not_accumulate: return "gemm_assign_not_accumulate";
    case Mutant::gemm_no_bounds_guard: return "gemm_no_bounds_guard";
    case Mutant::gemm_skip_last_column: return "gemm_skip_last_column";
    case Mutant::gemm_missing_barrier: return "gemm_missing_barrier";
    default: return "other";
  }
}
INSTANTIATE_TEST_SUITE_P(GemmMutants, CudaGemmMutantTiled, ::testing::ValuesIn(gemm_mutants()), gemm_mutant_name);

INSTANTIATE_TEST_SUITE_P(AllMutants, CudaGateMutant, ::testing::ValuesIn(all_mutants()),
                         [](const ::testing::TestParamInfo<Mutant>& p) {
                           switch (p.param) {
                             case Mutant::none: return std::string("none");
                             case Mutant::gemm_assign_not_accumulate: return std::string("gemm_assign_not_accumulate");
                             case Mutant::gemm_no_bounds_guard: return std::string("gemm_no_bounds_guard");
                             case Mutant::gemm_skip_last_column: return std::string("gemm_skip_last_column");
                             case Mutant::gemm_missing_barrier: return std::string("gemm_missing_barrier");
                             case Mutant::attention_drop_scale: return std::string("attention_drop_scale");
                             case Mutant::residual_flush_negative_zero:
                               return std::string("residual_flush_negative_zero");
                             case Mutant::layernorm_fused_mul_add: return std::string("layernorm_fused_mul_add");
                             case Mutant::adamw_decay_every_tensor: return std::string("adamw_decay_every_tensor");
                             case Mutant::clip_without_epsilon: return std::string("clip_without_epsilon");
                             case Mutant::clip_scales_up: return std::string("clip_scales_up");
                             case Mutant::int8_dp4a_int16_accumulator:
                               return std::string("int8_dp4a_int16_accumulator");
                             case Mutant::int8_imma_k_tail_dropped: return std::string("int8_imma_k_tail_dropped");
                             case Mutant::int8_imma_last_column_skipped:
                               return std::string("int8_imma_last_column_skipped");
                             case Mutant::unit_attention_weights_round_down:
                               return std::string("unit_attention_weights_round_down");
                             case Mutant::rmsnorm_rows_blocked_lanes: return std::string("rmsnorm_rows_blocked_lanes");
                             case Mutant::row_quantize_first_warp_max:
                               return std::string("row_quantize_first_warp_max");
                             case Mutant::col_quant_last_chunk_dropped:
                               return std::string("col_quant_last_chunk_dropped");
                             case Mutant::col_quant_sums_in_pairs: return std::string("col_quant_sums_in_pairs");
                             case Mutant::col_quant_sums_tile_rows_swapped:
                               return std::string("col_quant_sums_tile_rows_swapped");
                             case Mutant::col_quant_codes_stale_subtile:
                               return std::string("col_quant_codes_stale_subtile");
                             case Mutant::lora_scale_add_fused: return std::string("lora_scale_add_fused");
                             case Mutant::norm_quantize_stale_row: return std::string("norm_quantize_stale_row");
                           }
                           return std::string("unknown");
                         });

}  // namespace
