// The int8 units linear mode in the model (ModelConfig::linear, docs/UNITS.md):
// the fast CPU model in units mode (forward units; unit backward; LM head
// through units) computes exactly the float composition of the op specs —
// the loss and every gradient equal Engine<float, SpecKernels<float>>'s bit
// for bit, 1/2/5 threads — and the mode is really applied (it changes the
// loss, and each option changes the gradients), saved in config.json and
// refused where it does not apply.
#include <gtest/gtest.h>

#include <cstdio>
#include <stdexcept>
#include <string>

#include "lockstep/backend/cpu/ops.hpp"
#include "lockstep/model/config.hpp"
#include "lockstep/model/model.hpp"
#include "lockstep/model/transformer.hpp"
#include "model_test_util.hpp"

namespace m = lockstep::model;
namespace mt = lockstep::model::testing;
using lockstep::num::bits_of;

namespace {

struct SplitSmallWork : ::testing::Environment {
  void SetUp() override { lockstep::cpu::set_min_parallel_work(256); }
};
const auto* const kSplit = ::testing::AddGlobalTestEnvironment(new SplitSmallWork);

m::ModelConfig units(const std::string& preset, bool unit_backward, bool head) {
  m::ModelConfig c = m::preset(preset);
  c.linear = m::LinearMode::Units;
  c.unit_backward = unit_backward;
  c.units_head = head;
  return c;
}

std::vector<mt::NamedConfig> unit_configs() {
  std::vector<mt::NamedConfig> v;
  for (const char* p : {"gpt2-micro", "llama-micro"}) {
    v.push_back({std::string(p) + "/units", units(p, false, false)});
    v.push_back({std::string(p) + "/units,unit-backward", units(p, true, false)});
    v.push_back({std::string(p) + "/units,unit-backward,head", units(p, true, true)});
  }
  m::ModelConfig u = units("llama-micro", true, true);
  u.tie_embeddings = true;  // the tied head's gradient: the unit LM head's dW plus the embedding's
  v.push_back({"llama-micro/units,unit-backward,head,tied", u});
  return v;
}

// Loss and gradients of one config on the fast CPU model with given values.
struct Pass {
  float loss;
  std::vector<std::vector<float>> grads;
};
Pass cpu_pass(const m::ModelConfig& cfg, const std::vector<m::Param>& values, const mt::Batch& b, std::size_t batch,
              std::size_t seq, int threads) {
  auto model = m::make_cpu_model(cfg);
  for (std::size_t i = 0; i < values.size(); ++i) model->params()[i].value = values[i].value;
  Pass p;
  p.loss = model->forward_backward(b.ids, b.targets, static_cast<std::int64_t>(batch), static_cast<std::int64_t>(seq),
                                   false, threads);
  for (const auto& q : model->params()) p.grads.push_back(q.grad);
  return p;
}

}  // namespace

TEST(UnitsModel, CpuModelEqualsTheFloatSpecCompositionBitForBit) {
  const std::uint64_t seed = lockstep::ad::seed_from_env();
  std::printf("seed %llu (LOCKSTEP_SEED reproduces)\n", static_cast<unsigned long long>(seed));
  for (const auto& nc : unit_configs()) {
    const std::size_t B = 2, S = 13;
    m::SpecModel<float> spec(nc.cfg);
    mt::randomize(spec.params(), seed ^ 0x61, 0.2);
    const auto b = mt::random_batch(B, S, nc.cfg.vocab_size, seed ^ 0x62, true);
    const float want = spec.run(b.ids, b.targets, B, S, true);
    for (int threads : {1, 2, 5}) {
      auto fast = m::make_cpu_model(nc.cfg);
      mt::copy_values(spec.params(), fast->params());
      const float got = fast->forward_backward(b.ids, b.targets, B, S, false, threads);
      std::size_t cells = 0, differ = 0;
      for (std::size_t i = 0; i < spec.params().size(); ++i) {
        const std::size_t d = mt::differing_bits(fast->params()[i].grad, spec.params()[i].grad);
        cells += spec.params()[i].grad.size();
        differ += d;
        if (d) ADD_FAILURE() << nc.name << " threads " << threads << ": " << d << " cells of d" << spec.params()[i].name;
      }
      std::printf("%-44s threads %d: loss %.9g (spec %.9g) %s; %zu gradient cells, %zu differ\n", nc.name.c_str(),
                  threads, static_cast<double>(got), static_cast<double>(want),
                  bits_of(got) == bits_of(want) ? "bit-equal" : "DIFFERENT", cells, differ);
      EXPECT_EQ(bits_of(got), bits_of(want)) << nc.name;
      EXPECT_EQ(differ, 0u);
      const float l = fast->loss(b.ids, b.targets, B, S, threads);
      EXPECT_EQ(bits_of(l), bits_of(want)) << nc.name << ": loss-only pass";
    }
  }
}

// The mode is applied, and each option where it says: units change the loss;
// the unit backward changes the gradients but not the loss; the LM head option
// changes the loss (its forward) and, with the unit backward, the head's
// gradient. The float mode is the plain float model.
TEST(UnitsModel, EachOptionChangesWhatItShould) {
  for (const char* preset : {"gpt2-micro", "llama-micro"}) {
    const m::ModelConfig f = m::preset(preset);
    auto base = m::make_cpu_model(f);
    base->init(7);
    const std::vector<m::Param> values = base->params();
    const auto b = mt::random_batch(2, 16, f.vocab_size, 99);
    const Pass fl = cpu_pass(f, values, b, 2, 16, 2);
    const Pass u = cpu_pass(units(preset, false, false), values, b, 2, 16, 2);
    const Pass ub = cpu_pass(units(preset, true, false), values, b, 2, 16, 2);
    const Pass uh = cpu_pass(units(preset, true, true), values, b, 2, 16, 2);
    auto grads_differ = [](const Pass& a, const Pass& c) {
      std::size_t d = 0;
      for (std::size_t i = 0; i < a.grads.size(); ++i) d += mt::differing_bits(a.grads[i], c.grads[i]);
      return d;
    };
    std::printf("%s: loss float %.9g, units %.9g, unit backward %.9g, + head %.9g; gradient cells differing from "
                "units: unit backward %zu, + head %zu\n",
                preset, static_cast<double>(fl.loss), static_cast<double>(u.loss), static_cast<double>(ub.loss),
                static_cast<double>(uh.loss), grads_differ(u, ub), grads_differ(ub, uh));
    EXPECT_NE(bits_of(fl.loss), bits_of(u.loss)) << preset << ": --linear units did not change the forward";
    EXPECT_EQ(bits_of(u.loss), bits_of(ub.loss)) << preset << ": the unit backward changed the forward";
    EXPECT_GT(grads_differ(u, ub), 0u) << preset << ": the unit backward changed no gradient";
    EXPECT_NE(bits_of(ub.loss), bits_of(uh.loss)) << preset << ": --units-head did not change the LM head";
  }
}

TEST(UnitsModel, TheModeIsSavedInConfigJsonAndRefusedWhereItDoesNotApply) {
  m::ModelConfig c = units("gpt2-micro", true, true);
  c.vocab_size = 300;
  const std::string j = m::to_hf_config_json(c);
  EXPECT_NE(j.find("\"lockstep_linear\": \"units\""), std::string::npos) << j;
  const m::ModelConfig r = m::from_hf_config_json(j);
  EXPECT_EQ(r.linear, m::LinearMode::Units);
  EXPECT_TRUE(r.unit_backward);
  EXPECT_TRUE(r.units_head);
  EXPECT_NE(r.summary().find("int8 units linear + unit backward + LM head"), std::string::npos) << r.summary();
  // The float model's config.json has no such key (unchanged from before the units).
  m::ModelConfig f = m::preset("gpt2-micro");
  EXPECT_EQ(m::to_hf_config_json(f).find("lockstep_linear"), std::string::npos);
  EXPECT_EQ(m::from_hf_config_json(m::to_hf_config_json(f)).linear, m::LinearMode::Float);

  auto refused = [](m::ModelConfig bad, const std::string& words) {
    try {
      bad.validate();
      ADD_FAILURE() << "accepted; expected: " << words;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  m::ModelConfig ub = m::preset("gpt2-micro");
  ub.unit_backward = true;
  refused(ub, "unit_backward needs the units linear mode");
  m::ModelConfig uh = m::preset("llama-micro");
  uh.units_head = true;
  refused(uh, "units_head needs the units linear mode");
  m::ModelConfig bn = m::preset("bitnet-micro");
  bn.linear = m::LinearMode::Units;
  refused(bn, "bitnet's projections are BitLinear");
  EXPECT_THROW(m::from_hf_config_json(std::string(j).replace(j.find("\"units\""), 7, "\"int4\"")), std::runtime_error);
}
