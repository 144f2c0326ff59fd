// `lockstep generate --adapter`, `lockstep chat --adapter` and `lockstep merge`
// as a user runs them, on a Hugging Face directory (a random llama with
// LLaMA-3's vocabulary and ../shared/testdata/llama3/tokenizer.json) and a
// PEFT-format adapter written by load::save_adapter.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>

#include "../common/run_command.hpp"
#include "../model/model_test_util.hpp"
#include "lockstep/load/adapted_model.hpp"
#include "lockstep/load/adapter.hpp"
#include "lockstep/load/model_file.hpp"
#include "lockstep/model/model.hpp"

namespace {

namespace fs = std::filesystem;
using namespace lockstep;

std::string cli(const std::string& args, int* status) {
  return test::run_command(std::string(LOCKSTEP_CLI_PATH) + " " + args, status);
}

model::Adapter adapter_on(const std::vector<model::Param>& params, float b_scale, std::uint32_t seed) {
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

class AdapterCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const fs::path tj = fs::path(LOCKSTEP_SHARED_TESTDATA) / "llama3" / "tokenizer.json";
    if (!fs::exists(tj)) return;
    dir_ = fs::temp_directory_path() / ("lockstep_adapter_cli_" + std::to_string(::getpid()));
    fs::create_directories(dir_ / "base");
    model::ModelConfig cfg = model::preset("llama-micro");
    cfg.vocab_size = 128256;
    cfg.d_model = 32;
    cfg.n_head = 2;
    cfg.n_kv_head = 1;
    cfg.head_dim = 16;
    cfg.d_ff = 64;
    cfg.tie_embeddings = true;
    auto m = model::make_cpu_model(cfg);
    model::testing::randomize(m->params(), 5, 0.5);
    load::write_hf_model((dir_ / "base").string(), cfg, m->params());
    fs::copy_file(tj, dir_ / "base" / "tokenizer.json");
    load::save_adapter((dir_ / "adapter").string(), adapter_on(m->params(), 0.5f, 1));
    load::save_adapter((dir_ / "zero").string(), adapter_on(m->params(), 0.0f, 1));
  }
  static void TearDownTestSuite() {
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  void SetUp() override {
    if (dir_.empty()) GTEST_SKIP() << "no " << LOCKSTEP_SHARED_TESTDATA << "/llama3/tokenizer.json";
  }
  static std::string generate(const std::string& flags, int* st) {
    return cli("generate --model " + (dir_ / "base").string() + " --prompt 'Once upon' --temperature 0 --max-tokens 8 " +
                   flags + " 2>&1",
               st);
  }
  static inline fs::path dir_;
};

TEST_F(AdapterCli, GenerateWithAnAdapter) {
  int st = -1;
  const std::string base = generate("", &st);
  ASSERT_EQ(st, 0) << base;
  const std::string adapted = generate("--adapter " + (dir_ / "adapter").string() + " --threads 1", &st);
  ASSERT_EQ(st, 0) << adapted;
  EXPECT_NE(adapted, base);  // the adapter changes the greedy text
  EXPECT_EQ(generate("--adapter " + (dir_ / "adapter").string() + " --threads 2", &st), adapted);
  // A lockstep checkpoint directory (--checkpoint) takes the adapter the same way.
  const std::string ck = cli("generate --checkpoint " + (dir_ / "base").string() + " --adapter " +
                                 (dir_ / "adapter").string() + " --prompt 'Once upon' --temperature 0 --max-tokens 8 2>&1",
                             &st);
  EXPECT_EQ(st, 0) << ck;
  EXPECT_EQ(ck, adapted);
  // PEFT's initialization (B = 0): the base's text.
  EXPECT_EQ(generate("--adapter " + (dir_ / "zero").string(), &st), base);
  // chat takes the flag too.
  const std::string c = cli("chat --model " + (dir_ / "base").string() + " --adapter " + (dir_ / "adapter").string() +
                                " --max-tokens 4 < /dev/null 2>&1",
                            &st);
  EXPECT_EQ(st, 0) << c;
}

TEST_F(AdapterCli, BadAdapterFlagsAreOneLine) {
  int st = -1;
  std::string out = generate("--adapter " + (dir_ / "none").string(), &st);
  EXPECT_EQ(st, 1) << out;
  EXPECT_NE(out.find("is not a directory"), std::string::npos) << out;
  EXPECT_EQ(out.find('\n'), out.size() - 1) << out;
  out = generate("--merge-adapter", &st);
  EXPECT_EQ(st, 2) << out;
  EXPECT_NE(out.find("--merge-adapter needs --adapter DIR"), std::string::npos) << out;
  out = generate("--adapter " + (dir_ / "adapter").string() + " --device cuda", &st);
  EXPECT_EQ(st, 2) << out;
  EXPECT_NE(out.find("--device cpu"), std::string::npos) << out;
  // An adapter for another model: the module named.
  model::Adapter wrong = load::load_adapter((dir_ / "adapter").string());
  wrong.tensors[0].in = 16;
  wrong.tensors[0].a.resize(4 * 16);
  load::save_adapter((dir_ / "wrong").string(), wrong);
  out = generate("--adapter " + (dir_ / "wrong").string(), &st);
  EXPECT_EQ(st, 2) << out;
  EXPECT_NE(out.find("adapter module 'model.layers.0.self_attn.q_proj' is [out 32, in 16]"), std::string::npos) << out;
  EXPECT_EQ(out.find('\n'), out.size() - 1) << out;
  out = cli("merge --base " + (dir_ / "base").string() + " --adapter " + (dir_ / "wrong").string() + " --out " +
                (dir_ / "m").string() + " 2>&1",
            &st);
  EXPECT_EQ(st, 2) << out;
  EXPECT_FALSE(fs::exists(dir_ / "m"));
}

// The merged files (HF directory and GGUF) hold W + BA·s: their logits are
// the unmerged adapter's to float rounding, not its bits.
TEST_F(AdapterCli, MergeWritesAModelCloseToTheUnmergedOne) {
  int st = -1;
  std::string out = cli("merge --base " + (dir_ / "base").string() + " --adapter " + (dir_ / "adapter").string() +
                            " --out " + (dir_ / "merged").string(),
                        &st);
  ASSERT_EQ(st, 0) << out;
  EXPECT_TRUE(fs::exists(dir_ / "merged" / "tokenizer.json"));
  out = cli("merge --base " + (dir_ / "base").string() + " --adapter " + (dir_ / "adapter").string() + " --out " +
                (dir_ / "merged.gguf").string(),
            &st);
  ASSERT_EQ(st, 0) << out;
  auto unmerged = load::make_adapted_model(load::load_model_file((dir_ / "base").string()),
                                           load::load_adapter((dir_ / "adapter").string()));
  auto base = load::make_loaded_model(load::load_model_file((dir_ / "base").string()));
  const std::vector<std::int32_t> ids = {128000, 12, 4031, 77, 9, 30000, 5};
  const auto want = unmerged->next_logits(ids, 1);
  const auto b = base->next_logits(ids, 1);
  for (const char* f : {"merged", "merged.gguf"}) {
    auto merged = load::make_loaded_model(load::load_model_file((dir_ / f).string()));
    const auto got = merged->next_logits(ids, 1);
    double diff = 0, moved = 0, top = 0;
    for (std::size_t i = 0; i < want.size(); ++i) {
      diff = std::max(diff, std::fabs(static_cast<double>(got[i]) - static_cast<double>(want[i])));
      moved = std::max(moved, std::fabs(static_cast<double>(b[i]) - static_cast<double>(want[i])));
      top = std::max(top, std::fabs(static_cast<double>(want[i])));
    }
    std::printf("%s: merged vs unmerged max |diff| %.3g, the adapter moved the logits by up to %.3g (max |logit| %.3g)\n",
                f, diff, moved, top);
    EXPECT_LT(diff, 1e-4 * top) << f;
    EXPECT_GT(moved, 0.05 * top) << f;
  }
}

}  // namespace
