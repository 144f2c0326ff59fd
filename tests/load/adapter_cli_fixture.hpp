// The files of the adapter CLI tests (adapter_cli_test.cpp, and its GPU twin
// adapter_cli_cuda_test.cpp): Hugging Face directories of a random llama and a
// random BitNet with LLaMA-3's vocabulary and ../shared/testdata/llama3/tokenizer.json,
// and PEFT-format adapters on them written by load::save_adapter.
#pragma once

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "../common/run_command.hpp"
#include "../model/model_test_util.hpp"
#include "lockstep/load/adapter.hpp"
#include "lockstep/load/model_file.hpp"
#include "lockstep/model/model.hpp"

namespace lockstep::test {

namespace fs = std::filesystem;

inline std::string cli(const std::string& args, int* status) {
  return run_command(std::string(LOCKSTEP_CLI_PATH) + " " + args, status);
}

// An adapter on q_proj, v_proj and down_proj: A ~ N(0, 0.5²), B ~ N(0, b_scale²).
inline model::Adapter adapter_on(const std::vector<model::Param>& params, float b_scale, std::uint32_t seed) {
  model::Adapter a;
  a.config.rank = 4;
  a.config.alpha = 16.0;
  a.config.targets = {"q_proj", "v_proj", "down_proj"};
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (const model::Param& p : params) {
    const bool target = p.name.find("q_proj.weight") != std::string::npos ||
                        p.name.find("v_proj.weight") != std::string::npos ||
                        p.name.find("down_proj.weight") != std::string::npos;
    if (!target) continue;
    model::LoraTensor t;
    t.module = p.name.substr(0, p.name.size() - 7);
    t.out = static_cast<std::size_t>(p.shape[0]);
    t.in = static_cast<std::size_t>(p.shape[1]);
    for (std::size_t i = 0; i < 4 * t.in; ++i) t.a.push_back(0.5f * nd(rng));
    for (std::size_t i = 0; i < t.out * 4; ++i) t.b.push_back(b_scale * nd(rng));
    a.tensors.push_back(std::move(t));
  }
  return a;
}

// dir/base (llama), dir/bitnet (a BitNet base, its projections F32 masters), each
// with dir/<base>-adapter (B random) and, for the llama, dir/zero (B = 0).
class AdapterCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const fs::path tj = fs::path(LOCKSTEP_SHARED_TESTDATA) / "llama3" / "tokenizer.json";
    if (!fs::exists(tj)) return;
    dir_ = fs::temp_directory_path() / ("lockstep_adapter_cli_" + std::to_string(::getpid()));
    for (const char* family : {"llama-micro", "bitnet-micro"}) {
      const bool bitnet = std::string(family) == "bitnet-micro";
      const fs::path base = dir_ / (bitnet ? "bitnet" : "base");
      fs::create_directories(base);
      model::ModelConfig cfg = model::preset(family);
      cfg.vocab_size = 128256;
      cfg.d_model = 32;
      cfg.n_head = 2;
      cfg.n_kv_head = 1;
      cfg.head_dim = 16;
      cfg.d_ff = 64;
      cfg.tie_embeddings = true;
      auto m = model::make_cpu_model(cfg);
      model::testing::randomize(m->params(), 5, 0.5);
      load::write_hf_model(base.string(), cfg, m->params());
      fs::copy_file(tj, base / "tokenizer.json");
      load::save_adapter((dir_ / (bitnet ? "bitnet-adapter" : "adapter")).string(), adapter_on(m->params(), 0.5f, 1));
      if (!bitnet) load::save_adapter((dir_ / "zero").string(), adapter_on(m->params(), 0.0f, 1));
    }
  }
  static void TearDownTestSuite() {
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  void SetUp() override {
    if (dir_.empty()) GTEST_SKIP() << "no " << LOCKSTEP_SHARED_TESTDATA << "/llama3/tokenizer.json";
  }
  static std::string generate(const std::string& flags, int* st, const std::string& base = "base") {
    return cli("generate --model " + (dir_ / base).string() + " --prompt 'Once upon' --temperature 0 --max-tokens 8 " +
                   flags + " 2>&1",
               st);
  }
  static inline fs::path dir_;
};

}  // namespace lockstep::test
