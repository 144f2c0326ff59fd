// `lockstep chat` and `lockstep generate --model` on a Hugging Face directory
// (a random llama with LLaMA-3's vocabulary, written by load::write_hf_model,
// and ../shared/testdata/llama3/tokenizer.json): replies stream one line per
// turn, are the same for a seed on 1 and 2 threads, and a context too small
// for the conversation is said, not crashed on.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "../common/run_command.hpp"
#include "../model/model_test_util.hpp"
#include "lockstep/load/model_file.hpp"
#include "lockstep/model/model.hpp"

namespace {

namespace fs = std::filesystem;
using namespace lockstep;

std::string cli(const std::string& args, int* status) {
  return test::run_command(std::string(LOCKSTEP_CLI_PATH) + " " + args, status);
}

class ChatCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const fs::path tj = fs::path(LOCKSTEP_SHARED_TESTDATA) / "llama3" / "tokenizer.json";
    if (!fs::exists(tj)) return;
    dir_ = fs::temp_directory_path() / ("lockstep_chat_cli_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
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
    load::write_hf_model(dir_.string(), cfg, m->params());
    fs::copy_file(tj, dir_ / "tokenizer.json");
  }
  static void TearDownTestSuite() {
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  void SetUp() override {
    if (dir_.empty()) GTEST_SKIP() << "no " << LOCKSTEP_SHARED_TESTDATA << "/llama3/tokenizer.json";
  }
  // stdout and stderr together when `with_stderr`.
  static std::string chat(const std::string& input, const std::string& flags, int* st, bool with_stderr = false) {
    const fs::path in = dir_ / "input.txt";
    std::FILE* f = std::fopen(in.c_str(), "w");
    std::fputs(input.c_str(), f);
    std::fclose(f);
    return cli("chat --model " + dir_.string() + " " + flags + " < " + in.string() + (with_stderr ? "" : " 2>/dev/null"),
               st);
  }
  static inline fs::path dir_;
};

TEST_F(ChatCli, RepliesOneLineATurnTheSameForASeedOnAnyThreadCount) {
  int st = -1;
  const std::string a = chat("Hello there\nAnd again?\n", "--max-tokens 6 --seed 3 --threads 1", &st);
  EXPECT_EQ(st, 0) << a;
  EXPECT_FALSE(a.empty());
  EXPECT_EQ(chat("Hello there\nAnd again?\n", "--max-tokens 6 --seed 3 --threads 2", &st), a);
  EXPECT_NE(chat("Hello there\nAnd again?\n", "--max-tokens 6 --seed 4 --threads 1", &st), a);
}

TEST_F(ChatCli, AConversationPastTheContextIsSaidAndTheChatGoesOn) {
  int st = -1;
  const std::string out = chat("a message far longer than eight tokens of context, surely\n/reset\nhi\n",
                               "--context 8 --max-tokens 4", &st, true);
  EXPECT_EQ(st, 0) << out;
  EXPECT_NE(out.find("context holds 8"), std::string::npos) << out;
}

TEST_F(ChatCli, GenerateReadsTheModelDirectory) {
  int st = -1;
  const std::string out = cli("generate --model " + dir_.string() + " --prompt 'Once' --max-tokens 5 --temperature 0", &st);
  EXPECT_EQ(st, 0) << out;
  EXPECT_EQ(out.rfind("Once", 0), 0u) << out;
  const std::string bad = cli("generate --model " + (dir_ / "missing.gguf").string(), &st);
  EXPECT_NE(st, 0) << bad;
}

}  // namespace
