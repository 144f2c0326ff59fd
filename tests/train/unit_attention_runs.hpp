// The --attention units training runs the golden test pins
// (tests/train/unit_attention_golden_test.cpp, CPU) and the GPU test re-runs
// on the device (tests/cuda/unit_attention_cuda_test.cpp): units_runs.hpp's
// micro run (24 steps, seed 11) with the attention through int8 units.
#pragma once

#include <string>
#include <vector>

#include "units_runs.hpp"

namespace lockstep::test::unit_attention {

struct AttnMode {
  const char* preset;
  bool linear_units;  // --linear units --unit-backward too
  const char* hash;   // at NUMERIC_SPEC_VERSION 1
};

inline std::string label(const AttnMode& m) {
  return std::string(m.preset) + " --attention units" + (m.linear_units ? " --linear units --unit-backward" : "");
}
inline std::string test_name(const AttnMode& m) {
  std::string n = std::string(m.preset) + (m.linear_units ? "_linear_units" : "");
  for (char& ch : n)
    if (ch == '-') ch = '_';
  return n;
}

inline std::uint64_t run_hash(const AttnMode& m, int threads, const std::string& device) {
  namespace u = lockstep::test::units;
  const u::fs::path base = u::fresh_dir(std::string("attn_") + m.preset + "_" + device);
  train::TrainConfig c = u::config(u::Mode{m.preset, m.linear_units, false, ""}, base);
  if (!m.linear_units) c.linear = "float";
  c.attention = "units";
  c.threads = threads;
  c.device = device;
  train::RunOptions ro;
  std::FILE* sink = std::fopen("/dev/null", "w");
  ro.out = sink;
  const auto s = train::run_training(c, ro);
  std::fclose(sink);
  u::fs::remove_all(base);
  return s.weights_hash;
}

inline std::vector<AttnMode> pinned_modes() {
  return {AttnMode{"gpt2-micro", false, "053333cf24178b23"}, AttnMode{"gpt2-micro", true, "5edf23d608e3bbc2"},
          AttnMode{"llama-micro", false, "a69d0a7ffd2fc86b"}};
}

}  // namespace lockstep::test::unit_attention
