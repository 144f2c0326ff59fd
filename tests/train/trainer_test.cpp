// The trainer on the real CPU model (micro presets): resume is bit-exact, the
// thread count does not change a bit, gradient accumulation is the mean of
// the micro-batch gradients, validation counts bytes right, and a whole run
// (run_training) interrupted and resumed ends on the weights of a straight run.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "fake_model.hpp"
#include "lockstep/data/corpus.hpp"
#include "lockstep/num/hash.hpp"
#include "lockstep/tok/bpe.hpp"
#include "lockstep/train/checkpoint.hpp"
#include "lockstep/train/run.hpp"
#include "lockstep/train/trainer.hpp"

#include "../common/sample_text.hpp"

namespace fs = std::filesystem;
using namespace lockstep;
using namespace lockstep::train;

namespace {

// Steps of the resume and thread-count runs. Under AddressSanitizer (about
// ten times slower) the same checks run on fewer steps.
#if defined(__SANITIZE_ADDRESS__)
constexpr std::int64_t kSteps = 8;
#else
constexpr std::int64_t kSteps = 20;
#endif

fs::path temp_dir(const std::string& name) {
  const fs::path p = fs::temp_directory_path() / ("lockstep_trainer_test_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

std::string sample_text(int paragraphs) { return lockstep::test::sample_text(paragraphs, 777u); }

// One prepared corpus shared by the tests (vocabulary 300, ~60 kB of text).
const data::PreparedCorpus& corpus() {
  static const data::PreparedCorpus c = [] {
    const fs::path dir = temp_dir("corpus");
    std::ofstream(dir / "text.txt") << sample_text(300);
    data::CorpusOptions o;
    o.data = (dir / "text.txt").string();
    o.cache_dir = (dir / "cache").string();
    o.vocab_size = 300;
    o.doc_bytes = 2048;
    o.val_fraction = 0.1;
    return data::prepare_corpus(o);
  }();
  return c;
}

std::vector<std::uint32_t> token_bytes() {
  const auto tok = tok::load_hf_tokenizer_json(corpus().tokenizer_json);
  std::vector<std::uint32_t> b(static_cast<std::size_t>(tok.vocab_size()), 0);
  for (std::int32_t i = 0; i < tok.vocab_size(); ++i)
    if (!tok.is_special(i)) b[static_cast<std::size_t>(i)] = static_cast<std::uint32_t>(tok.tokens()[static_cast<std::size_t>(i)].size());
  return b;
}

TrainConfig micro(const std::string& preset = "gpt2-micro") {
  TrainConfig c;
  c.model = preset;
  c.vocab = 300;
  c.steps = kSteps;
  c.batch = 4;
  c.seq = 32;
  c.lr = 3e-3;
  c.warmup = 4;
  c.threads = 2;
  c.seed = 9;
  return c;
}

Trainer make_trainer(const TrainConfig& c) {
  const model::ModelConfig mc = c.model_config(corpus().vocab_size, corpus().vocab_size - 1);
  return Trainer(c, model::make_cpu_model(mc), data::Shard(corpus().train_shard), data::Shard(corpus().val_shard),
                 token_bytes());
}

std::uint64_t train_straight(const TrainConfig& c) {
  Trainer t = make_trainer(c);
  t.init_fresh();
  while (t.current_step() < c.steps) t.step();
  return weights_hash(t.model());
}

}  // namespace

TEST(Trainer, ResumeIsBitExact) {
  for (const std::string preset : {"gpt2-micro", "llama-micro"}) {
    const TrainConfig c = micro(preset);
    const std::uint64_t straight = train_straight(c);

    const fs::path run = temp_dir("resume_" + preset);
    {
      Trainer t = make_trainer(c);
      t.init_fresh();
      while (t.current_step() < c.steps / 2) t.step();
      CheckpointMeta meta;
      meta.step = t.current_step();
      meta.seed = c.seed;
      meta.run_config_json = c.to_json();
      save_checkpoint(run.string(), t.model(), t.optimizer(), meta, "");
    }
    LoadedCheckpoint ck = load_checkpoint(run.string(), true);
    ASSERT_EQ(ck.meta.step, c.steps / 2);
    Trainer t(c, std::move(ck.model), data::Shard(corpus().train_shard), data::Shard(corpus().val_shard),
              token_bytes());
    t.restore(std::move(ck.opt));
    while (t.current_step() < c.steps) t.step();
    const std::uint64_t resumed = weights_hash(t.model());
    std::printf("%s: %lld steps straight %s, %lld + save/load + %lld %s\n", preset.c_str(),
                static_cast<long long>(c.steps), num::hash_hex(straight).c_str(),
                static_cast<long long>(c.steps / 2), static_cast<long long>(c.steps - c.steps / 2),
                num::hash_hex(resumed).c_str());
    EXPECT_EQ(resumed, straight) << preset;
    fs::remove_all(run);
  }
}

TEST(Trainer, WeightsDoNotDependOnTheThreadCount) {
  TrainConfig c = micro();
  c.steps = kSteps / 2;
  std::uint64_t first = 0;
  for (int threads : {1, 2, 5}) {
    c.threads = threads;
    const std::uint64_t h = train_straight(c);
    std::printf("gpt2-micro, %d thread(s), %lld steps: weights %s\n", threads, static_cast<long long>(c.steps),
                num::hash_hex(h).c_str());
    if (threads == 1) first = h;
    EXPECT_EQ(h, first) << threads << " threads";
  }
  // The hash does see a change of the run (a different seed).
  c.seed = 10;
  EXPECT_NE(train_straight(c), first);
}

TEST(Trainer, AccumulationAveragesTheMicroBatchGradients) {
  TrainConfig c = micro();
  c.batch = 2;
  c.accum = 2;
  c.grad_clip = 0;  // leave the gradients as accumulated
  Trainer t = make_trainer(c);
  t.init_fresh();
  // The same model, by hand: the step's 4 windows, split 2 + 2.
  const model::ModelConfig mc = c.model_config(corpus().vocab_size, corpus().vocab_size - 1);
  auto ref = model::make_cpu_model(mc);
  ref->init(c.seed);
  const data::Shard shard(corpus().train_shard);
  const data::Batch b = data::sample_batch(shard, batch_seed(c.seed), 0, 4, c.seq);
  const auto half = static_cast<std::size_t>(2 * c.seq);
  const float l0 = ref->forward_backward(std::span(b.inputs.data(), half), std::span(b.targets.data(), half), 2,
                                         c.seq, false, 1);
  std::vector<std::vector<float>> g0;
  for (const auto& p : ref->params()) g0.push_back(p.grad);
  const float l1 = ref->forward_backward(std::span(b.inputs.data() + half, half),
                                         std::span(b.targets.data() + half, half), 2, c.seq, false, 1);
  const StepResult r = t.step();
  EXPECT_EQ(num::bits_of(r.loss), num::bits_of((l0 + l1) / 2.0f));
  std::size_t cells = 0, mismatches = 0;
  for (std::size_t i = 0; i < ref->params().size(); ++i) {
    const auto& g1 = ref->params()[i].grad;
    const auto& got = t.model().params()[i].grad;
    for (std::size_t k = 0; k < g1.size(); ++k, ++cells)
      mismatches += num::bits_of(got[k]) != num::bits_of((g0[i][k] + g1[k]) * 0.5f);
  }
  std::printf("accum 2 x batch 2: loss %.6f = (%.6f + %.6f)/2; %zu gradient cells, %zu mismatches\n",
              static_cast<double>(r.loss), static_cast<double>(l0), static_cast<double>(l1), cells, mismatches);
  EXPECT_EQ(mismatches, 0u);
}

TEST(Trainer, ValidationScoresEveryTokenAndCountsItsBytes) {
  TrainConfig c = micro();
  Trainer t = make_trainer(c);
  t.init_fresh();
  const EvalResult e = t.evaluate(0);
  const data::Shard val(corpus().val_shard);
  const std::int64_t windows = static_cast<std::int64_t>((val.size() - 1) / static_cast<std::uint64_t>(c.seq));
  EXPECT_EQ(e.tokens, static_cast<std::uint64_t>(windows * c.seq));
  // Bytes by hand: every target token of the pass (positions 1 .. windows·seq).
  const auto tb = token_bytes();
  std::uint64_t bytes = 0;
  for (std::uint64_t i = 1; i <= static_cast<std::uint64_t>(windows * c.seq); ++i)
    bytes += tb[static_cast<std::size_t>(val.token(i))];
  EXPECT_EQ(e.bytes, bytes);
  EXPECT_NEAR(e.bpb, e.loss * static_cast<double>(e.tokens) / (std::log(2.0) * static_cast<double>(e.bytes)), 1e-12);
  // Untrained: about ln(vocab) nats per token.
  EXPECT_NEAR(e.loss, std::log(300.0), 0.3);
  std::printf("untrained: %.4f nats/token (ln 300 = %.4f), %.4f bits/byte over %llu tokens, %llu bytes\n", e.loss,
              std::log(300.0), e.bpb, static_cast<unsigned long long>(e.tokens),
              static_cast<unsigned long long>(e.bytes));
  // A periodic pass scores the first eval_tokens/seq windows.
  EXPECT_EQ(t.evaluate(100).tokens, 3u * static_cast<std::uint64_t>(c.seq));
  EXPECT_EQ(t.evaluate(1).tokens, static_cast<std::uint64_t>(c.seq));  // at least one window
  // Training lowers it.
  while (t.current_step() < c.steps) t.step();
  const EvalResult after = t.evaluate(0);
  std::printf("after %lld steps: %.4f bits/byte\n", static_cast<long long>(c.steps), after.bpb);
  EXPECT_LT(after.bpb, e.bpb - 0.5);
}

TEST(Trainer, NonFiniteLossIsRefused) {
  TrainConfig c = micro();
  c.accum = 2;
  const model::ModelConfig mc = c.model_config(corpus().vocab_size, corpus().vocab_size - 1);
  auto fake = std::make_unique<fake::FakeGpt2>(mc);
  fake->poison_at_call = 4;  // the second micro-batch of step 2
  Trainer t(c, std::move(fake), data::Shard(corpus().train_shard), data::Shard(corpus().val_shard), token_bytes());
  t.init_fresh();
  t.step();
  const std::uint64_t before = weights_hash(t.model());
  try {
    t.step();
    FAIL() << "no throw";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("step 2: the training loss is nan"), std::string::npos) << e.what();
  }
  EXPECT_EQ(weights_hash(t.model()), before);  // no update was applied
  EXPECT_EQ(t.current_step(), 1);
}

TEST(Trainer, RunInterruptedAndResumedEndsOnTheStraightRunsWeights) {
  const fs::path base = temp_dir("run");
  std::ofstream(base / "text.txt") << sample_text(300);
  TrainConfig c = micro();
  c.data = (base / "text.txt").string();
  c.steps = 16;
  c.eval_every = 5;
  c.eval_tokens = 64;
  c.save_every = 6;
  c.max_minutes = 0;
  std::FILE* sink = std::fopen("/dev/null", "w");

  c.out = (base / "straight").string();
  RunOptions ro;
  ro.out = sink;
  const RunSummary straight = run_training(c, ro);
  EXPECT_EQ(straight.last_step, 16);
  ASSERT_TRUE(straight.final_eval.has_value());

  // The same run in three sessions: stopped (as Ctrl-C does) after step 4;
  // resumed and crashed after step 9 (an exception: nothing saved, the last
  // checkpoint is step 6 and metrics.jsonl already holds steps 7–9); resumed
  // again to the end.
  c.out = (base / "stopped").string();
  std::atomic<bool> stop{false};
  ro.stop = &stop;
  ro.on_step = [&](const StepResult& r) {
    if (r.step == 4) stop = true;
  };
  const RunSummary first = run_training(c, ro);
  EXPECT_TRUE(first.interrupted);
  EXPECT_EQ(first.last_step, 4);
  EXPECT_FALSE(first.final_eval.has_value());
  EXPECT_EQ(fs::path(first.checkpoint).filename(), "step-00000004");
  // A fresh run into the same directory is refused; --force would start over.
  EXPECT_THROW(run_training(c, ro), std::invalid_argument);

  stop = false;
  ro.resume = c.out;
  ro.on_step = [&](const StepResult& r) {
    if (r.step == 9) throw std::runtime_error("simulated crash");
  };
  TrainConfig cli;  // nothing given: the checkpoint's settings
  EXPECT_THROW(run_training(cli, ro), std::runtime_error);
  ro.on_step = nullptr;
  const RunSummary second = run_training(cli, ro);
  EXPECT_EQ(second.first_step, 6);
  EXPECT_EQ(second.last_step, 16);
  std::printf("straight %s, stopped at 4 + crashed at 9 + resumed from 6: %s\n",
              num::hash_hex(straight.weights_hash).c_str(), num::hash_hex(second.weights_hash).c_str());
  EXPECT_EQ(second.weights_hash, straight.weights_hash);
  ASSERT_TRUE(second.final_eval.has_value());
  EXPECT_EQ(second.final_eval->bpb, straight.final_eval->bpb);

  // metrics.jsonl reads as one run: steps 1..16 once each, validation lines.
  for (const std::string run : {"straight", "stopped"}) {
    std::ifstream in(base / run / "metrics.jsonl");
    std::string line;
    int train_lines = 0, val_lines = 0, final_lines = 0;
    std::int64_t last = 0;
    while (std::getline(in, line)) {
      const auto j = nlohmann::json::parse(line);
      if (j["type"] == "train") {
        EXPECT_EQ(j["step"].get<std::int64_t>(), last + 1) << run;
        last = j["step"];
        ++train_lines;
      } else {
        ++val_lines;
        final_lines += j["final"].get<bool>();
        EXPECT_GT(j["bpb"].get<double>(), 0.0);
      }
    }
    EXPECT_EQ(train_lines, 16) << run;
    EXPECT_EQ(val_lines, 4) << run;  // steps 5, 10, 15 and the final pass
    EXPECT_EQ(final_lines, 1) << run;
  }

  // A wall-clock budget that is already spent: stops before the first step... of a fresh run
  c.out = (base / "budget").string();
  c.max_minutes = 1e-9;
  RunOptions rb;
  rb.out = sink;
  const RunSummary b = run_training(c, rb);
  EXPECT_TRUE(b.out_of_time);
  EXPECT_EQ(b.last_step, 0);
  std::fclose(sink);
  fs::remove_all(base);
}

// A device this machine cannot run is refused before anything is prepared or
// written (on a GPU machine the CUDA half has nothing to refuse and is skipped).
TEST(Trainer, AnUnusableDeviceIsRefusedBeforeTheData) {
  std::string why;
  EXPECT_TRUE(model::device_available("cpu", &why));
  EXPECT_FALSE(model::device_available("tpu", &why));
  EXPECT_EQ(why, "unknown device 'tpu' (cpu or cuda)");
  if (model::device_available("cuda", &why)) GTEST_SKIP() << "a CUDA device is usable here";
  const fs::path base = temp_dir("nodevice");
  std::ofstream(base / "text.txt") << sample_text(20);
  TrainConfig c = micro();
  c.data = (base / "text.txt").string();
  c.device = "cuda";
  c.out = (base / "out").string();
  std::FILE* sink = std::fopen("/dev/null", "w");
  RunOptions ro;
  ro.out = sink;
  try {
    run_training(c, ro);
    ADD_FAILURE() << "ran on an unusable device";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "--device cuda: " + why) << e.what();
  }
  std::fclose(sink);
  EXPECT_FALSE(fs::exists(base / "out")) << "the run wrote before refusing the device";
  fs::remove_all(base);
}
