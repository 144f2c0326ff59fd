// Golden weight hashes: short training runs of each family, end to end (BPE
// vocabulary, corpus split and shards, Philox init, every op forward and
// backward, clipping, AdamW), pinned to NUMERIC_SPEC_VERSION. A change to any
// canonical expression changes these bits: the test then fails until the
// version is bumped and the hashes re-pinned (src/lockstep/version.hpp). The
// gpt2-micro hash is also what the same run gives on the GPU
// (tests/cuda/cuda_model_test.cpp, CudaTraining) and on the GPU host's CPU
// (another CPU, g++ 13); llama and bitnet were pinned on the development
// machine (g++ 12) and are re-checked wherever the suite runs.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "lockstep/num/hash.hpp"
#include "lockstep/train/run.hpp"
#include "lockstep/version.hpp"

#include "../common/sample_text.hpp"

namespace fs = std::filesystem;
using namespace lockstep;

namespace {

std::uint64_t run_hash(const std::string& preset) {
  const fs::path base = fs::temp_directory_path() / ("lockstep_golden_" + std::to_string(::getpid()) + "_" + preset);
  fs::remove_all(base);
  fs::create_directories(base);
  std::ofstream(base / "text.txt") << test::sample_text(300, 1234u);
  train::TrainConfig c;
  c.model = preset;
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
  train::RunOptions ro;
  std::FILE* sink = std::fopen("/dev/null", "w");
  ro.out = sink;
  const auto s = train::run_training(c, ro);
  std::fclose(sink);
  fs::remove_all(base);
  return s.weights_hash;
}

struct Golden {
  const char* preset;
  const char* hash;  // at NUMERIC_SPEC_VERSION 1
};

class GoldenRun : public ::testing::TestWithParam<Golden> {};

TEST_P(GoldenRun, WeightsHashIsPinned) {
  ASSERT_EQ(NUMERIC_SPEC_VERSION, 1) << "the numeric contract changed: re-pin these hashes with the new version";
  const std::string got = num::hash_hex(run_hash(GetParam().preset));
  std::printf("%s, 24 steps: weights %s (pinned %s, NUMERIC_SPEC_VERSION %d)\n", GetParam().preset, got.c_str(),
              GetParam().hash, NUMERIC_SPEC_VERSION);
  EXPECT_EQ(got, GetParam().hash);
}

INSTANTIATE_TEST_SUITE_P(Micro, GoldenRun,
                         ::testing::Values(Golden{"gpt2-micro", "e5d0a55c88528ec0"},
                                           Golden{"llama-micro", "26199c06a710b1c0"},
                                           Golden{"bitnet-micro", "97c7bac7d9fca1eb"}),
                         [](const auto& param_info) {
                           std::string n = param_info.param.preset;
                           for (char& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

}  // namespace
