// Generation over the decode mode (infer/generate.hpp) and the sampler's
// repetition penalty (infer/sample.hpp): reproducible for a seed, a request's
// tokens independent of the requests generated with it and of the thread
// count, equal to sampling the window recompute's logits token by token, the
// stops (ids, max_tokens, a full context), and the penalty's expression.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <string>

#include "decode_util.hpp"
#include "lockstep/backend/cpu/ops.hpp"
#include "lockstep/infer/generate.hpp"
#include "lockstep/infer/sample.hpp"

namespace {

using namespace lockstep;
using namespace lockstep::infer;
using namespace lockstep::infer::testing;

std::unique_ptr<model::Model> micro(const char* preset) {
  auto m = model::make_cpu_model(model::preset(preset));
  mt::randomize(m->params(), 0x9e4e, 0.3);
  return m;
}

GenerateOptions options() {
  GenerateOptions o;
  o.sampling.temperature = 0.9f;
  o.sampling.top_k = 20;
  o.sampling.top_p = 0.9f;
  o.sampling.repetition_penalty = 1.3f;
  o.sampling.repeat_last_n = 16;
  o.max_tokens = 40;
  o.threads = 2;
  return o;
}

// The reference: the window recompute (Model::next_logits over every token
// so far) sampled token by token with the same draws — no cache at all.
std::vector<std::int32_t> by_recompute(model::Model& m, const Request& r, const GenerateOptions& o) {
  std::vector<std::int32_t> ctx = r.prompt, out;
  SamplingOptions so = o.sampling;
  so.seed = r.seed;
  for (std::int64_t i = 0; i < o.max_tokens && ctx.size() < static_cast<std::size_t>(m.config().max_seq) + 1; ++i) {
    if (ctx.size() > static_cast<std::size_t>(m.config().max_seq)) break;
    const std::vector<float> l = m.next_logits(ctx, 1);
    const std::int32_t id = sample(l, so, static_cast<std::uint64_t>(i), ctx);
    out.push_back(id);
    ctx.push_back(id);
  }
  return out;
}

TEST(Generate, TokensEqualTheWindowRecomputeAndDoNotDependOnTheBatchOrThreads) {
  for (const char* p : {"gpt2-micro", "llama-micro", "bitnet-micro"}) {
    auto m = micro(p);
    const auto& cfg = m->config();
    std::vector<Request> reqs;
    for (std::size_t r = 0; r < 8; ++r)
      reqs.push_back({random_tokens(1 + (r * 7) % 20, cfg.vocab_size, 100 + r), 1000 + r});
    GenerateOptions o = options();
    const auto together = generate_tokens(*m, reqs, o, {});
    o.threads = 1;
    const auto together1 = generate_tokens(*m, reqs, o, {});
    for (std::size_t r = 0; r < reqs.size(); ++r) {
      const auto alone = generate_tokens(*m, {reqs[r]}, o, {});
      EXPECT_EQ(together[r].tokens, alone[0].tokens) << p << " request " << r << ": among 7 others vs alone";
      EXPECT_EQ(together[r].tokens, together1[r].tokens) << p << " request " << r << ": 2 threads vs 1";
      EXPECT_EQ(together[r].tokens.size(), 40u);
      EXPECT_EQ(together[r].reason, StopReason::max_tokens);
      EXPECT_EQ(together[r].tokens, by_recompute(*m, reqs[r], o)) << p << " request " << r << ": vs recompute";
    }
    // Another seed, other tokens (the draws are the seed's).
    Request other = reqs[3];
    other.seed += 1;
    EXPECT_NE(generate_tokens(*m, {other}, o, {})[0].tokens, together[3].tokens) << p;
  }
}

TEST(Generate, StopsAtAStopIdAtMaxTokensAndAtAFullContext) {
  auto m = micro("llama-micro");
  GenerateOptions o = options();
  o.sampling.temperature = 0.0f;  // greedy: the tokens are known in advance
  const Request r{random_tokens(5, m->config().vocab_size, 9), 1};
  const auto free = generate_tokens(*m, {r}, o, {})[0];
  ASSERT_EQ(free.tokens.size(), 40u);
  // Stop at the id of the 6th token (its first occurrence).
  const std::int32_t stop = free.tokens[5];
  const auto first = static_cast<std::size_t>(std::find(free.tokens.begin(), free.tokens.end(), stop) - free.tokens.begin());
  const auto stopped = generate_tokens(*m, {r}, o, {stop})[0];
  EXPECT_EQ(stopped.reason, StopReason::stop_id);
  EXPECT_EQ(stopped.tokens, std::vector<std::int32_t>(free.tokens.begin(), free.tokens.begin() + first + 1));
  o.stop_ids = {stop};  // the same through the options
  EXPECT_EQ(generate_tokens(*m, {r}, o, {})[0].tokens, stopped.tokens);
  o.stop_ids.clear();
  // A context of 12: 5 prompt tokens and 7 generated ones fill it; an 8th is
  // sampled from position 11's logits (it has no position of its own).
  o.context = 12;
  const auto full = generate_tokens(*m, {r}, o, {})[0];
  EXPECT_EQ(full.reason, StopReason::context_full);
  EXPECT_EQ(full.tokens, std::vector<std::int32_t>(free.tokens.begin(), free.tokens.begin() + 8));
  // A prompt longer than the context is refused before any pass.
  const Request long_prompt{random_tokens(13, m->config().vocab_size, 9), 1};
  EXPECT_THROW(generate_tokens(*m, {long_prompt}, o, {}), std::length_error);
  o.context = m->config().max_seq + 1;
  EXPECT_THROW(generate_tokens(*m, {r}, o, {}), std::invalid_argument);
  o.context = -1;
  EXPECT_THROW(o.validate(), std::invalid_argument);
}

// What chat does between turns: keep the cache's shared prefix (truncate),
// prefill the rest, generate — the same tokens as a fresh session given the
// whole conversation at once.
TEST(Generate, AKeptCachePrefixGivesAFreshSessionsTokens) {
  auto m = micro("llama-micro");
  GenerateOptions o = options();
  const auto turn1 = random_tokens(9, m->config().vocab_size, 21);
  auto kept = m->decoder(1, 0);
  const Generated first = generate_in(*kept, 0, turn1, {}, 5, o, {});
  ASSERT_EQ(kept->length(0), turn1.size() + first.tokens.size() - 1);
  // The next turn shares the first 12 tokens of what the cache holds, then differs.
  std::vector<std::int32_t> held = turn1;
  held.insert(held.end(), first.tokens.begin(), first.tokens.end() - 1);
  std::vector<std::int32_t> full(held.begin(), held.begin() + 12);
  const auto more = random_tokens(6, m->config().vocab_size, 22);
  full.insert(full.end(), more.begin(), more.end());
  kept->truncate(0, 12);
  const Generated reused = generate_in(*kept, 0, std::span<const std::int32_t>(full).subspan(12),
                                       std::span<const std::int32_t>(full).first(12), 6, o, {});
  auto fresh = m->decoder(1, 0);
  const Generated again = generate_in(*fresh, 0, full, {}, 6, o, {});
  EXPECT_EQ(reused.tokens, again.tokens);
  EXPECT_THROW(kept->truncate(0, kept->length(0) + 1), std::out_of_range);
}

TEST(RepetitionPenalty, DividesPositiveAndMultipliesNegativeLogitsOfRecentIdsOnce) {
  std::vector<float> l{2.0f, -1.0f, 0.5f, 3.0f, -0.0f};
  // History: ids 0, 1, 0 (id 0 twice: penalized once), 4; id 3 only outside the last 4.
  const std::vector<std::int32_t> h{3, 0, 1, 0, 4, 99, -1};
  apply_repetition_penalty(l, h, 2.0f, 6);
  EXPECT_EQ(l[0], 1.0f);
  EXPECT_EQ(l[1], -2.0f);
  EXPECT_EQ(l[2], 0.5f);
  EXPECT_EQ(l[3], 3.0f);
  EXPECT_EQ(num::bits_of(l[4]), num::bits_of(-0.0f));
  std::vector<float> all{2.0f, -1.0f, 0.5f, 3.0f};
  apply_repetition_penalty(all, h, 2.0f, 0);  // 0: the whole history
  EXPECT_EQ(all[3], 1.5f);
  // Greedy picks the penalized argmax: 3.0 at id 3 beats 2.0/1.1 at id 0 ...
  SamplingOptions g;
  g.temperature = 0.0f;
  g.repetition_penalty = 1.6f;
  const std::vector<float> logits{3.1f, 0.0f, 0.0f, 2.0f};
  EXPECT_EQ(sample(logits, g, 0), 0);
  EXPECT_EQ(sample(logits, g, 0, std::vector<std::int32_t>{0}), 3);  // 3.1 / 1.6 < 2
  g.repetition_penalty = 0.0f;
  EXPECT_THROW(g.validate(), std::invalid_argument);
  g.repetition_penalty = 1.0f;
  g.repeat_last_n = -1;
  EXPECT_THROW(g.validate(), std::invalid_argument);
}

// The lane-parallel argmax is the serial loop's answer (largest logit, lowest
// id on ties, -0 == +0, all -inf -> id 0) at every length around its 16 lanes
// and at a 2B4T head, on values drawn from a small set so ties are common; NaN
// and +inf are refused naming the first such id.
TEST(Argmax, EqualsTheSerialLoopOnTiesSignedZerosAndEveryTail) {
  const auto serial = [](const std::vector<float>& l) {
    std::size_t best = 0;
    for (std::size_t i = 1; i < l.size(); ++i)
      if (l[i] > l[best]) best = i;
    return static_cast<std::int32_t>(best);
  };
  const float pool[] = {-INFINITY, -1.5f, -0.0f, 0.0f, 0.25f, 2.0f};
  std::uint64_t x = 0x51ed;
  const auto next = [&] {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<std::size_t>(x >> 33);
  };
  std::vector<std::size_t> lengths;
  for (std::size_t n = 1; n <= 70; ++n) lengths.push_back(n);
  lengths.push_back(128256);
  for (std::size_t n : lengths)
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<float> l(n);
      const std::size_t kinds = 1 + trial % 6;  // 1: every logit the same value
      for (auto& v : l) v = pool[next() % kinds];
      ASSERT_EQ(argmax(l), serial(l)) << "n " << n << " trial " << trial;
    }
  std::vector<float> l(100, 1.0f);
  l[37] = NAN;
  try {
    (void)argmax(l);
    FAIL() << "a NaN logit was taken";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("logit 37 is"), std::string::npos) << e.what();
  }
  l[37] = 1.0f;
  l[98] = INFINITY;  // in the tail past the lanes
  EXPECT_THROW((void)argmax(l), std::runtime_error);
}

}  // namespace
