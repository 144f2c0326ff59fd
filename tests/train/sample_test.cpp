// Sampling: greedy, temperature, top-k, top-p, determinism per seed, and the
// sampled frequencies against the probabilities they should follow.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <vector>

#include "lockstep/infer/sample.hpp"

using namespace lockstep::infer;

TEST(Sample, GreedyIsArgmaxLowestIdOnTies) {
  SamplingOptions o;
  o.temperature = 0.0f;
  EXPECT_EQ(sample(std::vector<float>{0.1f, 3.0f, -1.0f, 3.0f}, o, 0), 1);
  EXPECT_EQ(argmax(std::vector<float>{-INFINITY, -5.0f}), 1);
  EXPECT_THROW(argmax(std::vector<float>{0.0f, NAN}), std::runtime_error);
  EXPECT_THROW(argmax(std::vector<float>{}), std::runtime_error);
}

TEST(Sample, CandidatesAreOrderedAndCut) {
  const std::vector<float> logits = {1.0f, 4.0f, 2.0f, 4.0f, -3.0f, 0.5f};
  SamplingOptions o;
  o.temperature = 1.0f;
  o.top_k = 0;
  o.top_p = 1.0f;
  auto c = candidates(logits, o);
  ASSERT_EQ(c.size(), 6u);
  const std::vector<int> order = {1, 3, 2, 0, 5, 4};  // by logit, ties by id
  float sum = 0;
  for (std::size_t i = 0; i < c.size(); ++i) {
    EXPECT_EQ(c[i].id, order[i]);
    if (i) {
      EXPECT_LE(c[i].p, c[i - 1].p);
    }
    sum += c[i].p;
  }
  EXPECT_NEAR(sum, 1.0f, 1e-6f);
  // The probabilities are the softmax: p1/p2 = e^(4-2).
  EXPECT_NEAR(c[0].p / c[2].p, std::exp(2.0), 1e-5);

  o.top_k = 3;
  c = candidates(logits, o);
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[2].id, 2);
  EXPECT_NEAR(c[0].p + c[1].p + c[2].p, 1.0f, 1e-6f);  // renormalized over the top k

  o.top_k = 0;
  o.top_p = 0.5f;  // the two 4.0 logits hold ~0.84 together, one holds ~0.42 < 0.5
  c = candidates(logits, o);
  EXPECT_EQ(c.size(), 2u);
  o.top_p = 0.01f;
  EXPECT_EQ(candidates(logits, o).size(), 1u);

  // Temperature sharpens: at 0.25 the top two hold nearly everything.
  o.top_p = 1.0f;
  o.temperature = 0.25f;
  c = candidates(logits, o);
  EXPECT_GT(c[0].p + c[1].p, 0.999f);
}

TEST(Sample, DeterministicPerSeedAndIndex) {
  std::vector<float> logits(50);
  for (std::size_t i = 0; i < logits.size(); ++i) logits[i] = std::sin(static_cast<float>(i) * 0.7f) * 2.0f;
  SamplingOptions a;
  a.temperature = 1.0f;
  a.top_k = 0;
  a.top_p = 1.0f;
  a.seed = 42;
  SamplingOptions b = a;
  b.seed = 43;
  int same = 0, diff = 0;
  for (std::uint64_t i = 0; i < 200; ++i) {
    EXPECT_EQ(sample(logits, a, i), sample(logits, a, i));
    (sample(logits, a, i) == sample(logits, b, i) ? same : diff)++;
  }
  std::printf("seed 42 vs 43 over 200 draws: %d equal, %d different\n", same, diff);
  EXPECT_GT(diff, 100);
}

TEST(Sample, FrequenciesFollowTheProbabilities) {
  // 5 tokens, 40000 draws: each frequency within 5σ of its probability, and
  // a chi-square statistic below the 99.99% point of chi²(4) (23.5).
  const std::vector<float> logits = {2.0f, 1.0f, 0.0f, -1.0f, 0.5f};
  for (const auto& [k, p] : std::vector<std::pair<int, float>>{{0, 1.0f}, {3, 1.0f}, {0, 0.8f}}) {
    SamplingOptions o;
    o.temperature = 1.3f;
    o.top_k = k;
    o.top_p = p;
    o.seed = 7;
    const auto c = candidates(logits, o);
    float kept = 0;
    for (const auto& x : c) kept += x.p;
    constexpr int kDraws = 40000;
    std::map<int, int> count;
    for (int i = 0; i < kDraws; ++i) count[sample(logits, o, static_cast<std::uint64_t>(i))]++;
    double chi2 = 0;
    int seen = 0;
    for (const auto& x : c) {
      const double expect = kDraws * static_cast<double>(x.p / kept);
      const double sigma = std::sqrt(expect * (1 - expect / kDraws));
      EXPECT_NEAR(count[x.id], expect, 5 * sigma) << "token " << x.id << " k " << k << " p " << p;
      chi2 += (count[x.id] - expect) * (count[x.id] - expect) / expect;
      seen += count[x.id];
    }
    EXPECT_EQ(seen, kDraws) << "a token outside the kept candidates was sampled";
    std::printf("top_k %d top_p %.1f: %zu candidates, chi2 %.2f (dof %zu)\n", k, static_cast<double>(p), c.size(),
                chi2, c.size() - 1);
    EXPECT_LT(chi2, 23.5);
  }
}

TEST(Sample, BadOptionsNameTheFlag) {
  SamplingOptions o;
  o.temperature = -1.0f;
  try {
    o.validate();
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("--temperature"), std::string::npos);
  }
  o = {};
  o.top_p = 0.0f;
  EXPECT_THROW(o.validate(), std::invalid_argument);
  o = {};
  o.top_k = -2;
  EXPECT_THROW(o.validate(), std::invalid_argument);
  o = {};
  EXPECT_THROW(sample(std::vector<float>{1.0f, NAN}, o, 0), std::runtime_error);
}
