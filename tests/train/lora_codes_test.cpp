// A frozen ternary base held as its 2-bit codes (docs/LORA.md, "The base held
// as codes"): model::hold_frozen_ternary_as_codes and the CPU engine's codes
// path (cpu::OpKernels::bitlinear_codes_fwd / _bwd) give the F32 masters' bits.
//
//   * the two kernels = run(BitLinear)'s y and dx on the masters, on ragged
//     shapes (K not a multiple of 4: codes straddle bytes; M, K not whole
//     column tiles) and 1/2/5 threads;
//   * a model whose frozen base is held as codes: the loss, every adapter
//     gradient and next_logits equal the masters model's bit for bit
//     (bitnet-micro and bitnet-tiny, adapters on all seven targets, dropout,
//     block recomputation too), and holds a quarter byte a weight;
//   * a finetune on the codes ends on the masters run's adapter hash and
//     metrics (losses, grad norms) line by line (bitnet-tiny, a few steps);
//   * only frozen BitLinear projections change: a trainable BitNet, a LLaMA
//     base and a model without the codes path are left as they are.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "lockstep/backend/cpu/ops.hpp"
#include "lockstep/data/sft.hpp"
#include "lockstep/model/kernel_aux.hpp"
#include "lockstep/model/lora_params.hpp"
#include "lockstep/model/model.hpp"
#include "lockstep/num/fp.hpp"
#include "lockstep/num/rng.hpp"
#include "lockstep/ops/quant.hpp"
#include "lockstep/tensor/storage.hpp"
#include "lockstep/train/finetune.hpp"

namespace m = lockstep::model;
namespace ops = lockstep::ops;
namespace t = lockstep::tensor;
namespace tr = lockstep::train;
namespace fs = std::filesystem;
using lockstep::num::bits_of;

namespace {

std::vector<float> normal(std::size_t n, std::uint64_t seed, float sigma) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i)
    v[i] = sigma * lockstep::num::rng::normal(seed, 1, i);
  return v;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (bits_of(a[i]) != bits_of(b[i])) return false;
  return true;
}

// The first index whose bits differ, or -1.
long first_difference(const std::vector<float>& a, const std::vector<float>& b) {
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    if (bits_of(a[i]) != bits_of(b[i])) return static_cast<long>(i);
  return a.size() == b.size() ? -1 : static_cast<long>(std::min(a.size(), b.size()));
}

// The adapter's settings of these tests: every target, B random so that the
// branch moves the loss, dropout on while training.
m::LoraConfig all_targets() {
  m::LoraConfig c;
  c.rank = 4;
  c.alpha = 12;  // s = 3: u·s rounds
  c.dropout = 0.1;
  c.targets = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
  return c;
}

std::unique_ptr<m::Model> adapted(const std::string& preset, bool codes) {
  auto model = m::make_cpu_model(m::preset(preset));
  model->init(11);
  m::add_lora_params(model->params(), model->config(), all_targets(), 4);
  for (m::Param& p : model->params())
    if (p.name.find("lora_B") != std::string::npos) p.value = normal(p.value.size(), 77, 0.2f);
  if (codes) {
    EXPECT_EQ(m::hold_frozen_ternary_as_codes(*model), 7 * static_cast<std::size_t>(model->config().n_layer));
  }
  return model;
}

std::vector<std::int32_t> tokens(std::size_t n, std::int64_t vocab, std::uint64_t seed) {
  std::vector<std::int32_t> v(n);
  for (std::size_t i = 0; i < n; ++i)
    v[i] = static_cast<std::int32_t>(lockstep::num::rng::bits32(seed, 3, i) % static_cast<std::uint32_t>(vocab));
  return v;
}

}  // namespace

TEST(LoraCodes, TheCodesKernelsAreBitLinearOnTheMastersBitForBit) {
  const std::size_t min_work = lockstep::cpu::min_parallel_work();
  lockstep::cpu::set_min_parallel_work(1);  // split even these shapes across threads
  struct Shape {
    std::size_t N, K, M;
  };
  for (const Shape s : {Shape{5, 37, 70}, Shape{3, 130, 67}, Shape{9, 64, 128}, Shape{1, 7, 3}}) {
    const std::vector<float> w = normal(s.M * s.K, 1 + s.K, 0.05f), x = normal(s.N * s.K, 2 + s.M, 1.0f),
                             dy = normal(s.N * s.M, 3 + s.N, 0.3f);
    const ops::TernaryCodes<float> q = ops::quantize_ternary(w.data(), w.size());
    const t::Storage codes = t::Storage::ternary({static_cast<std::int64_t>(s.M), static_cast<std::int64_t>(s.K)}, q.q,
                                                 q.scale);
    for (int threads : {1, 2, 5}) {
      lockstep::cpu::OpKernels k;
      k.threads = threads;
      const ops::QuantLinearConfig c{s.N, s.K, s.M};
      std::vector<float> y_ref(s.N * s.M), dx_ref(s.N * s.K), y(s.N * s.M, -1.0f), dx(s.N * s.K, -1.0f);
      m::Aux aux;
      k.forward<ops::BitLinear>(c, {.x = x.data(), .w = w.data(), .y = y_ref.data()}, aux);
      k.backward<ops::BitLinear>(
          c, {.x = x.data(), .w = w.data(), .dy = dy.data(), .dx = dx_ref.data(), .dw = nullptr}, aux);
      k.bitlinear_codes_fwd(c, x.data(), codes.bytes().data(), codes.scales()[0], y.data());
      k.bitlinear_codes_bwd(c, codes.bytes().data(), codes.scales()[0], dy.data(), dx.data());
      EXPECT_EQ(first_difference(y, y_ref), -1) << "y, N " << s.N << " K " << s.K << " M " << s.M << " threads " << threads;
      EXPECT_EQ(first_difference(dx, dx_ref), -1) << "dx, N " << s.N << " K " << s.K << " M " << s.M << " threads " << threads;
    }
  }
  lockstep::cpu::set_min_parallel_work(min_work);
}

TEST(LoraCodes, ABaseHeldAsCodesGivesTheMastersLossGradientsAndLogits) {
  for (const char* preset : {"bitnet-micro", "bitnet-tiny"}) {
    auto masters = adapted(preset, false), codes = adapted(preset, true);
    const auto& cfg = masters->config();
    // Held: the projections as codes (a quarter byte a weight + the scale), no floats.
    std::size_t weights = 0, code_bytes = 0;
    for (const m::Param& p : codes->params()) {
      if (!m::is_bitlinear_weight(cfg, p.name)) continue;
      ASSERT_EQ(p.dtype, t::DType::ternary2) << p.name;
      EXPECT_EQ(p.value.capacity() + p.grad.capacity(), 0u) << p.name;
      weights += t::numel_of(p.shape);
      code_bytes += m::bytes_held(p);
    }
    EXPECT_LE(code_bytes, weights / 4 + 64 * 7 * static_cast<std::size_t>(cfg.n_layer)) << preset;
    const std::int64_t B = 2, T = 23;
    const auto ids = tokens(B * T, cfg.vocab_size, 1), targets = tokens(B * T, cfg.vocab_size, 2);
    for (bool recompute : {false, true}) {
      masters->set_recompute(recompute);
      codes->set_recompute(recompute);
      for (std::uint64_t pass : {0u, 1u}) {
        m::LoraRun run{.enabled = true, .scale = 3.0, .dropout = 0.1, .training = true, .seed = 9, .pass = pass};
        masters->set_lora(run);
        codes->set_lora(run);
        const float l0 = masters->forward_backward(ids, targets, B, T, false, 2);
        const float l1 = codes->forward_backward(ids, targets, B, T, false, 2);
        EXPECT_EQ(bits_of(l0), bits_of(l1)) << preset << " pass " << pass << " recompute " << recompute;
        const auto& a = masters->params();
        const auto& b = codes->params();
        for (std::size_t i = 0; i < a.size(); ++i) {
          if (!a[i].trainable) continue;
          EXPECT_EQ(first_difference(a[i].grad, b[i].grad), -1) << preset << " " << a[i].name;
        }
      }
    }
    m::LoraRun infer{.enabled = true, .scale = 3.0};
    masters->set_lora(infer);
    codes->set_lora(infer);
    EXPECT_TRUE(same_bits(masters->next_logits(ids, 2), codes->next_logits(ids, 1))) << preset;
    EXPECT_EQ(bits_of(masters->loss(ids, targets, B, T, 1)), bits_of(codes->loss(ids, targets, B, T, 2))) << preset;
    // The float decode mode does not read codes: refused by name.
    EXPECT_THROW(codes->decoder(1, 16), std::logic_error);
  }
}

TEST(LoraCodes, AFinetuneOnCodesEndsOnTheMastersHashAndMetrics) {
  const m::ModelConfig cfg = m::preset("bitnet-tiny");
  std::vector<lockstep::data::SftExample> records(6);
  for (std::size_t r = 0; r < records.size(); ++r) {
    auto& ex = records[r];
    ex.tokens = tokens(20 + 3 * r, cfg.vocab_size, 100 + r);
    ex.scored.assign(ex.tokens.size(), 1);
    for (std::size_t i = 0; i < 5; ++i) ex.scored[i] = 0;  // a prompt
    ex.line = r + 1;
  }
  tr::FinetuneConfig c;
  c.lora = all_targets();
  c.lora.dropout = 0.05;
  c.lr = 5e-3;
  c.batch = 3;
  c.steps = 4;
  c.seed = 2;
  c.threads = 2;
  auto run = [&](bool codes, std::uint64_t& hash, std::size_t& base_bytes) {
    auto model = m::make_cpu_model(cfg);
    model->init(21);
    const fs::path dir = fs::temp_directory_path() / ("lockstep_lora_codes_" + std::to_string(codes) + "_" +
                                                      std::to_string(::getpid()));
    fs::remove_all(dir);
    c.base_as_codes = codes;
    const auto rep = tr::finetune(*model, records, c, dir.string());
    hash = rep.adapter_hash;
    base_bytes = 0;
    for (const m::Param& p : model->params())
      if (m::is_bitlinear_weight(cfg, p.name)) {
        EXPECT_EQ(p.dtype, codes ? t::DType::ternary2 : t::DType::f32) << p.name;
        base_bytes += m::bytes_held(p);
      }
    std::vector<std::string> lines;
    std::ifstream f(dir / "metrics.jsonl");
    for (std::string l; std::getline(f, l);) lines.push_back(l.substr(0, l.find(",\"tok_per_s\"")));
    fs::remove_all(dir);
    return lines;
  };
  std::uint64_t h_masters = 0, h_codes = 0;
  std::size_t b_masters = 0, b_codes = 0;
  const auto masters = run(false, h_masters, b_masters);
  const auto codes = run(true, h_codes, b_codes);
  ASSERT_EQ(masters.size(), 4u);
  EXPECT_EQ(masters, codes);  // step, loss, lr, grad_norm, tokens, scored_tokens
  EXPECT_EQ(h_masters, h_codes);
  std::printf("bitnet-tiny finetune, 4 steps: adapter %016llx on the codes, %016llx on the masters; the projections "
              "hold %zu bytes as codes, %zu as F32 masters\n",
              static_cast<unsigned long long>(h_codes), static_cast<unsigned long long>(h_masters), b_codes, b_masters);
  EXPECT_LT(16 * b_codes, b_masters + 16 * 64 * 28);
}

TEST(LoraCodes, OnlyAFrozenBitnetProjectionChanges) {
  {  // a BitNet being trained keeps its masters
    auto model = m::make_cpu_model(m::preset("bitnet-micro"));
    model->init(3);
    EXPECT_EQ(m::hold_frozen_ternary_as_codes(*model), 0u);
    for (const m::Param& p : model->params()) EXPECT_EQ(p.dtype, t::DType::f32) << p.name;
  }
  {  // a LLaMA base has no BitLinear weight
    auto model = m::make_cpu_model(m::preset("llama-micro"));
    model->init(3);
    m::add_lora_params(model->params(), model->config(), all_targets(), 4);
    EXPECT_EQ(m::hold_frozen_ternary_as_codes(*model), 0u);
  }
  {  // frozen BitNet: the projections only; the embedding and norms stay F32
    auto model = m::make_cpu_model(m::preset("bitnet-micro"));
    model->init(3);
    m::freeze(model->params());
    EXPECT_EQ(m::hold_frozen_ternary_as_codes(*model), 14u);
    for (const m::Param& p : model->params())
      EXPECT_EQ(p.dtype, m::is_bitlinear_weight(model->config(), p.name) ? t::DType::ternary2 : t::DType::f32) << p.name;
  }
  EXPECT_TRUE(m::is_bitlinear_weight(m::preset("bitnet-micro"), "model.layers.1.mlp.down_proj.weight"));
  EXPECT_FALSE(m::is_bitlinear_weight(m::preset("llama-micro"), "model.layers.1.mlp.down_proj.weight"));
  EXPECT_FALSE(m::is_bitlinear_weight(m::preset("bitnet-micro"), "model.embed_tokens.weight"));
}
