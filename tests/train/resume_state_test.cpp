// A resumed run is the straight run: not only its weights (trainer_test's
// resume tests compare those), but its bookkeeping and what it reports — the
// step counter, the learning-rate schedule, the data position, the tokens
// seen, every metrics line (loss, lr, grad_norm, tokens; validation loss, bpb,
// tokens, bytes) and the final checkpoint's trainer_state.json. A resume that
// restores weights and moments but forgets a counter passes a weights
// comparison whenever the counter does not feed the update (tokens seen, the
// metrics' step numbers, the elapsed wall clock) — this test is the one that sees it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lockstep/train/run.hpp"

#include "../common/sample_text.hpp"

namespace fs = std::filesystem;
using namespace lockstep;
using namespace lockstep::train;

namespace {

std::vector<nlohmann::json> metrics_of(const fs::path& run) {
  std::vector<nlohmann::json> v;
  std::ifstream in(run / "metrics.jsonl");
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    j.erase("tok_per_s");  // wall-clock measurements: the only fields allowed to differ
    j.erase("elapsed_s");
    v.push_back(std::move(j));
  }
  return v;
}

nlohmann::json final_state(const fs::path& run) {
  std::ifstream latest(run / "latest");
  std::string name;
  std::getline(latest, name);
  std::ifstream in(run / name / "trainer_state.json");
  auto j = nlohmann::json::parse(in);
  j.erase("elapsed_seconds");
  j["run"].erase("out");  // the two runs' directories
  return j;
}

}  // namespace

TEST(Resume, AResumedRunHasTheStraightRunsStateAndMetrics) {
  const fs::path base = fs::temp_directory_path() / ("lockstep_resume_state_" + std::to_string(::getpid()));
  fs::remove_all(base);
  fs::create_directories(base);
  std::ofstream(base / "text.txt") << lockstep::test::sample_text(200, 4242u);
  TrainConfig c;
  c.model = "llama-micro";
  c.vocab = 300;
  c.steps = 10;
  c.batch = 2;
  c.accum = 2;  // the data position moves by batch·accum windows a step
  c.seq = 24;
  c.lr = 3e-3;
  c.warmup = 6;  // the resume lands inside the warmup: the schedule must continue, not restart
  c.threads = 2;
  c.seed = 5;
  c.data = (base / "text.txt").string();
  c.eval_every = 4;
  c.eval_tokens = 48;
  c.save_every = 3;
  c.max_minutes = 0;
  std::FILE* sink = std::fopen("/dev/null", "w");

  c.out = (base / "straight").string();
  RunOptions ro;
  ro.out = sink;
  const RunSummary straight = run_training(c, ro);

  // Stopped after step 4 (as Ctrl-C does: a checkpoint at 4), then resumed.
  c.out = (base / "resumed").string();
  std::atomic<bool> stop{false};
  RunOptions r1;
  r1.out = sink;
  r1.stop = &stop;
  r1.on_step = [&](const StepResult& r) {
    if (r.step == 4) stop = true;
  };
  const RunSummary first = run_training(c, r1);
  ASSERT_TRUE(first.interrupted);
  ASSERT_EQ(first.last_step, 4);
  RunOptions r2;
  r2.out = sink;
  r2.resume = c.out;
  std::vector<StepResult> resumed_steps;
  r2.on_step = [&](const StepResult& r) { resumed_steps.push_back(r); };
  const RunSummary second = run_training(TrainConfig{}, r2);
  std::fclose(sink);

  EXPECT_EQ(second.first_step, 4);
  EXPECT_EQ(second.last_step, straight.last_step);
  EXPECT_EQ(second.weights_hash, straight.weights_hash);
  ASSERT_TRUE(second.final_eval.has_value() && straight.final_eval.has_value());
  EXPECT_EQ(second.final_eval->loss, straight.final_eval->loss);
  EXPECT_EQ(second.final_eval->bpb, straight.final_eval->bpb);
  EXPECT_EQ(first.tokens + second.tokens, straight.tokens);
  ASSERT_FALSE(resumed_steps.empty());
  EXPECT_EQ(resumed_steps.front().step, 5) << "the resumed session's first update is step 5";

  // Every metrics line, field by field (a resumed run's file reads as one run).
  const auto ms = metrics_of(base / "straight"), mr = metrics_of(base / "resumed");
  ASSERT_EQ(mr.size(), ms.size());
  for (std::size_t i = 0; i < ms.size(); ++i) EXPECT_EQ(mr[i], ms[i]) << "metrics line " << i + 1;

  // The wall clock continues across the resume: elapsed_s never goes back
  // (a resume that restarted it from 0 reports step 5 before step 4's time).
  {
    std::ifstream in(base / "resumed" / "metrics.jsonl");
    std::string line;
    double last = 0.0;
    while (std::getline(in, line)) {
      const auto j = nlohmann::json::parse(line);
      if (j["type"] != "train") continue;
      const double e = j["elapsed_s"].get<double>();
      EXPECT_GE(e, last) << "elapsed_s went back at step " << j["step"];
      last = e;
    }
  }

  // The final checkpoint's bookkeeping: step, tokens seen, seed, hashes, config, corpus.
  const auto ss = final_state(base / "straight"), sr = final_state(base / "resumed");
  EXPECT_EQ(sr, ss);
  std::printf("straight and resumed (stopped at 4): %zu metrics lines equal; trainer_state %s\n", ms.size(),
              sr == ss ? "equal" : "DIFFERENT");
  fs::remove_all(base);
}
