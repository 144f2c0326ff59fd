// The gate case list (gate_driver.cpp) on the host, no GPU needed: how many
// cases there are, that every op a model runs is gated in both directions,
// and that every GEMM block tile the tile rule picks for a GPT-2 124M training
// step (B 16, T 1024, on an H200's 132 multiprocessors) runs under a gate case
// with the same load path (16-byte or scalar), forced or by the rule.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "lockstep/backend/cuda/gate.hpp"
#include "lockstep/backend/cuda/gemm_launch.hpp"
#include "lockstep/backend/cuda/gemm_tile_rule.hpp"
#include "lockstep/ops/all.hpp"

namespace {

namespace lc = lockstep::cuda;
namespace ll = lockstep::cuda::launch;
namespace ops = lockstep::ops;

constexpr long kH200Sms = 132;

// A GEMM launch as the launch trace names it (trace.hpp): the tile, the
// product (its operand layouts) and each operand's load width.
struct TilePath {
  int tile;
  std::size_t product;  // 0: y = x·wᵀ, 1: dx = dy·w, 2: dw = dyᵀ·x
  bool va, vb;          // 16-byte loads of A, of B
  auto operator<=>(const TilePath&) const = default;
};
const char* kProducts[] = {"y = x·wᵀ", "dx = dy·w", "dw = dyᵀ·x"};

std::string describe(const TilePath& p) {
  return fmt::format("tile {} {} [A {}, B {}]", p.tile, kProducts[p.product], p.va ? "16B" : "4B",
                     p.vb ? "16B" : "4B");
}

TilePath path_of(const ll::GemmProduct& g, std::size_t product, int forced) {
  const int tile = forced != 0 ? forced : ll::tile_rule(static_cast<long>(g.I), static_cast<long>(g.J), g.vec(), kH200Sms);
  return {tile, product, g.va(), g.vb()};
}

// The GEMM launches the linear gate cases make: the forced tile of a swept
// case, the rule's tile otherwise, for each product of the case.
std::set<TilePath> gated_tile_paths(bool forced_too = true) {
  std::set<TilePath> covered;
  for (const auto& c : lc::gate::cases_of({"linear"})) {
    if (c.tile != 0 && !forced_too) continue;
    std::size_t rows = 0, in = 0, out = 0;
    if (std::sscanf(c.shape.c_str(), "rows %zu in %zu out %zu", &rows, &in, &out) != 3) continue;
    const auto products = ll::linear_products(rows, in, out);
    const bool fwd = c.kernel == "linear_fwd";
    for (std::size_t p = fwd ? 0 : 1; p < (fwd ? 1 : 3); ++p) covered.insert(path_of(products[p], p, c.tile));
  }
  return covered;
}

}  // namespace

TEST(CudaGateCases, EveryModelOpIsGatedBothWays) {
  const auto cases = lc::gate::all_cases();
  std::map<std::string, std::size_t> per_kernel;
  for (const auto& c : cases) ++per_kernel[c.kernel];
  const std::size_t train = lc::gate::train_cases().size();
  std::printf("gate cases: %zu = %zu of the ops (ops::ModelOps and add_into; 676 in the hand-written lists before "
              "the driver) + %zu of the training step's other kernels (gate_train.cpp)\n",
              cases.size(), cases.size() - train, train);
  for (const auto& [k, n] : per_kernel) std::printf("  %-22s %5zu\n", k.c_str(), n);
  EXPECT_GE(cases.size() - train, 676u) << "fewer op gate cases than the hand-written lists had";
  []<class... Ops>(lockstep::ad::OpList<Ops...>, const std::map<std::string, std::size_t>& m) {
    for (const std::string& name : {std::string(Ops::name)...}) {
      EXPECT_GT(m.count(name + "_fwd"), 0u) << name << " has no forward gate case";
      EXPECT_GT(m.count(name + "_bwd"), 0u) << name << " has no backward gate case";
    }
  }(ops::ModelOps{}, per_kernel);
}

TEST(CudaGateCases, AttentionBackwardPathsAreSwept) {
  std::size_t recomputed = 0, chunked = 0;
  for (const auto& c : lc::gate::cases_of({"attention"})) {
    recomputed += c.kernel == "attention_bwd" && c.shape.find(" dS recomputed") != std::string::npos;
    chunked += c.kernel == "attention_bwd" && c.shape.find(" dS in chunks") != std::string::npos;
  }
  std::printf("attention_bwd: %zu cases with the dS tiles recomputed, %zu in chunks of one batch element\n",
              recomputed, chunked);
  EXPECT_GT(recomputed, 0u);
  EXPECT_GT(chunked, 0u);
}

TEST(CudaGateCases, EveryTileOfAGpt2StepIsGated) {
  const std::size_t N = 16 * 1024, D = 768, F = 4 * D, V = 50257;
  struct Layer {
    const char* name;
    std::size_t in, out;
  };
  const Layer layers[] = {{"attn.c_attn", D, 3 * D}, {"attn.c_proj", D, D}, {"mlp.c_fc", D, F},
                          {"mlp.c_proj", F, D},      {"lm_head", D, V}};
  const std::set<TilePath> covered = gated_tile_paths();
  // The same check against the cases the rule routes by itself (the gates
  // before the tile sweep): it must find what the sweep closes, else the
  // check below could not fail.
  const std::set<TilePath> rule_only = gated_tile_paths(false);
  std::printf("GEMM launches the linear gates make: %zu (%zu without the forced tiles)\n", covered.size(),
              rule_only.size());
  std::string missed;
  std::set<int> step_tiles;
  for (const Layer& l : layers) {
    const auto products = ll::linear_products(N, l.in, l.out);
    for (std::size_t p = 0; p < products.size(); ++p) {
      const ll::GemmProduct& g = products[p];
      const TilePath path = path_of(g, p, 0);
      step_tiles.insert(path.tile);
      std::printf("  %-12s %6zu x %-6zu k %-6zu %s\n", l.name, g.I, g.J, g.K, describe(path).c_str());
      if (rule_only.count(path) == 0) missed += "\n  " + describe(path);
      EXPECT_EQ(covered.count(path), 1u) << l.name << ": " << describe(path) << ", which no gate case runs";
    }
  }
  std::printf("without the forced tiles the gates would miss:%s\n", missed.c_str());
  EXPECT_FALSE(missed.empty()) << "the negative control found nothing to miss";
  // The weight gradients of the 768-wide layers leave the base tile.
  EXPECT_GT(step_tiles.size(), 2u);
  // Every tile there is, forced, on every product with 16-byte and with
  // 4-byte loads of each operand.
  for (int t = 1; t <= ll::kGemmTiles; ++t)
    for (std::size_t p = 0; p < 3; ++p)
      for (bool va : {true, false})
        for (bool vb : {true, false}) {
          if (p == 0 && va != vb) continue;  // y = x·wᵀ: both operands are read along k, of length K
          const TilePath path{t, p, va, vb};
          EXPECT_EQ(covered.count(path), 1u) << describe(path) << " is never gated";
        }
}
