// Training through the int8 units (--linear units, --unit-backward,
// --units-head; docs/UNITS.md), end to end: golden weight hashes of short
// micro runs pinned to NUMERIC_SPEC_VERSION (the same run as golden_test.cpp's
// float ones, with the units mode), the same hash on a second run and on
// another thread count, and a resume that would change the mode is refused,
// naming both. The CUDA model's units run ends on the same hashes
// (tests/cuda/units_cuda_test.cpp, label gpu).
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include "lockstep/num/hash.hpp"
#include "lockstep/train/run.hpp"
#include "lockstep/version.hpp"

#include "../common/sample_text.hpp"

namespace fs = std::filesystem;
using namespace lockstep;

namespace {

struct Mode {
  const char* preset;
  bool unit_backward, units_head;
  const char* hash;  // at NUMERIC_SPEC_VERSION 1
};

std::string label(const Mode& m) {
  return std::string(m.preset) + " --linear units" + (m.unit_backward ? " --unit-backward" : "") +
         (m.units_head ? " --units-head" : "");
}

train::TrainConfig config(const Mode& m, const fs::path& base) {
  train::TrainConfig c;
  c.model = m.preset;
  c.linear = "units";
  c.unit_backward = m.unit_backward;
  c.units_head = m.units_head;
  c.data = (base / "text.txt").string();
  c.vocab = 300;
  c.steps = 24;
  c.batch = 4;
  c.accum = 2;
  c.seq = 48;
  c.lr = 3e-3;
  c.warmup = 4;
  c.seed = 11;
  c.eval_every = 0;
  c.eval_tokens = 256;
  c.save_every = 0;
  c.max_minutes = 0;
  c.out = (base / "run").string();
  return c;
}

fs::path fresh_dir(const std::string& name) {
  const fs::path base = fs::temp_directory_path() / ("lockstep_units_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(base);
  fs::create_directories(base);
  std::ofstream(base / "text.txt") << test::sample_text(300, 1234u);
  return base;
}

std::uint64_t run_hash(const Mode& m, int threads) {
  const fs::path base = fresh_dir(m.preset);
  train::TrainConfig c = config(m, base);
  c.threads = threads;
  train::RunOptions ro;
  std::FILE* sink = std::fopen("/dev/null", "w");
  ro.out = sink;
  const auto s = train::run_training(c, ro);
  std::fclose(sink);
  fs::remove_all(base);
  return s.weights_hash;
}

class UnitsGoldenRun : public ::testing::TestWithParam<Mode> {};

TEST_P(UnitsGoldenRun, WeightsHashIsPinnedRepeatableAndThreadIndependent) {
  ASSERT_EQ(NUMERIC_SPEC_VERSION, 1) << "the numeric contract changed: re-pin these hashes with the new version";
  const Mode& m = GetParam();
  const std::string first = num::hash_hex(run_hash(m, 2));
  const std::string again = num::hash_hex(run_hash(m, 2));
  const std::string one_thread = num::hash_hex(run_hash(m, 1));
  std::printf("%s, 24 steps: weights %s, again %s, 1 thread %s (pinned %s)\n", label(m).c_str(), first.c_str(),
              again.c_str(), one_thread.c_str(), m.hash);
  EXPECT_EQ(first, m.hash);
  EXPECT_EQ(again, first) << "a second run of the same config";
  EXPECT_EQ(one_thread, first) << "another thread count";
}

INSTANTIATE_TEST_SUITE_P(Micro, UnitsGoldenRun,
                         ::testing::Values(Mode{"gpt2-micro", false, false, "51677c4fad5502f5"},
                                           Mode{"gpt2-micro", true, true, "18dd21e66911d25e"},
                                           Mode{"llama-micro", false, false, "35f7812b97f6217b"},
                                           Mode{"llama-micro", true, false, "94f72a668ee04c4e"}),
                         [](const auto& param_info) {
                           std::string n = std::string(param_info.param.preset) + (param_info.param.unit_backward ? "_unit_bwd" : "") +
                                           (param_info.param.units_head ? "_head" : "");
                           for (char& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

// A units run resumed with another linear mode is refused, naming the flag, the
// given value and the checkpoint's; resumed as it was, it continues.
TEST(UnitsResume, AnotherLinearModeIsRefusedNamingBoth) {
  const fs::path base = fresh_dir("resume");
  const Mode m{"gpt2-micro", true, false, ""};
  train::TrainConfig c = config(m, base);
  c.steps = 3;
  c.warmup = 1;
  train::RunOptions ro;
  std::FILE* sink = std::fopen("/dev/null", "w");
  ro.out = sink;
  train::run_training(c, ro);
  auto refusal = [&](train::TrainConfig cli, const std::set<std::string>& given) -> std::string {
    train::RunOptions r;
    r.out = sink;
    r.resume = c.out;
    r.given = given;
    try {
      train::run_training(cli, r);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "(accepted)";
  };
  train::TrainConfig as_float = c;
  as_float.linear = "float";
  as_float.unit_backward = false;
  const std::string a = refusal(as_float, {"linear"});
  EXPECT_NE(a.find("--linear \"float\" differs from the checkpoint's run (\"units\")"), std::string::npos) << a;
  train::TrainConfig no_unit_bwd = c;
  no_unit_bwd.unit_backward = false;
  const std::string b = refusal(no_unit_bwd, {"unit-backward"});
  EXPECT_NE(b.find("--unit-backward false differs from the checkpoint's run (true)"), std::string::npos) << b;
  train::TrainConfig more = c;
  more.steps = 5;
  EXPECT_EQ(refusal(more, {"steps"}), "(accepted)");
  std::fclose(sink);
  fs::remove_all(base);
}

}  // namespace
