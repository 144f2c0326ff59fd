// `lockstep generate --adapter`, `lockstep chat --adapter` and `lockstep merge`
// as a user runs them, on Hugging Face directories (a random llama and BitNet
// with LLaMA-3's vocabulary and ../shared/testdata/llama3/tokenizer.json) and
// PEFT-format adapters written by load::save_adapter (adapter_cli_fixture.hpp).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <string_view>

#include "../common/run_command.hpp"
#include "../model/model_test_util.hpp"
#include "../common/recompute_model.hpp"
#include "adapter_cli_fixture.hpp"
#include "lockstep/infer/generate.hpp"
#include "lockstep/load/adapted_model.hpp"
#include "lockstep/load/adapter.hpp"
#include "lockstep/load/model_file.hpp"
#include "lockstep/model/model.hpp"
#include "lockstep/tok/bpe.hpp"

namespace {

namespace fs = std::filesystem;
using namespace lockstep;
using test::AdapterCli;
using test::cli;

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

// `generate --adapter` decodes with the KV cache on the model's LoRA layers
// (load/adapted_model.hpp): its greedy text is the text infer::generate makes
// when every token's logits are a window recompute (next_logits over the
// sequence so far) — of the spec stand-in (ops::LoraLinear::forward at each
// adapted projection) for the llama, of the layers for the BitNet base, which
// only they adapt.
TEST_F(AdapterCli, GenerateWithAnAdapterIsTheWindowRecomputesText) {
  for (const std::string base : {"base", "bitnet"}) {
    const std::string adapter = base == "base" ? "adapter" : "bitnet-adapter";
    int st = -1;
    const std::string got = generate("--adapter " + (dir_ / adapter).string() + " --threads 2", &st, base);
    ASSERT_EQ(st, 0) << got;
    load::LoadedModel loaded = load::load_model_file((dir_ / base).string());
    const model::Adapter a = load::load_adapter((dir_ / adapter).string());
    auto unmerged = base == "base" ? load::make_spec_adapted_model(std::move(loaded), a)
                                   : load::make_adapted_model(std::move(loaded), a);
    test::RecomputeModel recompute(*unmerged);
    const tok::BpeTokenizer tok = tok::load_hf_tokenizer_json(dir_ / base / "tokenizer.json");
    infer::GenerateOptions g;
    g.sampling.temperature = 0;
    g.max_tokens = 8;
    g.threads = 1;
    std::string want = "Once upon";
    const auto ids = infer::generate(recompute, tok, "Once upon", g, [&](std::string_view text) { want += text; });
    want += "\n";
    std::printf("%s + adapter, KV-cache decode: %s", base.c_str(), got.c_str());
    EXPECT_EQ(got, want) << base;
    EXPECT_GE(ids.size(), 1u) << base;
    // The adapter changes the text (so the comparison can fail).
    EXPECT_NE(generate("", &st, base), got) << base;
  }
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
