// The CUDA attention kernels (backend/cuda/attention.cu) against the CPU
// kernels, bit for bit: the gate cases (clean and dirty-buffer passes), the
// gate's teeth (the attention_drop_scale mutant is refused), the GPT-2 124M
// shape whole (B 16, T 1024, H 12, Dh 64, fused q|k|v) compared cell for cell,
// and its timing — the forward on both of its query tiles (128 rows, the rule
// at Dh 64; 64 rows), the backward on both of its paths (stored dS, the default;
// dq recomputing dS, when the scratch holds D_i only), which must agree bit
// for bit.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "lockstep/backend/cpu/ops.hpp"
#include "lockstep/backend/cuda/attention_launch.hpp"
#include "lockstep/backend/cuda/device.hpp"
#include "lockstep/backend/cuda/gate.hpp"
#include "lockstep/backend/cuda/mutant.hpp"
#include "lockstep/backend/cuda/ops.hpp"
#include "lockstep/backend/cuda/probe.hpp"

namespace lc = lockstep::cuda;
namespace ops = lockstep::ops;

namespace {

bool have_device() {
  std::string why;
  if (lc::available(&why)) return true;
  std::printf("no CUDA device: %s\n", why.c_str());
  return false;
}

struct Tally {
  int pass = 0, fail = 0;
};

}  // namespace

TEST(CudaAttention, GatesPassBitForBit) {
  if (!have_device()) GTEST_SKIP();
  lc::gate::Options opt;
  opt.seed = 7;
  opt.dirty_pass = true;
  const auto cases = lc::gate::cases_of({"attention"});
  const auto outcomes = lc::gate::run_gates(cases, opt);
  std::map<std::string, Tally> by;
  int shown = 0;
  double seconds = 0;
  for (const auto& o : outcomes) {
    const std::string key = o.kernel + (o.poisoned ? " (dirty)" : " (clean)");
    seconds += o.seconds;
    if (o.difference.empty()) {
      ++by[key].pass;
    } else {
      ++by[key].fail;
      if (shown++ < 25)
        std::printf("FAIL %s%s on %s: %s\n", o.kernel.c_str(), o.poisoned ? " (dirty)" : "", o.shape.c_str(),
                    o.difference.c_str());
    }
  }
  int fails = 0;
  for (const auto& [k, t] : by) {
    std::printf("%-26s %4d passed, %d failed\n", k.c_str(), t.pass, t.fail);
    fails += t.fail;
  }
  std::printf("attention gates: %zu cases x 2 passes = %zu runs, %d failed, %.2f s\n", cases.size(),
              outcomes.size(), fails, seconds);
  EXPECT_EQ(outcomes.size(), 2 * cases.size());
  EXPECT_EQ(fails, 0);
}

TEST(CudaAttention, DropScaleMutantIsRefused) {
  if (!have_device()) GTEST_SKIP();
  lc::gate::Options opt;
  opt.seed = 11;
  opt.dirty_pass = false;
  lc::set_mutant(lc::Mutant::attention_drop_scale);
  const auto outcomes = lc::gate::run_gates(lc::gate::cases_of({"attention"}), opt);
  lc::set_mutant(lc::Mutant::none);
  int refused = 0;
  std::string first;
  for (const auto& o : outcomes)
    if (!o.difference.empty()) {
      if (first.empty()) first = o.kernel + " on " + o.shape + ": " + o.difference;
      ++refused;
    }
  std::printf("mutant '%s': %d of %zu gate runs refuse it; first: %s\n",
              std::string(lc::mutant_name(lc::Mutant::attention_drop_scale)).c_str(), refused, outcomes.size(),
              first.c_str());
  EXPECT_GT(refused, static_cast<int>(outcomes.size()) / 2);
  // The clean kernels pass again once the mutant is gone.
  opt.only = {"attention_fwd"};
  for (const auto& o : lc::gate::run_gates(lc::gate::cases_of({"attention"}), opt))
    EXPECT_EQ(o.difference, "") << o.shape;
}

// GPT-2 124M's attention: B 16, T 1024, 12 heads of 64, q|k|v fused in one
// [N, 2304] buffer. Times forward and backward with CUDA events, then compares
// every output cell with the CPU kernels (all host threads).
TEST(CudaAttention, Gpt2ShapeTimedAndBitIdentical) {
  if (!have_device()) GTEST_SKIP();
  const std::size_t B = 16, T = 1024, H = 12, Dh = 64, D = H * Dh, ld = 3 * D, N = B * T;
  const ops::Attention::Config c{B, T, H, H, Dh, 0.0, 64};
  std::mt19937_64 rng(2024);
  std::normal_distribution<float> nd(0.0f, 1.5f);
  std::vector<float> x(N * ld), dout(N * D);
  for (float& v : x) v = nd(rng);
  for (float& v : dout) v = nd(rng) / 1.5f;

  lc::OpKernels gpu;
  lc::DeviceBuffer<float> X, O, L, DO, G;
  X.upload(x);
  DO.upload(dout);
  O.resize(N * D);
  L.resize(B * H * T);
  G.resize(N * ld);
  const float* q = X.data();
  const float* k = X.data() + D;
  const float* v = X.data() + 2 * D;
  auto fwd = [&] {
    gpu.forward<ops::Attention>(c, {.q = q, .ldq = ld, .k = k, .v = v, .ldkv = ld, .o = O.data(), .lse = L.data()});
  };
  auto bwd = [&] {
    gpu.backward<ops::Attention>(c, {.q = q, .ldq = ld, .k = k, .v = v, .ldkv = ld, .o = O.data(), .lse = L.data(),
                                     .dout = DO.data(), .dq = G.data(), .dk = G.data() + D, .dv = G.data() + 2 * D});
  };
  // The backward's other path: dq recomputes dS (scratch holds D_i only),
  // straight through the launcher.
  namespace ll = lc::launch;
  ll::AttentionShape sh;
  sh.batch = B;
  sh.seq = T;
  sh.q_heads = sh.kv_heads = H;
  sh.head_dim = Dh;
  sh.ldq = sh.ldkv = ld;
  sh.scale = ops::Attention::scale_of<float>(c);
  lc::DeviceBuffer<float> G2, S2;
  G2.resize(N * ld);
  S2.resize(B * H * T);
  auto bwd_recompute = [&] {
    ll::attention_bwd(sh, q, k, v, O.data(), L.data(), DO.data(), G2.data(), G2.data() + D, G2.data() + 2 * D,
                      S2.data(), S2.size());
  };
  // The forward's 64-query kernel (the rule runs the 128-query one at Dh 64).
  lc::DeviceBuffer<float> O64, L64;
  O64.resize(N * D);
  L64.resize(B * H * T);
  auto fwd64 = [&] {
    ll::attention_fwd_tile_override(64);
    ll::attention_fwd(sh, q, k, v, O64.data(), L64.data());
    ll::attention_fwd_tile_override(0);
  };
  // The backward with v4's dk/dv loop (the stored-dS path).
  lc::DeviceBuffer<float> G3;
  G3.resize(N * ld);
  lc::DeviceBuffer<float> S3;
  S3.resize(ll::attention_bwd_scratch_floats(sh));
  auto bwd_v4 = [&] {
    ll::attention_bwd_dkdv_v4_override(true);
    ll::attention_bwd(sh, q, k, v, O.data(), L.data(), DO.data(), G3.data(), G3.data() + D, G3.data() + 2 * D,
                      S3.data(), S3.size());
    ll::attention_bwd_dkdv_v4_override(false);
  };
  fwd();
  bwd();
  bwd_recompute();
  fwd64();
  bwd_v4();
  lc::synchronize("warm-up");

  cudaEvent_t e0, e1, e2;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  cudaEventCreate(&e2);
  const int reps = 10;
  double fwd_ms = 0, bwd_ms = 0, rec_ms = 0, fwd64_ms = 0, bwd_v4_ms = 0;
  for (int r = 0; r < reps; ++r) {
    cudaEventRecord(e0);
    fwd();
    cudaEventRecord(e1);
    bwd();
    cudaEventRecord(e2);
    cudaEventSynchronize(e2);
    float a = 0, b = 0;
    cudaEventElapsedTime(&a, e0, e1);
    cudaEventElapsedTime(&b, e1, e2);
    fwd_ms += static_cast<double>(a) / reps;
    bwd_ms += static_cast<double>(b) / reps;
    cudaEventRecord(e1);
    bwd_recompute();
    cudaEventRecord(e2);
    cudaEventSynchronize(e2);
    cudaEventElapsedTime(&b, e1, e2);
    rec_ms += static_cast<double>(b) / reps;
    cudaEventRecord(e1);
    fwd64();
    cudaEventRecord(e2);
    cudaEventSynchronize(e2);
    cudaEventElapsedTime(&b, e1, e2);
    fwd64_ms += static_cast<double>(b) / reps;
    cudaEventRecord(e1);
    bwd_v4();
    cudaEventRecord(e2);
    cudaEventSynchronize(e2);
    cudaEventElapsedTime(&b, e1, e2);
    bwd_v4_ms += static_cast<double>(b) / reps;
  }
  lc::synchronize("timing");
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaEventDestroy(e2);
  // FLOP counts. PyTorch's torch.utils.flop_counter for scaled_dot_product
  // attention: forward 2 bmm = 4·B·H·T²·Dh, backward 5 bmm (scores recomputed)
  // = 10·B·H·T²·Dh, no causal discount. The causal work this engine does:
  // T(T+1)/2 cells per head; forward 2 products, backward 5 on the stored-dS
  // path (s, dP, dk, dv, dq) and 7 when dq recomputes s and dP.
  const double bh = double(B) * H, t2 = double(T) * T, cells = double(T) * (T + 1) / 2;
  const double pt_f = 4 * bh * t2 * Dh, pt_b = 10 * bh * t2 * Dh;
  const double done_f = 2 * 2 * bh * cells * Dh, done_b = 5 * 2 * bh * cells * Dh;
  std::printf("attention B %zu T %zu H %zu Dh %zu (fused ld %zu), mean of %d:\n", B, T, H, Dh, ld, reps);
  std::printf("  fwd %.3f ms  bwd %.3f ms  fwd+bwd %.3f ms  (bwd, dq recomputing dS: %.3f ms)\n", fwd_ms, bwd_ms,
              fwd_ms + bwd_ms, rec_ms);
  std::printf("  fwd, %d-query tile (the rule): %.3f ms; 64-query tile: %.3f ms\n", ll::attention_fwd_tile(sh), fwd_ms,
              fwd64_ms);
  std::printf("  bwd (stored dS), v5 dk/dv loop (the rule): %.3f ms; v4 dk/dv loop: %.3f ms\n", bwd_ms, bwd_v4_ms);
  std::printf("  stored-dS scratch: %.1f MB\n",
              static_cast<double>(ll::attention_bwd_scratch_floats(sh)) * sizeof(float) / 1e6);
  std::printf("  PyTorch flop_counter FLOPs: fwd %.2f G, bwd %.2f G -> %.1f / %.1f / %.1f TFLOP/s (fwd/bwd/all)\n",
              pt_f / 1e9, pt_b / 1e9, pt_f / fwd_ms / 1e9, pt_b / bwd_ms / 1e9, (pt_f + pt_b) / (fwd_ms + bwd_ms) / 1e9);
  std::printf("  causal FLOPs executed: fwd %.2f G, bwd %.2f G -> %.1f / %.1f TFLOP/s fp32 (fwd/bwd)\n",
              done_f / 1e9, done_b / 1e9, done_f / fwd_ms / 1e9, done_b / bwd_ms / 1e9);

  // The whole shape against the CPU kernels.
  lockstep::cpu::OpKernels cpu;
  cpu.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<float> o(N * D), lse(B * H * T), g(N * ld, 0.0f);
  cpu.forward<ops::Attention>(c, {.q = x.data(), .ldq = ld, .k = x.data() + D, .v = x.data() + 2 * D, .ldkv = ld,
                                  .o = o.data(), .lse = lse.data()});
  EXPECT_EQ(lc::gate::first_difference("o", o, O.download(), D), "");
  EXPECT_EQ(lc::gate::first_difference("lse", lse, L.download(), T), "");
  EXPECT_EQ(lc::gate::first_difference("o (64-query tile)", o, O64.download(), D), "");
  EXPECT_EQ(lc::gate::first_difference("lse (64-query tile)", lse, L64.download(), T), "");
  // The GPU backward ran on the GPU forward's o and lse; equal bits make it the same input.
  cpu.backward<ops::Attention>(c, {.q = x.data(), .ldq = ld, .k = x.data() + D, .v = x.data() + 2 * D, .ldkv = ld,
                                   .o = o.data(), .lse = lse.data(), .dout = dout.data(), .dq = g.data(),
                                   .dk = g.data() + D, .dv = g.data() + 2 * D});
  const std::vector<float> gg = G.download();
  EXPECT_EQ(lc::gate::first_difference("dq|dk|dv", g, gg, ld), "");
  // The fused buffer's rows are q|k|v gradients whole (ld = 3·D): both paths
  // write every cell.
  EXPECT_EQ(lc::gate::first_difference("dq|dk|dv (dq recomputing dS)", gg, G2.download(), ld), "");
  EXPECT_EQ(lc::gate::first_difference("dq|dk|dv (v4 dk/dv loop)", gg, G3.download(), ld), "");
  std::printf("  GPT-2 shape: o, lse, dq, dk, dv compared with cpu::OpKernels (%d threads)\n", cpu.threads);
}
