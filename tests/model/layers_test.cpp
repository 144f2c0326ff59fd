// The layer op lists (src/lockstep/model/layers.hpp): per layer kind, the
// forward ops, the backward ops and how many forward ops have no backward
// (0: a layer with a missing one does not compile — tests/completeness/). And
// the model really runs the lists: a traced pass of every family executes
// exactly the stem, each block and the head's forward lists in order, then
// the backward lists in order (last block first).
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "lockstep/model/layers.hpp"
#include "lockstep/model/transformer.hpp"
#include "model_test_util.hpp"

namespace m = lockstep::model;
namespace mt = lockstep::model::testing;

namespace {

template <class L>
std::size_t count_missing() {
  // Recount from the printed names (independent of Layer::missing).
  const auto f = m::forward_step_names<L>();
  const auto b = m::backward_step_names<L>();
  std::size_t missing = 0;
  for (const auto& s : f) missing += std::find(b.begin(), b.end(), s) == b.end();
  return missing;
}

template <class L>
void print_layer(const char* kind) {
  const auto f = m::forward_step_names<L>();
  const auto b = m::backward_step_names<L>();
  std::printf("%-13s forward ops %2zu:", kind, f.size());
  for (const auto& s : f) std::printf(" %s", s.c_str());
  std::printf("\n%-13s backward ops %zu:", "", b.size());
  for (const auto& s : b) std::printf(" %s", s.c_str());
  std::printf("\n%-13s missing %zu\n", "", count_missing<L>());
  EXPECT_EQ(count_missing<L>(), 0u) << kind;
  EXPECT_EQ(L::missing, 0u) << kind;
  EXPECT_EQ(f.size(), b.size()) << kind;
  EXPECT_TRUE(std::equal(f.begin(), f.end(), b.rbegin())) << kind << ": backward is not the reverse";
}

std::vector<std::string> expected_trace(const m::ModelConfig& c) {
  std::vector<std::string> stem_f, block_f, head_f, stem_b, block_b, head_b;
  switch (c.family) {
    case m::Family::Gpt2:
      stem_f = m::forward_step_names<m::gpt2::Stem>(), stem_b = m::backward_step_names<m::gpt2::Stem>();
      block_f = m::forward_step_names<m::gpt2::Block>(), block_b = m::backward_step_names<m::gpt2::Block>();
      head_f = m::forward_step_names<m::gpt2::Head>(), head_b = m::backward_step_names<m::gpt2::Head>();
      break;
    case m::Family::Llama:
      stem_f = m::forward_step_names<m::llama::Stem>(), stem_b = m::backward_step_names<m::llama::Stem>();
      block_f = m::forward_step_names<m::llama::Block>(), block_b = m::backward_step_names<m::llama::Block>();
      head_f = m::forward_step_names<m::llama::Head>(), head_b = m::backward_step_names<m::llama::Head>();
      break;
    case m::Family::Bitnet:
      stem_f = m::forward_step_names<m::bitnet::Stem>(), stem_b = m::backward_step_names<m::bitnet::Stem>();
      block_f = m::forward_step_names<m::bitnet::Block>(), block_b = m::backward_step_names<m::bitnet::Block>();
      head_f = m::forward_step_names<m::bitnet::Head>(), head_b = m::backward_step_names<m::bitnet::Head>();
      break;
  }
  std::vector<std::string> t;
  for (const auto& s : stem_f) t.push_back("forward stem " + s);
  for (std::int64_t l = 0; l < c.n_layer; ++l)
    for (const auto& s : block_f) t.push_back("forward block " + std::to_string(l) + " " + s);
  for (const auto& s : head_f) t.push_back("forward head " + s);
  for (const auto& s : head_b) t.push_back("backward head " + s);
  for (std::int64_t l = c.n_layer - 1; l >= 0; --l)
    for (const auto& s : block_b) t.push_back("backward block " + std::to_string(l) + " " + s);
  for (const auto& s : stem_b) t.push_back("backward stem " + s);
  return t;
}

}  // namespace

TEST(Layers, EveryLayerKindListsItsForwardAndBackwardOps) {
  print_layer<m::gpt2::Block>("GPT block");
  print_layer<m::llama::Block>("LLaMA block");
  print_layer<m::bitnet::Block>("BitNet block");
  print_layer<m::gpt2::Stem>("GPT stem");
  print_layer<m::gpt2::Head>("GPT head");
  print_layer<m::llama::Stem>("LLaMA stem");
  print_layer<m::llama::Head>("LLaMA head");
  print_layer<m::bitnet::Stem>("BitNet stem");
  print_layer<m::bitnet::Head>("BitNet head");
  // The family-specific ops sit where the families differ.
  const auto bit = m::forward_step_names<m::bitnet::Block>();
  EXPECT_NE(std::find(bit.begin(), bit.end(), "self_attn.q_proj:bitlinear"), bit.end());
  EXPECT_NE(std::find(bit.begin(), bit.end(), "self_attn.attn_sub_norm:rmsnorm"), bit.end());
  EXPECT_NE(std::find(bit.begin(), bit.end(), "mlp.act:relu2_mul"), bit.end());
  const auto ll = m::forward_step_names<m::llama::Block>();
  EXPECT_NE(std::find(ll.begin(), ll.end(), "mlp.act:swiglu"), ll.end());
}

TEST(Layers, TheModelRunsExactlyTheListsInOrder) {
  for (const auto& nc : mt::micro_configs(false)) {
    m::ModelConfig c = nc.cfg;
    c.n_layer = 3;
    m::SpecModel<float> model(c);
    mt::randomize(model.params(), 5, 0.1);
    m::Trace trace;
    model.engine().trace = &trace;
    const auto b = mt::random_batch(1, 3, c.vocab_size, 6);
    model.run(b.ids, b.targets, 1, 3, true);
    const auto want = expected_trace(c);
    std::printf("%-14s traced %zu steps (forward + backward, %lld layers), expected %zu\n", nc.name.c_str(),
                trace.size(), static_cast<long long>(c.n_layer), want.size());
    EXPECT_EQ(trace, want) << nc.name;
    // A loss-only pass runs the forward lists only.
    trace.clear();
    model.run(b.ids, b.targets, 1, 3, false);
    const std::size_t forward_steps = static_cast<std::size_t>(
        std::count_if(want.begin(), want.end(), [](const std::string& s) { return s.rfind("forward", 0) == 0; }));
    EXPECT_EQ(trace.size(), forward_steps) << nc.name;
  }
}
