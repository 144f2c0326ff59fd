// The units training runs the golden tests pin (tests/train/units_golden_test.cpp,
// CPU) and the GPU test re-runs on the device (tests/cuda/units_cuda_test.cpp):
// golden_test.cpp's micro run (24 steps, seed 11) with the units linear mode.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "lockstep/train/run.hpp"

#include "../common/sample_text.hpp"

namespace lockstep::test::units {

namespace fs = std::filesystem;

struct Mode {
  const char* preset;
  bool unit_backward, units_head;
  const char* hash;  // at NUMERIC_SPEC_VERSION 1
};

inline std::string label(const Mode& m) {
  return std::string(m.preset) + " --linear units" + (m.unit_backward ? " --unit-backward" : "") +
         (m.units_head ? " --units-head" : "");
}

// A gtest parameter name: gpt2_micro_unit_bwd_head.
inline std::string test_name(const Mode& m) {
  std::string n = std::string(m.preset) + (m.unit_backward ? "_unit_bwd" : "") + (m.units_head ? "_head" : "");
  for (char& ch : n)
    if (ch == '-') ch = '_';
  return n;
}

inline train::TrainConfig config(const Mode& m, const fs::path& base) {
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

inline fs::path fresh_dir(const std::string& name) {
  const fs::path base = fs::temp_directory_path() / ("lockstep_units_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(base);
  fs::create_directories(base);
  std::ofstream(base / "text.txt") << lockstep::test::sample_text(300, 1234u);
  return base;
}

inline std::uint64_t run_hash(const Mode& m, int threads, const std::string& device) {
  const fs::path base = fresh_dir(std::string(m.preset) + "_" + device);
  train::TrainConfig c = config(m, base);
  c.threads = threads;
  c.device = device;
  train::RunOptions ro;
  std::FILE* sink = std::fopen("/dev/null", "w");
  ro.out = sink;
  const auto s = train::run_training(c, ro);
  std::fclose(sink);
  fs::remove_all(base);
  return s.weights_hash;
}

// The pinned runs (weights hash at NUMERIC_SPEC_VERSION 1, CPU and GPU alike).
inline std::vector<Mode> pinned_modes() {
  return {Mode{"gpt2-micro", false, false, "51677c4fad5502f5"}, Mode{"gpt2-micro", true, true, "18dd21e66911d25e"},
          Mode{"llama-micro", false, false, "35f7812b97f6217b"}, Mode{"llama-micro", true, false, "94f72a668ee04c4e"}};
}

}  // namespace lockstep::test::units
