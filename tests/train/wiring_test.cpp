// The trainer's wiring against its stated definitions (trainer.hpp's header),
// on a recording stand-in model: what each step feeds the model and which
// learning rate it reports. Two bugs of the mutation catalogue were seen only
// by the golden hashes before these tests: the data order not keyed by the
// step (every step trains on the same windows) and the schedule read one step
// ahead. Both are absolutes here:
//   * step s's micro-batch a is rows [a·B, (a+1)·B) of
//     sample_batch(train, batch_seed(seed), s, B·A, T), and two steps differ;
//   * the reported lr of update 1 is lr/warmup, of update `warmup` lr itself,
//     after it the cosine decreases and never goes below min_lr_ratio·lr.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "fake_model.hpp"
#include "lockstep/data/corpus.hpp"
#include "lockstep/data/shards.hpp"
#include "lockstep/train/trainer.hpp"

#include "../common/sample_text.hpp"

namespace fs = std::filesystem;
using namespace lockstep;
using namespace lockstep::train;

namespace {

// Forwards to the stand-in model and keeps every micro-batch it is given.
class Recording final : public model::Model {
 public:
  explicit Recording(const model::ModelConfig& c) : inner_(c) {}
  std::vector<std::vector<std::int32_t>> inputs, targets;

  const model::ModelConfig& config() const override { return inner_.config(); }
  std::vector<model::Param>& params() override { return inner_.params(); }
  const std::vector<model::Param>& params() const override { return inner_.params(); }
  void init(std::uint64_t seed) override { inner_.init(seed); }
  float forward_backward(std::span<const std::int32_t> in, std::span<const std::int32_t> tg, std::int64_t batch,
                         std::int64_t seq, bool accumulate, int threads) override {
    inputs.emplace_back(in.begin(), in.end());
    targets.emplace_back(tg.begin(), tg.end());
    return inner_.forward_backward(in, tg, batch, seq, accumulate, threads);
  }
  float loss(std::span<const std::int32_t> in, std::span<const std::int32_t> tg, std::int64_t batch,
             std::int64_t seq, int threads) override {
    return inner_.loss(in, tg, batch, seq, threads);
  }
  std::vector<float> next_logits(std::span<const std::int32_t> tokens, int threads) override {
    return inner_.next_logits(tokens, threads);
  }
  void set_recompute(bool r) override { inner_.set_recompute(r); }

 private:
  fake::FakeGpt2 inner_;
};

struct TrainingSetup {
  data::PreparedCorpus corpus;
  TrainConfig cfg;
};

TrainingSetup make_run() {
  const fs::path dir = fs::temp_directory_path() / ("lockstep_wiring_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "text.txt") << lockstep::test::sample_text(80, 99u);
  data::CorpusOptions o;
  o.data = (dir / "text.txt").string();
  o.cache_dir = (dir / "cache").string();
  o.vocab_size = 300;
  o.doc_bytes = 2048;
  o.val_fraction = 0.1;
  TrainingSetup s{data::prepare_corpus(o), {}};
  s.cfg.model = "gpt2-micro";
  s.cfg.vocab = 300;
  s.cfg.steps = 12;
  s.cfg.batch = 2;
  s.cfg.accum = 3;
  s.cfg.seq = 16;
  s.cfg.lr = 3e-3;
  s.cfg.warmup = 4;
  s.cfg.seed = 21;
  return s;
}

}  // namespace

TEST(TrainerWiring, EachStepTrainsOnItsOwnWindowsInTheStatedOrder) {
  const TrainingSetup s = make_run();
  const TrainConfig& c = s.cfg;
  const model::ModelConfig mc = c.model_config(s.corpus.vocab_size, s.corpus.vocab_size - 1);
  auto rec = std::make_unique<Recording>(mc);
  Recording* r = rec.get();
  const data::Shard train(s.corpus.train_shard);
  Trainer t(c, std::move(rec), data::Shard(s.corpus.train_shard), data::Shard(s.corpus.val_shard),
            std::vector<std::uint32_t>(static_cast<std::size_t>(s.corpus.vocab_size), 1));
  t.init_fresh();
  const std::size_t micro = static_cast<std::size_t>(c.batch * c.seq);
  for (std::int64_t step = 0; step < 3; ++step) {
    t.step();
    const data::Batch want = data::sample_batch(train, batch_seed(c.seed), static_cast<std::uint64_t>(step),
                                                c.batch * c.accum, c.seq);
    for (std::int64_t a = 0; a < c.accum; ++a) {
      const auto& got_in = r->inputs.at(static_cast<std::size_t>(step * c.accum + a));
      const auto& got_tg = r->targets.at(static_cast<std::size_t>(step * c.accum + a));
      const auto off = static_cast<std::ptrdiff_t>(static_cast<std::size_t>(a) * micro);
      EXPECT_TRUE(std::equal(got_in.begin(), got_in.end(), want.inputs.begin() + off))
          << "step " << step + 1 << " micro-batch " << a << ": not the stated windows";
      EXPECT_TRUE(std::equal(got_tg.begin(), got_tg.end(), want.targets.begin() + off))
          << "step " << step + 1 << " micro-batch " << a << ": not the stated targets";
    }
  }
  // Steps see different data (the order is keyed by the step).
  EXPECT_NE(r->inputs[0], r->inputs[static_cast<std::size_t>(c.accum)]) << "steps 1 and 2 trained on the same windows";
  // A window's targets are its inputs shifted by one token.
  const auto& in = r->inputs[0];
  const auto& tg = r->targets[0];
  for (std::size_t row = 0; row < static_cast<std::size_t>(c.batch); ++row)
    for (std::size_t i = 0; i + 1 < static_cast<std::size_t>(c.seq); ++i)
      EXPECT_EQ(tg[row * static_cast<std::size_t>(c.seq) + i], in[row * static_cast<std::size_t>(c.seq) + i + 1]);
}

TEST(TrainerWiring, TheReportedLearningRateFollowsTheSchedulesDefinition) {
  const TrainingSetup s = make_run();
  const TrainConfig& c = s.cfg;
  const model::ModelConfig mc = c.model_config(s.corpus.vocab_size, s.corpus.vocab_size - 1);
  Trainer t(c, std::make_unique<fake::FakeGpt2>(mc), data::Shard(s.corpus.train_shard),
            data::Shard(s.corpus.val_shard), std::vector<std::uint32_t>(static_cast<std::size_t>(s.corpus.vocab_size), 1));
  t.init_fresh();
  const auto peak = static_cast<float>(c.lr);
  std::vector<float> lr;
  for (std::int64_t i = 0; i < c.steps; ++i) lr.push_back(t.step().lr);
  // Linear warmup: update k (1-based) of the first `warmup` uses lr·k/warmup.
  for (std::int64_t k = 1; k <= c.warmup; ++k)
    EXPECT_EQ(lr[static_cast<std::size_t>(k - 1)], peak * static_cast<float>(k) / static_cast<float>(c.warmup))
        << "update " << k;
  // Then a cosine decay from lr (its first value) towards min_lr_ratio·lr:
  // non-increasing, bounded, and below lr at the end.
  const float floor_lr = peak * static_cast<float>(c.min_lr_ratio);
  EXPECT_EQ(lr[static_cast<std::size_t>(c.warmup)], peak) << "the decay starts at lr";
  for (std::size_t i = static_cast<std::size_t>(c.warmup); i < lr.size(); ++i) {
    EXPECT_LE(lr[i], lr[i - 1]) << "update " << i + 1;
    EXPECT_GE(lr[i], floor_lr) << "update " << i + 1;
  }
  EXPECT_LT(lr.back(), peak);
}

// The data order's definition (shards.hpp): every valid window start is drawn,
// uniformly. On a shard of distinct tokens a window's first input names its
// start: over 12800 draws the first start (0) and the last (size - seq - 1)
// both appear (a miss has probability (1 - 1/52)^12800 < 1e-100) and no start
// lies outside.
TEST(TrainerWiring, SampledWindowsReachEveryStartAndNoOther) {
  const fs::path dir = fs::temp_directory_path() / ("lockstep_wiring_shard_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::vector<std::int32_t> doc(60);
  for (std::size_t i = 0; i < doc.size(); ++i) doc[i] = static_cast<std::int32_t>(i);
  data::write_shard((dir / "s.tokens").string(), {doc}, 64);
  const data::Shard shard((dir / "s.tokens").string());
  std::vector<std::int32_t> all(shard.size());
  shard.read(0, shard.size(), all.data());
  std::vector<std::int64_t> pos(64, -1);
  for (std::size_t i = 0; i < all.size(); ++i) pos[static_cast<std::size_t>(all[i])] = static_cast<std::int64_t>(i);
  const std::int64_t seq = 8, starts = static_cast<std::int64_t>(shard.size()) - seq;
  std::int64_t lo = starts, hi = -1;
  for (std::uint64_t step = 0; step < 200; ++step) {
    const data::Batch b = data::sample_batch(shard, batch_seed(3), step, 64, seq);
    for (std::int64_t r = 0; r < 64; ++r) {
      const std::int64_t start = pos[static_cast<std::size_t>(b.inputs[static_cast<std::size_t>(r * seq)])];
      lo = std::min(lo, start);
      hi = std::max(hi, start);
    }
  }
  fs::remove_all(dir);
  EXPECT_EQ(lo, 0) << "the first window start is never drawn";
  EXPECT_EQ(hi, starts - 1) << "the last window start is never drawn (or one outside is)";
}
