// The pointwise kernel family on the device (label gpu):
//   * every gate case of pointwise_cases() passes, clean and on a
//     poisoned allocator (bit-identical to cpu::OpKernels);
//   * the gates reject the family's known kernel bugs (mutant.hpp);
//   * at GPT-2 124M training shapes (B 16, T 1024, D 768, F 3072, V 50257)
//     the main kernels again equal the CPU bit for bit, and each kernel's
//     time is printed (cudaEvent, mean of 10 launches after a warm-up).
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "lockstep/ad/rng.hpp"
#include "lockstep/backend/cpu/ops.hpp"
#include "lockstep/backend/cuda/device.hpp"
#include "lockstep/backend/cuda/gate.hpp"
#include "lockstep/backend/cuda/mutant.hpp"
#include "lockstep/backend/cuda/ops.hpp"
#include "lockstep/util/parallel.hpp"

namespace cu = lockstep::cuda;
namespace gate = lockstep::cuda::gate;
namespace ops = lockstep::ops;

namespace {

bool have_device() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

std::uint64_t seed() {
  static const std::uint64_t s = [] {
    const std::uint64_t v = lockstep::ad::seed_from_env();
    std::printf("seed %llu (LOCKSTEP_SEED reproduces)\n", static_cast<unsigned long long>(v));
    return v;
  }();
  return s;
}

// The gate cases of the pointwise kernel family (ops_pointwise.cpp).
std::vector<gate::Case> pointwise_cases() {
  return gate::cases_of({"embedding", "positions", "layernorm", "rmsnorm", "gelu", "swiglu", "relu2_mul", "residual",
                         "rope", "cross_entropy", "add_into"});
}

}  // namespace

TEST(CudaPointwise, EveryGateCasePassesCleanAndPoisoned) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  const auto cases = pointwise_cases();
  gate::Options opt;
  opt.seed = seed();
  const auto outcomes = gate::run_gates(cases, opt);
  std::size_t failed = 0, poisoned = 0;
  double seconds = 0;
  for (const auto& o : outcomes) {
    poisoned += o.poisoned;
    seconds += o.seconds;
    if (!o.difference.empty()) {
      ++failed;
      ADD_FAILURE() << o.kernel << " on " << o.shape << (o.poisoned ? " (dirty pass)" : "") << ": " << o.difference;
    }
  }
  std::vector<std::string> kernels;
  for (const auto& c : cases)
    if (std::find(kernels.begin(), kernels.end(), c.kernel) == kernels.end()) kernels.push_back(c.kernel);
  std::printf("pointwise gates: %zu cases over %zu kernels, %zu runs (%zu on poisoned buffers), %zu failed, %.2f s\n",
              cases.size(), kernels.size(), outcomes.size(), poisoned, failed, seconds);
  EXPECT_EQ(outcomes.size(), 2 * cases.size());
  EXPECT_EQ(failed, 0u);
}

TEST(CudaPointwise, GatesRejectTheFamilysMutants) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  const auto cases = pointwise_cases();
  struct M {
    cu::Mutant m;
    const char* kernel;
  };
  for (const M& k : {M{cu::Mutant::residual_flush_negative_zero, "residual_fwd"},
                     M{cu::Mutant::layernorm_fused_mul_add, "layernorm_fwd"},
                     M{cu::Mutant::rmsnorm_rows_blocked_lanes, "rmsnorm_fwd"}}) {
    gate::Options opt;
    opt.seed = seed();
    opt.dirty_pass = false;
    opt.only = {k.kernel};
    cu::set_mutant(k.m);
    const auto outcomes = gate::run_gates(cases, opt);
    cu::set_mutant(cu::Mutant::none);
    std::size_t caught = 0;
    std::string example;
    for (const auto& o : outcomes)
      if (!o.difference.empty()) {
        ++caught;
        if (example.empty()) example = o.shape + ": " + o.difference;
      }
    std::printf("mutant '%s': refused by %zu of %zu %s cases (e.g. %s)\n", std::string(cu::mutant_name(k.m)).c_str(),
                caught, outcomes.size(), k.kernel, example.c_str());
    EXPECT_GT(outcomes.size(), 0u);
    EXPECT_GT(caught, 0u) << cu::mutant_name(k.m) << " was not caught";
    // And without the mutant the same cases pass.
    const auto clean = gate::run_gates(cases, opt);
    for (const auto& o : clean) EXPECT_EQ(o.difference, "") << o.kernel << " " << o.shape;
  }
}

// --- GPT-2 124M shapes ----------------------------------------------------------

namespace {

constexpr std::size_t B = 16, T = 1024, N = B * T, D = 768, F = 3072, V = 50257;

// n floats: a 1M-value seeded block, tiled (scaled by `scale`).
std::vector<float> tiled(std::size_t n, std::uint64_t s, float scale) {
  lockstep::ad::Rng rng(s);
  std::vector<float> block(std::min<std::size_t>(n, 1u << 20));
  for (float& x : block) x = scale * static_cast<float>(rng.normal());
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; i += block.size())
    std::memcpy(v.data() + i, block.data(), std::min(block.size(), n - i) * sizeof(float));
  return v;
}

cu::DeviceBuffer<float> up(const std::vector<float>& h) {
  cu::DeviceBuffer<float> d;
  d.upload(h);
  return d;
}

struct Timer {
  cudaEvent_t a, b;
  Timer() {
    cudaEventCreate(&a);
    cudaEventCreate(&b);
  }
  ~Timer() {
    cudaEventDestroy(a);
    cudaEventDestroy(b);
  }
  // Mean milliseconds of `reps` launches after one warm-up.
  double ms(const std::function<void()>& f, int reps = 10) {
    f();
    cu::synchronize("warm-up");
    cudaEventRecord(a);
    for (int i = 0; i < reps; ++i) f();
    cudaEventRecord(b);
    cudaEventSynchronize(b);
    float t = 0;
    cudaEventElapsedTime(&t, a, b);
    cu::synchronize("timed launches");
    return t / reps;
  }
};

void report(const char* kernel, const char* shape, double ms, double bytes) {
  std::printf("  %-14s %-28s %9.1f us %8.0f GB/s\n", kernel, shape, ms * 1e3, bytes / (ms * 1e-3) / 1e9);
}

std::size_t differing(const std::vector<float>& cpu, const std::vector<float>& gpu) {
  std::size_t bad = 0;
  for (std::size_t i = 0; i < cpu.size(); ++i) bad += std::memcmp(&cpu[i], &gpu[i], 4) != 0;
  return bad;
}

}  // namespace

TEST(CudaPointwise, Gpt2ShapesMatchTheCpuAndTimings) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  cu::OpKernels g;
  lockstep::cpu::OpKernels c;
  c.threads = lockstep::util::hardware_threads();
  Timer timer;
  std::printf("GPT-2 124M shapes (N = %zu rows, D %zu, F %zu, V %zu), mean of 10 launches:\n", N, D, F, V);
  const double f4 = 4.0;

  // Embedding + positions.
  {
    lockstep::ad::Rng rng(seed() ^ 7);
    std::vector<ops::Index> ids(N);
    for (auto& id : ids) id = static_cast<ops::Index>(rng.below(V));
    for (std::size_t n = 0; n < N; n += 7) ids[n] = 50256;  // a frequent token (GPT-2's <|endoftext|>)
    cu::DeviceBuffer<ops::Index> d_ids;
    d_ids.upload(ids);
    const auto wte = tiled(V * D, 1, 0.02f), wpe = tiled(T * D, 2, 0.01f), dy = tiled(N * D, 3, 1.0f);
    auto d_wte = up(wte), d_wpe = up(wpe), d_dy = up(dy);
    cu::DeviceBuffer<float> d_y(N * D), d_y2(N * D), d_dwte(V * D), d_dx(N * D), d_dwpe(T * D);
    const ops::Embedding::Config ec{N, V, D};
    const ops::LearnedPositions::Config pc{B, T, D, T, 0};
    report("embedding_fwd", "N x D", timer.ms([&] {
      g.forward<ops::Embedding>(ec, {.ids = d_ids.data(), .wte = d_wte.data(), .y = d_y.data()});
    }),
           f4 * 2 * N * D);
    report("positions_fwd", "N x D", timer.ms([&] {
      g.forward<ops::LearnedPositions>(pc, {.x = d_y.data(), .wpe = d_wpe.data(), .y = d_y2.data()});
    }),
           f4 * 3 * N * D);
    report("embedding_bwd", "N x D -> V x D", timer.ms([&] {
      g.backward<ops::Embedding>(ec, {.ids = d_ids.data(), .dy = d_dy.data(), .dwte = d_dwte.data()});
    }),
           f4 * (N * D + V * D));
    report("positions_bwd", "N x D -> T x D", timer.ms([&] {
      g.backward<ops::LearnedPositions>(pc, {.dy = d_dy.data(), .dx = d_dx.data(), .dwpe = d_dwpe.data()});
    }),
           f4 * (3 * N * D + T * D));
    std::vector<float> dwte(V * D), dx(N * D), dwpe(T * D), y(N * D), y2(N * D);
    c.backward<ops::Embedding>(ec, {.ids = ids.data(), .dy = dy.data(), .dwte = dwte.data()});
    c.backward<ops::LearnedPositions>(pc, {.dy = dy.data(), .dx = dx.data(), .dwpe = dwpe.data()});
    c.forward<ops::Embedding>(ec, {.ids = ids.data(), .wte = wte.data(), .y = y.data()});
    c.forward<ops::LearnedPositions>(pc, {.x = y.data(), .wpe = wpe.data(), .y = y2.data()});
    EXPECT_EQ(differing(dwte, d_dwte.download()), 0u) << "embedding_bwd";
    EXPECT_EQ(differing(dwpe, d_dwpe.download()), 0u) << "positions_bwd";
    EXPECT_EQ(differing(y2, d_y2.download()), 0u) << "embedding_fwd + positions_fwd";
  }

  // Norms.
  {
    const auto x = tiled(N * D, 4, 1.0f), dy = tiled(N * D, 5, 1.0f), gam = tiled(D, 6, 1.0f), bet = tiled(D, 7, 1.0f);
    auto d_x = up(x), d_dy = up(dy), d_g = up(gam), d_b = up(bet);
    cu::DeviceBuffer<float> d_y(N * D), d_mean(N), d_rstd(N), d_dx(N * D), d_dg(D), d_db(D);
    const ops::NormConfig nc{N, D, 1e-5};
    report("layernorm_fwd", "N x D", timer.ms([&] {
      g.forward<ops::LayerNorm>(nc, {.x = d_x.data(), .gamma = d_g.data(), .beta = d_b.data(), .y = d_y.data(),
                                     .mean = d_mean.data(), .rstd = d_rstd.data()});
    }),
           f4 * 2 * N * D);
    report("layernorm_bwd", "N x D", timer.ms([&] {
      g.backward<ops::LayerNorm>(nc, {.x = d_x.data(), .gamma = d_g.data(), .mean = d_mean.data(),
                                      .rstd = d_rstd.data(), .dy = d_dy.data(), .dx = d_dx.data(),
                                      .dgamma = d_dg.data(), .dbeta = d_db.data()});
    }),
           f4 * 3 * N * D);
    std::vector<float> y(N * D), mean(N), rstd(N), dx(N * D), dg(D), db(D);
    c.forward<ops::LayerNorm>(nc, {.x = x.data(), .gamma = gam.data(), .beta = bet.data(), .y = y.data(),
                                   .mean = mean.data(), .rstd = rstd.data()});
    c.backward<ops::LayerNorm>(nc, {.x = x.data(), .gamma = gam.data(), .mean = mean.data(), .rstd = rstd.data(),
                                    .dy = dy.data(), .dx = dx.data(), .dgamma = dg.data(), .dbeta = db.data()});
    EXPECT_EQ(differing(y, d_y.download()) + differing(mean, d_mean.download()) + differing(rstd, d_rstd.download()),
              0u)
        << "layernorm_fwd";
    EXPECT_EQ(differing(dx, d_dx.download()) + differing(dg, d_dg.download()) + differing(db, d_db.download()), 0u)
        << "layernorm_bwd";
    report("rmsnorm_fwd", "N x D", timer.ms([&] {
      g.forward<ops::RmsNorm>(nc, {.x = d_x.data(), .w = d_g.data(), .y = d_y.data(), .rstd = d_rstd.data()});
    }),
           f4 * 2 * N * D);
    report("rmsnorm_bwd", "N x D", timer.ms([&] {
      g.backward<ops::RmsNorm>(nc, {.x = d_x.data(), .w = d_g.data(), .rstd = d_rstd.data(), .dy = d_dy.data(),
                                    .dx = d_dx.data(), .dw = d_dg.data()});
    }),
           f4 * 3 * N * D);
    c.forward<ops::RmsNorm>(nc, {.x = x.data(), .w = gam.data(), .y = y.data(), .rstd = rstd.data()});
    c.backward<ops::RmsNorm>(
        nc, {.x = x.data(), .w = gam.data(), .rstd = rstd.data(), .dy = dy.data(), .dx = dx.data(), .dw = dg.data()});
    EXPECT_EQ(differing(y, d_y.download()) + differing(rstd, d_rstd.download()), 0u) << "rmsnorm_fwd";
    EXPECT_EQ(differing(dx, d_dx.download()) + differing(dg, d_dg.download()), 0u) << "rmsnorm_bwd";
    const ops::ElementwiseConfig ec{N * D};
    report("residual_fwd", "N x D",
           timer.ms([&] { g.forward<ops::ResidualAdd>(ec, {.a = d_x.data(), .b = d_dy.data(), .y = d_y.data()}); }),
           f4 * 3 * N * D);
    report("residual_bwd", "N x D (2 copies)", timer.ms([&] {
      g.backward<ops::ResidualAdd>(ec, {.dy = d_dy.data(), .da = d_dx.data(), .db = d_y.data()});
    }),
           f4 * 4 * N * D);
    report("add_into", "N x D", timer.ms([&] { g.add_into(N * D, d_y.data(), d_x.data()); }), f4 * 3 * N * D);
    const ops::Rope::Config rc{B, T, 12, 64, 10000.0, ops::RopeLayout::rotate_half, 0};
    report("rope_fwd", "B T 12 heads x 64",
           timer.ms([&] { g.forward<ops::Rope>(rc, {.x = d_x.data(), .y = d_y.data()}); }), f4 * 2 * N * D);
    report("rope_bwd", "B T 12 heads x 64",
           timer.ms([&] { g.backward<ops::Rope>(rc, {.dy = d_dy.data(), .dx = d_dx.data()}); }), f4 * 2 * N * D);
  }

  // Activations on N x F.
  {
    const auto a = tiled(N * F, 8, 1.0f), b = tiled(N * F, 9, 1.0f), dy = tiled(N * F, 10, 1.0f);
    auto d_a = up(a), d_b = up(b), d_dy = up(dy);
    cu::DeviceBuffer<float> d_y(N * F), d_d1(N * F), d_d2(N * F);
    cu::Aux aux;
    const ops::ElementwiseConfig ec{N * F};
    report("gelu_fwd", "N x F", timer.ms([&] { g.forward<ops::Gelu>(ec, {.x = d_a.data(), .y = d_y.data()}, aux); }),
           f4 * 3 * N * F);
    report("gelu_bwd", "N x F",
           timer.ms([&] { g.backward<ops::Gelu>(ec, {.x = d_a.data(), .dy = d_dy.data(), .dx = d_d1.data()}, aux); }),
           f4 * 4 * N * F);
    {
      std::vector<float> y(N * F), dx(N * F);
      lockstep::cpu::Aux caux;
      c.forward<ops::Gelu>(ec, {.x = a.data(), .y = y.data()}, caux);
      c.backward<ops::Gelu>(ec, {.x = a.data(), .dy = dy.data(), .dx = dx.data()}, caux);
      EXPECT_EQ(differing(y, d_y.download()) + differing(caux.a, aux.a.download()), 0u) << "gelu_fwd";
      EXPECT_EQ(differing(dx, d_d1.download()), 0u) << "gelu_bwd";
    }
    report("swiglu_fwd", "N x F",
           timer.ms([&] { g.forward<ops::SwiGlu>(ec, {.gate = d_a.data(), .up = d_b.data(), .y = d_y.data()}, aux); }),
           f4 * 4 * N * F);
    report("swiglu_bwd", "N x F", timer.ms([&] {
      g.backward<ops::SwiGlu>(
          ec, {.gate = d_a.data(), .up = d_b.data(), .dy = d_dy.data(), .dgate = d_d1.data(), .dup = d_d2.data()}, aux);
    }),
           f4 * 6 * N * F);
    report("relu2mul_fwd", "N x F",
           timer.ms([&] { g.forward<ops::ReluSqMul>(ec, {.gate = d_a.data(), .up = d_b.data(), .y = d_y.data()}); }),
           f4 * 3 * N * F);
    report("relu2mul_bwd", "N x F", timer.ms([&] {
      g.backward<ops::ReluSqMul>(
          ec, {.gate = d_a.data(), .up = d_b.data(), .dy = d_dy.data(), .dgate = d_d1.data(), .dup = d_d2.data()});
    }),
           f4 * 5 * N * F);
  }

  // Cross-entropy on N x V (3.3 GB of logits).
  {
    lockstep::ad::Rng rng(seed() ^ 11);
    std::vector<ops::Index> t(N);
    for (auto& x : t) x = rng.below(50) == 0 ? -1 : static_cast<ops::Index>(rng.below(V));
    cu::DeviceBuffer<ops::Index> d_t;
    d_t.upload(t);
    const auto z = tiled(N * V, 12, 3.0f), dl = tiled(N, 13, 1.0f);
    auto d_z = up(z), d_dl = up(dl);
    cu::DeviceBuffer<float> d_loss(N), d_lse(N), d_dz(N * V);
    const ops::CrossEntropy::Config cc{N, V};
    report("ce_fwd", "N x V",
           timer.ms(
               [&] {
                 g.forward<ops::CrossEntropy>(
                     cc, {.logits = d_z.data(), .targets = d_t.data(), .loss = d_loss.data(), .lse = d_lse.data()});
               },
               3),
           f4 * N * V);
    report("ce_bwd", "N x V",
           timer.ms(
               [&] {
                 g.backward<ops::CrossEntropy>(cc, {.logits = d_z.data(), .targets = d_t.data(), .lse = d_lse.data(),
                                                    .dloss = d_dl.data(), .dlogits = d_dz.data()});
               },
               3),
           f4 * 2 * N * V);
    std::vector<float> loss(N), lse(N), dz(N * V);
    c.forward<ops::CrossEntropy>(cc, {.logits = z.data(), .targets = t.data(), .loss = loss.data(), .lse = lse.data()});
    c.backward<ops::CrossEntropy>(
        cc, {.logits = z.data(), .targets = t.data(), .lse = lse.data(), .dloss = dl.data(), .dlogits = dz.data()});
    EXPECT_EQ(differing(loss, d_loss.download()) + differing(lse, d_lse.download()), 0u) << "ce_fwd";
    EXPECT_EQ(differing(dz, d_dz.download()), 0u) << "ce_bwd";
  }
}
