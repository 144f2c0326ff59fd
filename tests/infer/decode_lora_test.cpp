// The decode mode with LoRA adapters (model/decode.hpp's DecodeSession with
// the model's LoraRun; the branch of model/lora_branch.hpp at each adapted
// projection, over the decode kernels), on the CPU model, float (LLaMA) and
// ternary (BitNet) bases, adapters with random A and B put in through
// model::set_adapter:
//   * every position's logits, token by token (and from a chunked prefill),
//     are next_logits of the same prefix, bit for bit; for a float base also
//     the spec stand-in's (load/adapted_model.hpp: ops::LoraLinear::forward
//     itself, an independent computation of the branch);
//   * an adapter with B = 0 decodes the base model's bits;
//   * a sequence decoded alone = the same sequence among 7 others of other
//     lengths, with the adapter; 1 and 2 threads give the same bits.
#include <gtest/gtest.h>

#include <span>
#include <string>
#include <vector>

#include "decode_lora_util.hpp"
#include "lockstep/load/adapted_model.hpp"
#include "lockstep/load/model_file.hpp"

namespace {

using namespace lockstep;
using namespace lockstep::infer::testing;

class DecodeLora : public ::testing::TestWithParam<LoraCase> {
 protected:
  SplitMicroShapes split_;
};

TEST_P(DecodeLora, EveryPositionIsNextLogitsOfItsPrefix) {
  const LoraCase& c = GetParam();
  auto m = adapted_cpu_model(c, false);
  const std::size_t T = static_cast<std::size_t>(c.cfg.max_seq), V = static_cast<std::size_t>(c.cfg.vocab_size);
  const auto t = random_tokens(T, c.cfg.vocab_size, 7);
  const std::vector<float> tbt = token_by_token(*m, t, 2);
  ASSERT_EQ(tbt.size(), T * V);
  auto row = [&](std::size_t i) {
    return std::vector<float>(tbt.begin() + static_cast<std::ptrdiff_t>(i * V),
                              tbt.begin() + static_cast<std::ptrdiff_t>((i + 1) * V));
  };
  std::size_t differing = 0;
  for (std::size_t i = 0; i < T; ++i) differing += mt::differing_bits(m->next_logits(std::span(t).first(i + 1), 1), row(i));
  EXPECT_EQ(differing, 0u) << "token by token vs next_logits of every prefix";
  EXPECT_EQ(mt::differing_bits(prefill_all(*m, t, 1, 7), tbt), 0u) << "prefill in chunks of 7 vs token by token";
  // The adapter does something: the base's decode differs (so the comparisons above can fail).
  auto base = model::make_cpu_model(c.cfg);
  base_values(*base);
  EXPECT_GT(mt::differing_bits(token_by_token(*base, t, 2), tbt), T * V / 2) << "the adapter moves the logits";
  // A float base: ops::LoraLinear's specification (the spec stand-in) gives the same bits.
  if (c.cfg.family == model::Family::Bitnet) return;
  load::LoadedModel lm{c.cfg, base->params(), "test", {}};
  auto spec = load::make_spec_adapted_model(std::move(lm), random_adapter(c, m->params(), false, 0xada));
  for (std::size_t i : {std::size_t{0}, std::size_t{1}, T / 2, T - 1})
    EXPECT_EQ(mt::differing_bits(spec->next_logits(std::span(t).first(i + 1), 1), row(i)), 0u)
        << "position " << i << ": the spec stand-in's next_logits vs token by token";
}

TEST_P(DecodeLora, ZeroBDecodesTheBaseBits) {
  const LoraCase& c = GetParam();
  auto m = adapted_cpu_model(c, true);
  auto base = model::make_cpu_model(c.cfg);
  base_values(*base);
  const auto t = random_tokens(static_cast<std::size_t>(c.cfg.max_seq), c.cfg.vocab_size, 9);
  EXPECT_EQ(mt::differing_bits(token_by_token(*m, t, 2), token_by_token(*base, t, 2)), 0u) << "token by token";
  const Eight e = eight_sequences(c.cfg, 13);
  const auto got = batched(*m, e.seqs, e.prompt, 2), want = batched(*base, e.seqs, e.prompt, 2);
  for (std::size_t s = 0; s < e.seqs.size(); ++s)
    EXPECT_EQ(mt::differing_bits(got[s], want[s]), 0u) << "sequence " << s << " of 8 decoded together";
}

TEST_P(DecodeLora, AloneEqualsAmongSevenOthersOnAnyThreadCount) {
  const LoraCase& c = GetParam();
  auto m = adapted_cpu_model(c, false);
  const Eight e = eight_sequences(c.cfg, 11);
  const auto together = batched(*m, e.seqs, e.prompt, 2);
  const auto together1 = batched(*m, e.seqs, e.prompt, 1);
  for (std::size_t s = 0; s < e.seqs.size(); ++s) {
    const auto alone = batched(*m, {e.seqs[s]}, {e.prompt[s]}, 1);
    EXPECT_EQ(mt::differing_bits(together[s], alone[0]), 0u) << "sequence " << s << " among 7 others vs alone";
    EXPECT_EQ(mt::differing_bits(together[s], together1[s]), 0u) << "sequence " << s << ": 2 threads vs 1";
  }
  const auto t = e.seqs[0];
  EXPECT_EQ(mt::differing_bits(token_by_token(*m, t, 1), token_by_token(*m, t, 2)), 0u) << "token by token, 1 vs 2 threads";
}

INSTANTIATE_TEST_SUITE_P(Micro, DecodeLora, ::testing::ValuesIn(lora_cases()), lora_case_name);

// The session takes the model's run when it is made, without dropout: a
// training run's dropout never reaches a decode pass, and set_lora afterwards
// reaches the next session, not this one.
TEST(DecodeLoraRun, TheSessionTakesTheRunWhenMadeWithoutDropout) {
  const LoraCase c = lora_cases()[0];
  auto m = adapted_cpu_model(c, false);
  const auto t = random_tokens(12, c.cfg.vocab_size, 3);
  const std::vector<float> want = token_by_token(*m, t, 1);
  model::LoraRun run;
  run.scale = model::lora_scale(lora_config(c));
  run.dropout = 0.5;
  run.training = true;
  run.pass = 4;
  m->set_lora(run);
  EXPECT_EQ(mt::differing_bits(token_by_token(*m, t, 1), want), 0u) << "a training run decodes without dropout";
  auto d = m->decoder(1, 0);
  run.enabled = false;
  m->set_lora(run);
  EXPECT_EQ(mt::differing_bits(d->prefill(0, t, true, 1), want), 0u) << "the run at the session's making";
  auto base = model::make_cpu_model(c.cfg);
  base_values(*base);
  EXPECT_EQ(mt::differing_bits(token_by_token(*m, t, 1), token_by_token(*base, t, 1)), 0u)
      << "a disabled run: a new session decodes the base";
}

}  // namespace
