// The gate case list (gate_driver.cpp) on the host, no GPU needed: how many
// cases there are, that every op a model runs is gated in both directions,
// and that every GEMM block tile the tile rule picks for a GPT-2 124M training
// step (B 16, T 1024, on an H200's 132 multiprocessors) runs under a gate case
// with the same load path (16-byte or scalar), forced or by the rule.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "lockstep/backend/cuda/gate.hpp"
#include "lockstep/backend/cuda/gemm_launch.hpp"
#include "lockstep/backend/cuda/gemm_tile_rule.hpp"
#include "lockstep/backend/cuda/ops.hpp"
#include "lockstep/ops/all.hpp"
#include "lockstep/ops/quant.hpp"

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
  std::size_t recomputed = 0, chunked = 0, v4_loop = 0;
  for (const auto& c : lc::gate::cases_of({"attention"})) {
    recomputed += c.kernel == "attention_bwd" && c.shape.find(" dS recomputed") != std::string::npos;
    chunked += c.kernel == "attention_bwd" && c.shape.find(" dS in chunks") != std::string::npos;
    v4_loop += c.kernel == "attention_bwd" && c.shape.find(" dk dv v4 loop") != std::string::npos;
  }
  std::printf("attention_bwd: %zu cases with the dS tiles recomputed, %zu in chunks of one batch element, "
              "%zu on v4's dk/dv loop\n",
              recomputed, chunked, v4_loop);
  EXPECT_GT(recomputed, 0u);
  EXPECT_GT(chunked, 0u);
  EXPECT_GT(v4_loop, 0u);
}

// The forward's two query tiles: the rule's 128 rows (head_dim <= 64) and,
// forced on the same cases, the 64-row kernel.
TEST(CudaGateCases, AttentionForwardTilesAreSwept) {
  std::size_t fwd = 0, rows64 = 0;
  for (const auto& c : lc::gate::cases_of({"attention"})) {
    fwd += c.kernel == "attention_fwd" && c.shape.find(" 64-query tile") == std::string::npos;
    rows64 += c.kernel == "attention_fwd" && c.shape.find(" 64-query tile") != std::string::npos;
  }
  std::printf("attention_fwd: %zu cases on the rule's tile, %zu forced to the 64-query tile\n", fwd, rows64);
  EXPECT_GT(rows64, fwd / 2);  // every case of head_dim <= 64 (most of them)
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

namespace {

// The int8 GEMM's gate list (gate_int8.cpp) keeps what its gates are for: every
// implementation has cases; each own kernel meets K = 131071, K = 0, an odd M,
// K off 16 (byte loads) and, on the 16-byte loads, K off 64 (the k tail), a
// misaligned operand, extreme codes and a shape past both block tiles; every
// cuBLASLt shape satisfies its requirements (K % 4 == 0, M % 4 == 0), the
// largest such K included. Only the IMMA tiles and cuBLASLt are optional.
TEST(CudaGateCases, TheInt8GemmCasesCoverTheirEdges) {
  struct Shape {
    std::size_t N = 0, M = 0, K = 0;
    bool extreme = false, misaligned = false;
  };
  std::map<std::string, std::vector<Shape>> by_kernel;
  for (const auto& c : lc::gate::cases_of({"int8_gemm"})) {
    Shape s;
    ASSERT_EQ(std::sscanf(c.shape.c_str(), "N %zu M %zu K %zu", &s.N, &s.M, &s.K), 3) << c.shape;
    s.extreme = c.shape.find("extreme codes") != std::string::npos;
    s.misaligned = c.shape.find("+1 byte") != std::string::npos;
    EXPECT_EQ(c.optional, c.kernel != "int8_gemm_nt dp4a") << c.kernel;
    by_kernel[c.kernel].push_back(s);
  }
  for (const char* own : {"int8_gemm_nt dp4a", "int8_gemm_nt imma 128x128", "int8_gemm_nt imma 128x256"}) {
    const auto& v = by_kernel[own];
    const auto any = [&](auto pred) { return std::any_of(v.begin(), v.end(), pred); };
    EXPECT_TRUE(any([](const Shape& s) { return s.K == ops::kMaxQuantK && s.extreme; })) << own << ": K = 131071";
    EXPECT_TRUE(any([](const Shape& s) { return s.K == 0; })) << own << ": K = 0";
    EXPECT_TRUE(any([](const Shape& s) { return s.M % 2 == 1 && s.M > 1; })) << own << ": odd M";
    EXPECT_TRUE(any([](const Shape& s) { return s.K % 16 != 0 && s.K > 64; })) << own << ": K % 16 != 0";
    EXPECT_TRUE(any([](const Shape& s) { return s.K % 16 == 0 && s.K % 64 != 0 && !s.misaligned; }))
        << own << ": a k tail on the 16-byte loads";
    EXPECT_TRUE(any([](const Shape& s) { return s.misaligned; })) << own << ": misaligned operands";
    EXPECT_TRUE(any([](const Shape& s) { return s.N > 128 && s.M > 256; })) << own << ": past both block tiles";
  }
  const auto& lt = by_kernel["int8_gemm_nt cublasLt"];
  EXPECT_FALSE(lt.empty());
  for (const Shape& s : lt) EXPECT_TRUE(s.K % 4 == 0 && s.M % 4 == 0 && !s.misaligned) << s.N << " " << s.M << " " << s.K;
  EXPECT_TRUE(std::any_of(lt.begin(), lt.end(), [](const Shape& s) { return s.K == ops::kMaxQuantK - 3 && s.extreme; }));
  std::size_t n = 0;
  for (const auto& [k, v] : by_kernel) n += v.size();
  std::printf("int8 GEMM gate cases: %zu over %zu implementations\n", n, by_kernel.size());
}

// The two-pass column quantizer's cases (gate_col_quant.cpp) reach every edge
// of its blocks (col_quant.cu: 512-row chunks and code blocks, 64-row warp
// segments, 256-row sum tiles, 32- and 8-column strips), with and without
// the sums, with specials at both floors, rows off a multiple of 4 and codes
// off word alignment (the word stores' fallback), and no rows at all; all
// optional (a failure keeps the three-pass kernel).
TEST(CudaGateCases, TheColumnQuantizerCasesCoverTheirEdges) {
  struct Shape {
    std::size_t rows = 0, cols = 0;
    bool sums = false, specials = false, dy_floor = false, offset = false;
  };
  std::vector<Shape> v;
  for (const auto& c : lc::gate::cases_of({"col_quant"})) {
    Shape s;
    ASSERT_EQ(std::sscanf(c.shape.c_str(), "rows %zu cols %zu", &s.rows, &s.cols), 2) << c.shape;
    s.sums = c.shape.find("with column sums") != std::string::npos;
    s.specials = c.shape.find("NaN/inf") != std::string::npos;
    s.dy_floor = c.shape.find("2^-100") != std::string::npos;
    s.offset = c.shape.find("codes at +") != std::string::npos;
    EXPECT_TRUE(c.optional) << c.shape;
    EXPECT_EQ(c.kernel, s.sums ? "col_quantize_i8 2-pass + column sums" : "col_quantize_i8 2-pass") << c.shape;
    v.push_back(s);
  }
  const auto any = [&](auto pred) { return std::any_of(v.begin(), v.end(), pred); };
  for (const bool sums : {false, true}) {
    const auto with = [&](auto pred) { return any([&](const Shape& s) { return s.sums == sums && pred(s); }); };
    const char* what = sums ? "with sums" : "without sums";
    EXPECT_TRUE(with([](const Shape& s) { return s.rows > 1024 && s.rows % 512 != 0; })) << what << ": several ragged chunks";
    EXPECT_TRUE(with([](const Shape& s) { return s.rows % 512 == 0 && s.rows > 0; })) << what << ": whole chunks";
    EXPECT_TRUE(with([](const Shape& s) { return s.rows > 256 && s.rows % 256 != 0; })) << what << ": a part sum tile";
    EXPECT_TRUE(with([](const Shape& s) { return s.rows % 64 != 0 && s.rows % 512 > 64; })) << what << ": a part warp segment";
    EXPECT_TRUE(with([](const Shape& s) { return s.cols > 32 && s.cols % 32 != 0 && s.cols % 8 != 0; }))
        << what << ": ragged strips";
    EXPECT_TRUE(with([](const Shape& s) { return s.rows % 4 != 0 && s.rows > 4; })) << what << ": rows % 4 != 0";
    EXPECT_TRUE(with([](const Shape& s) { return s.rows == 0 && s.cols > 0; })) << what << ": no rows";
    EXPECT_TRUE(with([](const Shape& s) { return s.offset; })) << what << ": codes off word alignment";
    EXPECT_TRUE(with([](const Shape& s) { return s.specials && s.dy_floor && s.rows > 512; })) << what << ": specials, dy's floor";
    EXPECT_TRUE(with([](const Shape& s) { return s.specials && !s.dy_floor && s.rows > 512; })) << what << ": specials, x's floor";
  }
  std::printf("column quantizer gate cases: %zu\n", v.size());
}

}  // namespace

// The decode's row kernels have a path for few rows (a CTA a row: norm.cu's
// rmsnorm_fwd, quant.cu's row_quantize_i8, for rows <= 32) beside the warp-a-row
// path; the start-up gates must run both at the 2B4T widths (2560, 6912).
TEST(CudaGateCases, TheDecodeRowKernelsAreGatedAtTheDecodeWidths) {
  struct Seen {
    bool few = false, many = false;
  };
  std::map<std::size_t, Seen> norm, quant;
  for (const auto& c : lc::gate::cases_of({"rmsnorm"})) {
    std::size_t rows = 0, dim = 0;
    if (c.kernel != "rmsnorm_fwd" || std::sscanf(c.shape.c_str(), "rows %zu dim %zu", &rows, &dim) != 2) continue;
    (rows <= 32 ? norm[dim].few : norm[dim].many) = true;
  }
  for (const auto& c : lc::gate::cases_of({"row_quantize_i8"})) {
    std::size_t rows = 0, K = 0;
    if (std::sscanf(c.shape.c_str(), "N %zu K %zu", &rows, &K) != 2) continue;
    (rows <= 32 ? quant[K].few : quant[K].many) = true;
  }
  for (std::size_t D : {2560u, 6912u}) {
    EXPECT_TRUE(norm[D].few && norm[D].many) << "rmsnorm_fwd at dim " << D << ": both paths gated";
    EXPECT_TRUE(quant[D].few && quant[D].many) << "row_quantize_i8 at K " << D << ": both paths gated";
  }
}

// The fused RMSNorm + row quantizer (norm.cu's rmsnorm_quantize_i8: one
// kernel for rows <= 32 and dim <= 8192, the two launches past it) is gated
// at start-up on both paths at the 2B4T widths, in place (y = x) and off
// 16-byte alignment (its scalar loads).
TEST(CudaGateCases, TheFusedNormQuantizeIsGatedAtTheDecodeWidths) {
  struct Seen {
    bool few = false, many = false;
  };
  std::map<std::size_t, Seen> seen;
  bool in_place = false, offset = false;
  for (const auto& c : lc::gate::cases_of({"rmsnorm_quantize_i8"})) {
    std::size_t rows = 0, dim = 0;
    ASSERT_EQ(std::sscanf(c.shape.c_str(), "rows %zu dim %zu", &rows, &dim), 2) << c.shape;
    (rows <= 32 && dim <= 8192 ? seen[dim].few : seen[dim].many) = true;
    in_place |= c.shape.find(" y=x") != std::string::npos && rows <= 32;
    offset |= c.shape.find(" at +") != std::string::npos && rows <= 32;
  }
  for (std::size_t D : {2560u, 6912u})
    EXPECT_TRUE(seen[D].few && seen[D].many) << "rmsnorm_quantize_i8 at dim " << D << ": both paths gated";
  EXPECT_TRUE(in_place) << "no fused case with y over x";
  EXPECT_TRUE(offset) << "no fused case off 16-byte alignment";
}

// The LoRA branch's glue (lora.cu) is gated at start-up: its cases are in the
// start-up list, for each kernel and both directions of the dropout.
TEST(CudaGateCases, TheLoraGlueIsGated) {
  std::map<std::string, std::size_t> per_kernel;
  std::size_t in_place = 0;
  for (const auto& c : lc::gate::all_cases()) {
    if (c.op != "lora") continue;
    ++per_kernel[c.kernel];
    in_place += c.shape.find(" in place") != std::string::npos;
  }
  for (const char* k : {"lora_scale_add", "lora_scale", "lora_dropout"})
    EXPECT_GT(per_kernel[k], 0u) << k << " has no start-up gate case";
  EXPECT_GT(in_place, 0u) << "no case runs the dropout in place (the backward's form)";
  EXPECT_EQ(lc::gate::cases_of({"lora"}).size(), per_kernel["lora_scale_add"] + per_kernel["lora_scale"] +
                                                     per_kernel["lora_dropout"]);
}

// BitLinear on a weight held as TERNARY2 codes (a frozen LoRA base on the
// device: cuda::OpKernels::bitlinear_codes_*) is gated at start-up, both
// directions, on every shape BitLinear's own gates run.
TEST(CudaGateCases, TheCodesBitLinearIsGatedOnBitLinearsShapes) {
  if (!lc::OpKernels::runs_codes()) GTEST_SKIP() << "LOCKSTEP_CUDA_BASE_CODES=0: no base is held as codes";
  std::map<std::string, std::size_t> per_kernel;
  for (const auto& c : lc::gate::all_cases())
    if (c.op == "bitlinear_codes") ++per_kernel[c.kernel];
  const std::size_t shapes = lockstep::ops::BitLinear::gate_cases().size();
  EXPECT_EQ(per_kernel["bitlinear_codes_fwd"], shapes);
  EXPECT_EQ(per_kernel["bitlinear_codes_bwd"], shapes);
  EXPECT_EQ(lc::gate::cases_of({"bitlinear_codes"}).size(), 2 * shapes);
}
