// LoRA in the model (model/lora_params.hpp, model/lora_branch.hpp):
//  * the adapter tensors' gradients through a whole small LLaMA and BitNet
//    model (the op specs in double, dropout on) against central finite
//    differences; frozen parameters receive nothing;
//  * the branch on the fast CPU kernels IS ops::LoraLinear's forward and
//    backward, bit for bit (no dropout);
//  * the CPU model with adapters = the float spec model with adapters, bit for bit;
//  * a disabled adapter, and a fresh one (B = 0), give the base logits bit for bit;
//  * PEFT's init (Kaiming-uniform bound 1/sqrt(in), B zero), and the
//    conversion to and from model::Adapter;
//  * a frozen base holds its values and nothing else: no gradient buffer in
//    Param, no discarded destination in the engine (counted in bytes).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "lockstep/backend/cpu/ops.hpp"
#include "lockstep/model/lora_params.hpp"
#include "lockstep/model/transformer.hpp"
#include "lockstep/ops/lora.hpp"
#include "model_test_util.hpp"

namespace m = lockstep::model;
namespace mt = lockstep::model::testing;
namespace ops = lockstep::ops;

namespace {

const std::vector<std::string> kAllTargets{"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};

// Adapter tensors for a model over any scalar, with random values (B not
// zero, so that every gradient term is exercised); the rest frozen.
template <class P>
void add_random_adapters(std::vector<P>& ps, const m::ModelConfig& cfg, std::size_t rank, std::uint64_t seed) {
  m::LoraConfig lc;
  lc.rank = rank;
  lc.targets = kAllTargets;
  lockstep::ad::Rng rng(seed);
  std::vector<P> added;
  for (const std::string& mod : m::lora_modules(cfg, lc)) {
    const P* base = nullptr;
    for (const P& p : ps)
      if (p.name == mod + ".weight") base = &p;
    ASSERT_NE(base, nullptr) << mod;
    P a, b;
    a.name = mod + ".lora_A.weight";
    a.shape = {static_cast<std::int64_t>(rank), base->shape[1]};
    b.name = mod + ".lora_B.weight";
    b.shape = {base->shape[0], static_cast<std::int64_t>(rank)};
    for (P* t : {&a, &b}) {
      const auto n = static_cast<std::size_t>(t->shape[0] * t->shape[1]);
      t->value.resize(n);
      t->grad.assign(n, 0);
      using T = std::decay_t<decltype(t->value[0])>;
      for (auto& v : t->value) v = static_cast<T>(0.3 * rng.normal());
    }
    added.push_back(a);
    added.push_back(b);
  }
  for (P& p : ps) p.trainable = false;
  for (P& p : added) ps.push_back(p);
}

TEST(Lora, AdapterGradientsMatchFiniteDifferencesThroughWholeModels) {
  constexpr double kStep = 1e-6, kRtol = 1e-6;
  for (const char* name : {"llama-micro", "bitnet-micro"}) {
    const m::ModelConfig cfg = m::preset(name);
    m::SpecModel<double> model(cfg);
    mt::randomize(model.params(), 0x5EED, 0.3);
    add_random_adapters(model.params(), cfg, 3, 0x51);
    m::LoraRun run;
    run.scale = 16.0 / 3.0;
    run.dropout = 0.25;  // a fixed mask at this pass: finite differences see the same function
    run.training = true;
    run.seed = 7;
    run.pass = 11;
    model.engine().lora = &run;
    const std::size_t B = 2, S = 5;
    const auto b = mt::random_batch(B, S, cfg.vocab_size, 0x52, true);
    model.kernels().quant = m::SpecKernels<double>::Quant::Record;
    const double l0 = model.run(b.ids, b.targets, B, S, true);
    model.kernels().quant = m::SpecKernels<double>::Quant::Surrogate;
    const double noise = 64.0 * 0x1p-53 * std::fabs(l0) / kStep;
    lockstep::ad::Rng rng(0x53);
    std::size_t checked = 0;
    for (auto& p : model.params()) {
      if (!p.trainable) {
        for (double g : p.grad) ASSERT_EQ(g, 0.0) << name << " frozen " << p.name << " received a gradient";
        continue;
      }
      const std::vector<double> g = p.grad;
      double scale = 0.0;
      for (double v : g) scale = std::max(scale, std::fabs(v));
      EXPECT_GT(scale, 0.0) << name << " " << p.name;
      double max_abs = 0.0;
      for (int c = 0; c < 3; ++c) {
        const std::size_t e = rng.below(p.value.size());
        const double x = p.value[e], h = kStep * std::max(1.0, std::fabs(x));
        p.value[e] = x + h;
        const double xp = p.value[e], lp = model.run(b.ids, b.targets, B, S, false);
        p.value[e] = x - h;
        const double xn = p.value[e], ln = model.run(b.ids, b.targets, B, S, false);
        p.value[e] = x;
        max_abs = std::max(max_abs, std::fabs((lp - ln) / (xp - xn) - g[e]));
        ++checked;
      }
      EXPECT_LE(max_abs, std::max(kRtol * scale, noise)) << name << " " << p.name << " scale " << scale;
    }
    EXPECT_EQ(checked, 3u * 2u * 7u * static_cast<std::size_t>(cfg.n_layer)) << name;
    std::printf("%s: %zu adapter gradient coordinates checked (loss %.6f, dropout 0.25)\n", name, checked, l0);
    model.kernels().quant = m::SpecKernels<double>::Quant::Forward;
  }
}

// A minimal engine for the branch: the CPU kernels and four parameters.
struct BranchEngine {
  lockstep::cpu::OpKernels k_;
  std::vector<std::vector<float>> v, g;
  const float* P(std::size_t i) const { return v[i].data(); }
  float* G(std::size_t i) { return g[i].data(); }
};

TEST(Lora, TheBranchOnTheCpuKernelsIsLoraLinearBitForBit) {
  for (const auto& c : std::vector<ops::LoraLinear::Config>{{7, 33, 19, 4, 16.0, false}, {64, 96, 80, 8, 6.0, false}}) {
    lockstep::ad::Rng rng(c.rows * 31 + c.in);
    auto in = ops::cast_fields<ops::LoraLinear::Inputs, float>(ops::LoraLinear::sample(c, rng));
    const auto want = ops::LoraLinear::forward<float>(c, in);
    ops::LoraLinear::Outputs<float> dout{lockstep::Tensor<float>({c.rows, c.out}), {}};
    for (auto& x : dout.y.data) x = static_cast<float>(rng.normal());
    const auto want_g = ops::LoraLinear::backward<float>(c, in, want, dout);

    BranchEngine e;
    e.k_.threads = 2;
    e.v = {in.w.data, in.lora_a.data, in.lora_b.data};
    e.g = {{}, std::vector<float>(in.lora_a.data.size()), std::vector<float>(in.lora_b.data.size())};
    m::LoraRun run;
    run.scale = c.alpha / static_cast<double>(c.rank);
    std::vector<m::Param> names(3);
    names[0].name = "x.weight";
    names[1].name = "x.lora_A.weight";
    names[1].shape = {static_cast<std::int64_t>(c.rank), static_cast<std::int64_t>(c.in)};
    names[2].name = "x.lora_B.weight";
    m::LoraBranch<float> br;
    br.prepare(names, &run);
    auto* slot = br.slot_for(e, e.P(0));
    ASSERT_NE(slot, nullptr);
    std::vector<float> y(c.rows * c.out), dx(c.rows * c.in);
    e.k_.forward<ops::Linear>({c.rows, c.in, c.out, false}, {.x = in.x.ptr(), .w = e.P(0), .b = nullptr, .y = y.data()});
    br.forward(e, *slot, c.rows, c.in, c.out, in.x.ptr(), y.data());
    EXPECT_EQ(mt::differing_bits(y, want.y.data), 0u) << "forward";
    e.k_.backward<ops::Linear>({c.rows, c.in, c.out, false}, {.x = in.x.ptr(), .w = e.P(0), .dy = dout.y.ptr(),
                                                              .dx = dx.data(), .dw = nullptr, .db = nullptr});
    br.backward(e, *slot, c.rows, c.in, c.out, in.x.ptr(), dout.y.ptr(), dx.data());
    EXPECT_EQ(mt::differing_bits(dx, want_g.x.data), 0u) << "dx";
    EXPECT_EQ(mt::differing_bits(e.g[1], want_g.lora_a.data), 0u) << "dA";
    EXPECT_EQ(mt::differing_bits(e.g[2], want_g.lora_b.data), 0u) << "dB";
  }
}

TEST(Lora, CpuModelWithAdaptersIsTheFloatSpecModelBitForBit) {
  for (const char* name : {"llama-micro", "bitnet-micro"}) {
    const m::ModelConfig cfg = m::preset(name);
    m::SpecModel<float> spec(cfg);
    mt::randomize(spec.params(), 0x61, 0.3);
    add_random_adapters(spec.params(), cfg, 4, 0x62);
    auto cpu = m::make_cpu_model(cfg);
    mt::randomize(cpu->params(), 0x61, 0.3);
    add_random_adapters(cpu->params(), cfg, 4, 0x62);
    m::LoraRun run;
    run.scale = 2.0;
    run.dropout = 0.1;
    run.training = true;
    run.seed = 3;
    run.pass = 5;
    spec.engine().lora = &run;
    cpu->set_lora(run);
    const auto b = mt::random_batch(2, 9, cfg.vocab_size, 0x63, true);
    const float ls = spec.run(b.ids, b.targets, 2, 9, true);
    const float lc = cpu->forward_backward(b.ids, b.targets, 2, 9, false, 2);
    EXPECT_EQ(lockstep::num::bits_of(ls), lockstep::num::bits_of(lc)) << name;
    for (std::size_t i = 0; i < spec.params().size(); ++i) {
      if (!spec.params()[i].trainable) continue;
      EXPECT_EQ(mt::differing_bits(spec.params()[i].grad, cpu->params()[i].grad), 0u) << name << " " << spec.params()[i].name;
    }
  }
}

TEST(Lora, DisabledOrFreshAdapterGivesTheBaseLogitsBitForBit) {
  for (const char* name : {"llama-micro", "bitnet-micro"}) {
    const m::ModelConfig cfg = m::preset(name);
    auto base = m::make_cpu_model(cfg);
    base->init(9);
    const std::vector<std::int32_t> toks{1, 5, 9, 2, 7, 3};
    const auto want = base->next_logits(toks, 1);
    auto adapted = m::make_cpu_model(cfg);
    adapted->init(9);
    m::LoraConfig lc;
    lc.targets = kAllTargets;
    m::add_lora_params(adapted->params(), cfg, lc, 4);
    m::LoraRun run;
    run.scale = m::lora_scale(lc);
    adapted->set_lora(run);
    EXPECT_EQ(mt::differing_bits(adapted->next_logits(toks, 1), want), 0u) << name << ": B = 0";
    for (auto& p : adapted->params())
      if (m::is_lora_param(p.name))
        for (float& v : p.value) v = 0.5f;
    const auto moved = adapted->next_logits(toks, 1);
    EXPECT_GT(mt::differing_bits(moved, want), 0u) << name << ": a non-zero adapter changes the logits";
    run.enabled = false;
    adapted->set_lora(run);
    EXPECT_EQ(mt::differing_bits(adapted->next_logits(toks, 1), want), 0u) << name << ": disabled";
  }
}

// What a model with a frozen base and adapters holds, counted: the base's
// values, and for each adapter tensor its value and its gradient (AdamW's
// moments are the trainer's: finetune_test counts those). The engine holds
// for gradients only the discarded destinations of the frozen vectors (norm
// weights: their kernels always write dw), plus the adapters' accumulation
// buffers when accumulating; the frozen matrices' dW is never computed.
TEST(Lora, AFrozenBaseHoldsItsValuesOnly) {
  for (const char* name : {"llama-micro", "bitnet-micro"}) {
    const m::ModelConfig cfg = m::preset(name);
    std::vector<m::Param> ps = m::make_float_params(cfg);
    mt::randomize(ps, 0x71, 0.3);
    std::size_t base = 0, frozen_vectors = 0;
    for (const auto& p : ps) {
      base += p.value.size();
      if (p.shape.size() == 1) frozen_vectors += p.value.size();
    }
    m::LoraConfig lc;
    lc.targets = kAllTargets;
    lc.rank = 4;
    m::add_lora_params(ps, cfg, lc, 3);
    std::size_t adapters = 0, held = 0;
    for (const auto& p : ps) {
      held += m::bytes_held(p);
      if (m::is_lora_param(p.name)) adapters += p.value.size();
      else EXPECT_EQ(p.grad.capacity(), 0u) << name << " frozen " << p.name << " holds a gradient buffer";
    }
    ASSERT_GT(adapters, 0u);
    EXPECT_EQ(held, (base + 2 * adapters) * sizeof(float)) << name << ": weights + adapter values and gradients";
    EXPECT_NO_THROW(m::require_f32_params(ps, "the test")) << name << ": a frozen F32 parameter without a gradient is valid";

    lockstep::cpu::OpKernels k;
    k.threads = 2;
    m::Engine<float, lockstep::cpu::OpKernels, m::Param> e(cfg, ps, k);
    m::LoraRun run;
    run.scale = 2.0;
    run.training = true;
    e.lora = &run;
    const auto b = mt::random_batch(2, 7, cfg.vocab_size, 0x72, true);
    e.run(b.ids.data(), b.targets.data(), 2, 7, true, false);
    EXPECT_EQ(e.grad_scratch_bytes(), frozen_vectors * sizeof(float)) << name << ": the engine's gradient buffers";
    e.run(b.ids.data(), b.targets.data(), 2, 7, true, true);
    EXPECT_EQ(e.grad_scratch_bytes(), (frozen_vectors + adapters) * sizeof(float))
        << name << ": accumulating adds the adapters' buffers only";
    std::size_t after = 0;
    for (const auto& p : ps) after += m::bytes_held(p);
    EXPECT_EQ(after, held) << name << ": a pass allocates no gradient in Param";
  }
}

TEST(Lora, PeftInitAndAdapterRoundTrip) {
  const m::ModelConfig cfg = m::preset("llama-micro");
  std::vector<m::Param> ps = m::make_float_params(cfg);
  m::LoraConfig lc;  // q_proj, v_proj, r 8
  m::add_lora_params(ps, cfg, lc, 1);
  std::size_t adapters = 0;
  for (const auto& p : ps) {
    if (!m::is_lora_param(p.name)) {
      EXPECT_FALSE(p.trainable) << p.name;
      continue;
    }
    ++adapters;
    EXPECT_TRUE(p.trainable);
    if (p.name.find("lora_B") != std::string::npos) {
      for (float v : p.value) EXPECT_EQ(lockstep::num::bits_of(v), 0u) << p.name;
    } else {
      const float bound = static_cast<float>(1.0 / std::sqrt(static_cast<double>(p.shape[1])));
      float mx = 0;
      for (float v : p.value) {
        EXPECT_LE(std::fabs(v), bound) << p.name;
        mx = std::max(mx, std::fabs(v));
      }
      EXPECT_GT(mx, 0.8f * bound) << p.name << " looks not uniform on the bound";
    }
  }
  EXPECT_EQ(adapters, 2u * 2u * static_cast<std::size_t>(cfg.n_layer));
  EXPECT_THROW(m::add_lora_params(ps, cfg, lc, 1), std::invalid_argument);
  m::Adapter ad = m::adapter_of(ps, lc);
  ASSERT_EQ(ad.tensors.size(), 2u * static_cast<std::size_t>(cfg.n_layer));
  EXPECT_EQ(ad.tensors[0].module, "model.layers.0.self_attn.q_proj");
  EXPECT_EQ(ad.tensors[1].module, "model.layers.0.self_attn.v_proj");
  for (auto& t : ad.tensors) t.b.assign(t.b.size(), 0.25f);
  m::set_adapter(ps, ad);
  EXPECT_EQ(m::adapter_of(ps, lc).tensors[1].b[0], 0.25f);
  ad.tensors[0].a.pop_back();
  EXPECT_THROW(m::set_adapter(ps, ad), std::invalid_argument);
  m::LoraConfig bad;
  bad.targets = {"c_attn"};
  EXPECT_THROW(m::lora_modules(cfg, bad), std::invalid_argument);
}

}  // namespace
