// The CUDA model against the CPU model (issue 5's acceptance): the same loss,
// gradient and logit bits for each family; a training run on the GPU ends on
// the CPU run's weight hash; a checkpoint from either device resumes on the
// other and ends on the same hash; the live audits watch a run and catch a
// corrupted output cell.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "lockstep/backend/cuda/audit.hpp"
#include "lockstep/backend/cuda/device.hpp"
#include "lockstep/backend/cuda/gate.hpp"
#include "lockstep/model/model.hpp"
#include "lockstep/num/hash.hpp"
#include "lockstep/num/rng.hpp"
#include "lockstep/train/optim.hpp"
#include "lockstep/train/step.hpp"
#include "lockstep/train/run.hpp"

#include "../common/sample_text.hpp"
#include "../common/tokens.hpp"
#include "audit_problems.hpp"

namespace fs = std::filesystem;
using namespace lockstep;

namespace {

using test::tokens;

std::uint32_t bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

class Families : public ::testing::TestWithParam<const char*> {};

TEST_P(Families, LossGradientsAndLogitsAreTheCpuModelsBits) {
  model::ModelConfig cfg = model::preset(GetParam());
  auto cpu = model::make_cpu_model(cfg);
  auto gpu = model::make_cuda_model(cfg);
  cpu->init(3);
  gpu->init(3);
  const std::int64_t B = 3, T = 37;  // ragged on purpose
  auto in = tokens(B * T, cfg.vocab_size, 1), tg = tokens(B * T, cfg.vocab_size, 2);
  tg[5] = -1;  // ignored rows
  tg[40] = -1;
  for (bool accumulate : {false, true}) {
    if (accumulate) {
      in = tokens(B * T, cfg.vocab_size, 3);
      tg = tokens(B * T, cfg.vocab_size, 4);
    }
    const float lc = cpu->forward_backward(in, tg, B, T, accumulate, 2);
    const float lg = gpu->forward_backward(in, tg, B, T, accumulate, 0);
    EXPECT_EQ(bits(lc), bits(lg)) << "loss " << lc << " vs " << lg;
    std::size_t tensors = 0;
    for (std::size_t i = 0; i < cpu->params().size(); ++i) {
      const auto& pc = cpu->params()[i];
      const auto& pg = gpu->params()[i];
      EXPECT_EQ(cuda::gate::first_difference(pc.name + ".grad", pc.grad, pg.grad), "")
          << (accumulate ? "(accumulated)" : "");
      ++tensors;
    }
    std::printf("%s %s: loss %.6f (0x%08x) on both; %zu gradient tensors compared bit for bit\n", GetParam(),
                accumulate ? "accumulate" : "fresh", static_cast<double>(lc), bits(lc), tensors);
  }
  EXPECT_EQ(bits(cpu->loss(in, tg, B, T, 2)), bits(gpu->loss(in, tg, B, T, 0)));
  // Activations recomputed block by block on the device: the same bits again.
  gpu->set_recompute(true);
  EXPECT_EQ(bits(gpu->forward_backward(in, tg, B, T, false, 0)), bits(cpu->forward_backward(in, tg, B, T, false, 2)));
  for (std::size_t i = 0; i < cpu->params().size(); ++i)
    EXPECT_EQ(cuda::gate::first_difference(cpu->params()[i].name + ".grad (recomputed)", cpu->params()[i].grad,
                                           gpu->params()[i].grad),
              "");
  gpu->set_recompute(false);
  const auto prompt = tokens(50, cfg.vocab_size, 5);
  EXPECT_EQ(cuda::gate::first_difference("next_logits", cpu->next_logits(prompt, 2), gpu->next_logits(prompt, 0)),
            "");
}

INSTANTIATE_TEST_SUITE_P(Micro, Families, ::testing::Values("gpt2-micro", "llama-micro", "bitnet-micro"));

TEST(CudaMemory, ASteadyStateStepAllocatesNothing) {
  model::ModelConfig cfg = model::preset("gpt2-micro");
  // Progress lines with their times: session 10 saw this test run past 300 s
  // on the H200 (the rest of the binary: 50 s), so say where the time goes.
  const auto t0 = std::chrono::steady_clock::now();
  auto since = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  auto gpu = model::make_cuda_model(cfg, "off");
  std::printf("model made (start-up gates included) at %.1f s\n", since());
  std::fflush(stdout);
  gpu->init(1);
  ASSERT_NE(gpu->step_stages(), nullptr);
  const std::int64_t B = 4, T = 32;
  const auto in = tokens(B * T, cfg.vocab_size, 7), tg = tokens(B * T, cfg.vocab_size, 8);
  const train::AdamWConfig adamw;
  auto step = [&](std::int64_t t) {
    train::run_step(*gpu->step_stages(), {in, tg, B, T, 1}, 1.0f, train::adamw_scalars(adamw, 1e-3f, t), {}, 0);
  };
  step(1);
  std::printf("step 1 at %.1f s\n", since());
  std::fflush(stdout);
  step(2);
  std::printf("step 2 at %.1f s\n", since());
  std::fflush(stdout);
  const std::size_t before = cuda::allocation_count();
  for (std::int64_t t = 3; t <= 6; ++t) step(t);
  std::printf("cudaMalloc calls: %zu after 2 steps, %zu after 6; %zu bytes held\n", before,
              cuda::allocation_count(), cuda::bytes_in_use());
  EXPECT_EQ(cuda::allocation_count(), before);
}

std::string sample_text(int paragraphs) { return lockstep::test::sample_text(paragraphs, 1234u); }

struct TrainRun {
  fs::path base;
  train::TrainConfig cfg;
  TrainRun() {
    base = fs::temp_directory_path() / ("lockstep_cuda_model_test_" + std::to_string(::getpid()));
    fs::remove_all(base);
    fs::create_directories(base);
    std::ofstream(base / "text.txt") << sample_text(300);
    cfg.model = "gpt2-micro";
    cfg.data = (base / "text.txt").string();
    cfg.vocab = 300;
    cfg.steps = 24;
    cfg.batch = 4;
    cfg.accum = 2;  // the 1/accum gradient scale on the device path too
    cfg.seq = 48;
    cfg.lr = 3e-3;
    cfg.warmup = 4;
    cfg.seed = 11;
    cfg.eval_every = 0;
    cfg.eval_tokens = 256;
    cfg.save_every = 12;
    cfg.max_minutes = 0;
  }
  ~TrainRun() { fs::remove_all(base); }
  train::RunSummary go(const std::string& device, const std::string& out, int stop_at = 0,
                       const std::string& resume = "") {
    train::TrainConfig c = cfg;
    c.device = device;
    c.out = (base / out).string();
    train::RunOptions ro;
    static std::FILE* sink = std::fopen("/dev/null", "w");
    ro.out = sink;
    std::atomic<bool> stop{false};
    ro.stop = &stop;
    if (stop_at > 0)
      ro.on_step = [&](const train::StepResult& r) {
        if (r.step == stop_at) stop = true;
      };
    if (!resume.empty()) {
      ro.resume = (base / resume).string();
      ro.given = {"device"};
    }
    return train::run_training(c, ro);
  }
};

TEST(CudaTraining, TheGpuRunEndsOnTheCpuRunsWeights) {
  TrainRun r;
  const auto cpu = r.go("cpu", "cpu");
  const auto gpu = r.go("cuda", "cuda");
  std::printf("gpt2-micro, %lld steps: cpu %s, cuda %s; final validation %.6f vs %.6f bits/byte\n",
              static_cast<long long>(r.cfg.steps), num::hash_hex(cpu.weights_hash).c_str(),
              num::hash_hex(gpu.weights_hash).c_str(), cpu.final_eval ? cpu.final_eval->bpb : -1.0,
              gpu.final_eval ? gpu.final_eval->bpb : -1.0);
  EXPECT_EQ(cpu.weights_hash, gpu.weights_hash);
  ASSERT_TRUE(cpu.final_eval && gpu.final_eval);
  EXPECT_EQ(cpu.final_eval->bpb, gpu.final_eval->bpb);

  // Stopped on one device at step 12 (saved), resumed on the other.
  const auto a1 = r.go("cpu", "cpu_then_cuda", 12);
  EXPECT_TRUE(a1.interrupted);
  const auto a2 = r.go("cuda", "", 0, "cpu_then_cuda");
  const auto b1 = r.go("cuda", "cuda_then_cpu", 12);
  EXPECT_TRUE(b1.interrupted);
  const auto b2 = r.go("cpu", "", 0, "cuda_then_cpu");
  std::printf("cpu 12 + cuda 12: %s; cuda 12 + cpu 12: %s\n", num::hash_hex(a2.weights_hash).c_str(),
              num::hash_hex(b2.weights_hash).c_str());
  EXPECT_EQ(a2.weights_hash, cpu.weights_hash);
  EXPECT_EQ(b2.weights_hash, cpu.weights_hash);
}

TEST(CudaTraining, EveryFamilyEndsOnTheCpuRunsWeights) {
  // llama (RMSNorm, SwiGLU, RoPE, grouped-query attention) and bitnet
  // (BitLinear, its weight scale kept on the device); gpt2 is the test above.
  for (const char* family : {"llama-micro", "bitnet-micro"}) {
    TrainRun r;
    r.cfg.model = family;
    r.cfg.steps = 8;
    r.cfg.save_every = 0;
    const auto cpu = r.go("cpu", "cpu");
    const auto gpu = r.go("cuda", "cuda");
    std::printf("%s, %lld steps (accum %lld): cpu %s, cuda %s\n", family, static_cast<long long>(r.cfg.steps),
                static_cast<long long>(r.cfg.accum), num::hash_hex(cpu.weights_hash).c_str(),
                num::hash_hex(gpu.weights_hash).c_str());
    EXPECT_EQ(cpu.weights_hash, gpu.weights_hash) << family;
  }
}

// DESIGN (issue 5, memory): no host synchronization inside a step except the
// audits'. The step pipeline (train::run_step) over the device model's stages
// stages the batch asynchronously, keeps the losses, the norm and the clip on
// the device, and reads one control block at its end.
TEST(CudaTraining, AStepWaitsForTheDeviceOnceAtItsEnd) {
  for (const char* family : {"gpt2-micro", "llama-micro", "bitnet-micro"}) {
    model::ModelConfig cfg = model::preset(family);
    auto gpu = model::make_cuda_model(cfg, "off");
    gpu->init(3);
    const std::int64_t B = 2, T = 32, A = 2;
    const auto in = tokens(B * T * A, cfg.vocab_size, 21), tg = tokens(B * T * A, cfg.vocab_size, 22);
    const train::AdamWConfig adamw;
    const train::StepBatch batch{in, tg, B, T, A};
    for (std::int64_t t = 1; t <= 2; ++t)  // first steps: tables, staging buffers
      train::run_step(*gpu->step_stages(), batch, 1.0f, train::adamw_scalars(adamw, 1e-3f, t), {}, 0);
    const std::size_t before = cuda::host_waits();
    const auto r = train::run_step(*gpu->step_stages(), batch, 1.0f, train::adamw_scalars(adamw, 1e-3f, 3), {}, 0);
    const std::size_t step_waits = cuda::host_waits() - before;
    // The micro-batches as separate calls (each forward_backward returns its
    // loss to the host): the counter sees those waits.
    const std::size_t before_split = cuda::host_waits();
    const auto micro = static_cast<std::size_t>(B * T);
    for (std::int64_t a = 0; a < A; ++a)
      gpu->forward_backward(std::span(in).subspan(a * micro, micro), std::span(tg).subspan(a * micro, micro), B, T,
                            a > 0, 0);
    const std::size_t split_waits = cuda::host_waits() - before_split;
    std::printf("%s: the step pipeline waited %zu time(s) for the device (loss %.6f, norm %.6f); its micro-batches "
                "as separate calls waited %zu times\n",
                family, step_waits, static_cast<double>(r.loss), static_cast<double>(r.norm), split_waits);
    EXPECT_EQ(step_waits, 1u) << family;
    EXPECT_GT(split_waits, 1u) << family;
    EXPECT_TRUE(std::isfinite(r.loss) && std::isfinite(r.norm)) << family;
  }
}

// A non-finite loss is decided on the device: no parameter or moment changes,
// and the trainer is handed the loss to refuse the step with.
TEST(CudaTraining, ANonFiniteLossUpdatesNothing) {
  model::ModelConfig cfg = model::preset("gpt2-micro");
  auto gpu = model::make_cuda_model(cfg, "off");
  gpu->init(5);
  for (auto& p : gpu->params())
    if (p.name.find("wte") != std::string::npos) p.value[0] = std::numeric_limits<float>::quiet_NaN();
  const std::int64_t B = 2, T = 16;
  auto in = tokens(B * T, cfg.vocab_size, 31);
  in[0] = 0;  // reads the poisoned row
  const auto tg = tokens(B * T, cfg.vocab_size, 32);
  std::vector<std::vector<float>> before;
  for (const auto& p : gpu->params()) before.push_back(p.value);
  std::vector<std::vector<float>> m0, v0, m1, v1;
  gpu->step_stages()->get_moments(m0, v0);
  const train::AdamWConfig adamw;
  const auto r = train::run_step(*gpu->step_stages(), {in, tg, B, T, 1}, 1.0f, train::adamw_scalars(adamw, 1e-3f, 1),
                                 {}, 0);
  EXPECT_TRUE(std::isnan(r.loss)) << r.loss;
  EXPECT_TRUE(std::isnan(r.norm));
  gpu->step_stages()->get_moments(m1, v1);
  const auto& after = std::as_const(*gpu).params();
  for (std::size_t i = 0; i < after.size(); ++i)
    EXPECT_EQ(0, std::memcmp(after[i].value.data(), before[i].data(), before[i].size() * 4)) << after[i].name;
  EXPECT_EQ(m0, m1);
  EXPECT_EQ(v0, v1);
}

// A kernel cannot throw: the engine checks ids and targets on the host first,
// so the device model refuses what the CPU model refuses, with its message,
// and its parameters are untouched.
TEST(CudaTraining, BadTokensAreRefusedAsOnTheCpu) {
  model::ModelConfig cfg = model::preset("gpt2-micro");
  auto gpu = model::make_cuda_model(cfg, "off");
  auto cpu = model::make_cpu_model(cfg);
  gpu->init(9);
  cpu->init(9);
  const std::int64_t B = 1, T = 16;
  auto in = tokens(B * T, cfg.vocab_size, 41);
  const auto tg = tokens(B * T, cfg.vocab_size, 42);
  in[5] = static_cast<std::int32_t>(cfg.vocab_size);
  const auto message = [&](model::Model& m) {
    try {
      m.forward_backward(in, tg, B, T, false, 1);
    } catch (const std::out_of_range& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  const std::string on_cpu = message(*cpu), on_gpu = message(*gpu);
  std::printf("out-of-range id: cpu \"%s\", cuda \"%s\"\n", on_cpu.c_str(), on_gpu.c_str());
  EXPECT_EQ(on_gpu, on_cpu);
  EXPECT_NE(on_gpu, "accepted");
  const train::AdamWConfig adamw;
  EXPECT_THROW(train::run_step(*gpu->step_stages(), {in, tg, B, T, 1}, 1.0f, train::adamw_scalars(adamw, 1e-3f, 1),
                               {}, 0),
               std::out_of_range);
  const auto& after = std::as_const(*gpu).params();
  const auto& before = std::as_const(*cpu).params();
  for (std::size_t i = 0; i < after.size(); ++i)
    EXPECT_EQ(0, std::memcmp(after[i].value.data(), before[i].value.data(), after[i].value.size() * 4))
        << after[i].name;
}

TEST(CudaAudit, ARunUnderAuditsFindsNoMismatchAndStatesItsCost) {
  // Every family: gpt2 (multi-head attention), llama (grouped-query), bitnet
  // (BitLinear forward audits); the attention backward audited in each.
  for (const char* family : {"gpt2-micro", "llama-micro", "bitnet-micro"}) {
    TrainRun r;
    r.cfg.model = family;
    r.cfg.steps = 8;
    r.cfg.save_every = 0;
    r.cfg.audit = "off";
    const auto plain = r.go("cuda", "plain");
    r.cfg.audit = "stop";
    cuda::audit::reset_stats();
    const auto audited = r.go("cuda", "audited");
    const auto st = cuda::audit::stats();
    std::printf("%s audited run: %zu launches, %zu cells, %zu mismatches, %.3f s auditing; steps %.3f s (plain %.3f "
                "s)\n",
                family, st.launches, st.cells, st.mismatches, st.seconds, audited.train_seconds, plain.train_seconds);
    EXPECT_GT(st.launches, 0u) << family;
    EXPECT_EQ(st.mismatches, 0u) << family << ": " << st.first_report;
    EXPECT_EQ(audited.weights_hash, plain.weights_hash) << family;
  }
}

TEST(CudaAudit, ACorruptedCellIsCaught) {
  // y = x·Wᵀ computed right, then one interior cell of the last row flipped:
  // the audit of that launch must name it (the last row is always audited).
  const std::size_t N = 33, K = 20, M = 17;
  std::vector<float> x(N * K), w(M * K), y(N * M, 0.0f);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7) * 0.25f - 0.5f;
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 5) * 0.125f - 0.25f;
  for (std::size_t n = 0; n < N; ++n)
    for (std::size_t m = 0; m < M; ++m) {
      float acc = 0.0f;
      for (std::size_t k = 0; k < K; ++k) acc = std::fma(x[n * K + k], w[m * K + k], acc);
      y[n * M + m] = acc;
    }
  cuda::DeviceBuffer<float> dx, dw, dy;
  dx.upload(x);
  dw.upload(w);
  dy.upload(y);
  cuda::audit::Options o;
  o.enabled = true;
  cuda::audit::configure(o);
  EXPECT_NO_THROW(cuda::audit::matmul("test", N, M, K, dx.data(), K, 1, dw.data(), 1, K, nullptr, dy.data(), M));
  y[(N - 1) * M + M / 2] = std::nextafter(y[(N - 1) * M + M / 2], 1e30f);
  dy.upload(y);
  try {
    cuda::audit::matmul("test", N, M, K, dx.data(), K, 1, dw.data(), 1, K, nullptr, dy.data(), M);
    ADD_FAILURE() << "the corrupted cell was not caught";
  } catch (const std::runtime_error& e) {
    std::printf("caught: %s\n", e.what());
    EXPECT_NE(std::string(e.what()).find("cell (32, 8)"), std::string::npos);
  }
  cuda::audit::configure({});
}

TEST(CudaAudit, ACorruptedAttentionGradientCellIsCaught) {
  // dq, dk, dv computed right (cpu::OpKernels, bit-identical to the CUDA
  // kernels), uploaded, then one cell corrupted at a time: the audit of that
  // launch, reading the device buffers, must name the tensor and the cell.
  const ops::Attention::Config c{2, 70, 4, 2, 8, 0.0, 64};
  test::AttentionProblem p(c);
  cuda::DeviceBuffer<float> qkv, o, lse, dout, dqkv;
  qkv.upload(p.qkv);
  o.upload(p.o);
  lse.upload(p.lse);
  dout.upload(p.dout);
  dqkv.upload(p.dqkv);
  auto audit = [&] {
    const float* d = dqkv.data();
    cuda::audit::attention_bwd(c, qkv.data(), p.ld, qkv.data() + p.ok, qkv.data() + p.ov, p.ld, o.data(), lse.data(),
                               dout.data(), d, d + p.ok, d + p.ov);
  };
  cuda::audit::Options opt;
  opt.enabled = true;
  cuda::audit::configure(opt);
  cuda::audit::reset_stats();
  EXPECT_NO_THROW(audit());
  EXPECT_EQ(cuda::audit::stats().mismatches, 0u);
  const std::size_t B = c.batch, T = c.seq, Dh = c.head_dim;
  const std::pair<std::size_t, const char*> cases[] = {
      {p.dq_at(B - 1, T - 1, c.q_heads - 1, Dh - 1), "dq of (b 1, h 3, i 69) d 7"},
      {p.dq_at(0, 0, 0, 0), "dq of (b 0, h 0, i 0) d 0"},
      {p.dk_at(B - 1, 0, c.kv_heads - 1, 2), "dk of (b 1, kv head 1, j 0) d 2"},
      {p.dv_at(B - 1, T - 1, c.kv_heads - 1, 0), "dv of (b 1, kv head 1, j 69) d 0"},
  };
  for (const auto& [at, want] : cases) {
    std::vector<float> bad = p.dqkv;
    bad[at] = std::nextafter(bad[at], 1e30f);
    dqkv.upload(bad);
    try {
      audit();
      ADD_FAILURE() << "the corrupted cell was not caught: " << want;
    } catch (const std::runtime_error& e) {
      std::printf("caught: %s\n", e.what());
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  }
  cuda::audit::configure({});
}

TEST(CudaAudit, ACorruptedBitLinearCellIsCaught) {
  test::BitLinearProblem p(33, 40, 17);
  cuda::DeviceBuffer<float> x, w, y;
  x.upload(p.x);
  w.upload(p.w);
  y.upload(p.y);
  cuda::audit::Options opt;
  opt.enabled = true;
  cuda::audit::configure(opt);
  EXPECT_NO_THROW(cuda::audit::bitlinear_fwd(p.N, p.K, p.M, x.data(), w.data(), p.scale, y.data()));
  p.y[(p.N - 1) * p.M + p.M / 2] = std::nextafter(p.y[(p.N - 1) * p.M + p.M / 2], 1e30f);
  y.upload(p.y);
  try {
    cuda::audit::bitlinear_fwd(p.N, p.K, p.M, x.data(), w.data(), p.scale, y.data());
    ADD_FAILURE() << "the corrupted cell was not caught";
  } catch (const std::runtime_error& e) {
    std::printf("caught: %s\n", e.what());
    EXPECT_NE(std::string(e.what()).find("cell (32, 8)"), std::string::npos);
  }
  cuda::audit::configure({});
}

}  // namespace
