// `lockstep finetune` as a user runs it: every flag with its default in
// --help; a bad flag or a malformed record refused with one line naming it
// and exit 2; a short run on a lockstep checkpoint writes its state and metrics.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "../common/run_command.hpp"
#include "micro_checkpoint.hpp"

namespace fs = std::filesystem;

namespace {

std::string cli(const std::string& args, int* status) {
  return lockstep::test::run_command(std::string(LOCKSTEP_CLI_PATH) + " " + args + " 2>&1", status);
}

TEST(FinetuneCli, HelpShowsEveryDefault) {
  int st = -1;
  const std::string h = cli("finetune --help", &st);
  EXPECT_EQ(st, 0);
  for (const char* want : {"--rank NUM=8", "--alpha NUM=16", "--dropout NUM=0.05", "--targets TEXT=[q_proj,v_proj]",
                           "--lr NUM=0.0002", "--beta1 NUM=0.9", "--beta2 NUM=0.999", "--weight-decay NUM=0.01",
                           "--warmup-ratio NUM=0.06", "--clip NUM=1", "--rslora", "--resume", "--base", "--data",
                           "--out", "--device TEXT=cpu"})
    EXPECT_NE(h.find(want), std::string::npos) << want << "\n" << h;
}

TEST(FinetuneCli, RefusesBadInputByNameAndRunsOnACheckpoint) {
  const fs::path dir = fs::temp_directory_path() / ("lockstep_finetune_cli_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path ck = lockstep::test::micro_checkpoint(dir / "base");
  const fs::path good = dir / "good.jsonl", bad = dir / "bad.jsonl";
  std::ofstream(good) << "{\"prompt\": \"the cat\", \"completion\": \" sat\"}\n{\"prompt\": \"the rat\", \"completion\": \" ate\"}\n";
  std::ofstream(bad) << "{\"prompt\": \"the cat\", \"completion\": \" sat\"}\n{\"prompt\": \"the rat\",\n";
  int st = -1;
  std::string out = cli("finetune --base " + ck.string() + " --data " + bad.string() + " --out " + (dir / "o").string(), &st);
  EXPECT_EQ(st, 2) << out;
  EXPECT_NE(out.find(bad.string() + ":2: not a JSON record"), std::string::npos) << out;
  out = cli("finetune --base " + ck.string() + " --data " + good.string() + " --out " + (dir / "o").string() +
                " --lr fast", &st);
  EXPECT_EQ(st, 2) << out;
  EXPECT_NE(out.find("--lr"), std::string::npos) << out;
  out = cli("finetune --base " + ck.string() + " --data " + good.string() + " --out " + (dir / "o").string() +
                " --device tpu", &st);
  EXPECT_EQ(st, 2) << out;
  EXPECT_NE(out.find("--device"), std::string::npos) << out;
  out = cli("finetune --base " + ck.string() + " --data " + good.string() + " --out " + (dir / "o").string() +
                " --targets c_attn --steps 2", &st);
  EXPECT_NE(st, 0) << out;
  EXPECT_NE(out.find("c_attn"), std::string::npos) << out;
  out = cli("finetune --base " + ck.string() + " --data " + good.string() + " --out " + (dir / "o").string() +
                " --steps 3 --batch 2 --lr 1e-3 --threads 1", &st);
  EXPECT_EQ(st, 0) << out;
  EXPECT_TRUE(fs::exists(dir / "o" / "lora_state.safetensors"));
  EXPECT_TRUE(fs::exists(dir / "o" / "finetune_state.json"));
  // The adapter in PEFT's format, which generate --adapter reads.
  EXPECT_TRUE(fs::exists(dir / "o" / "adapter" / "adapter_config.json"));
  EXPECT_TRUE(fs::exists(dir / "o" / "adapter" / "adapter_model.safetensors"));
  out = cli("generate --checkpoint " + ck.string() + " --adapter " + (dir / "o" / "adapter").string() +
                " --prompt \"the cat\" --max-tokens 4 --temperature 0",
            &st);
  EXPECT_EQ(st, 0) << out;
  std::ifstream m(dir / "o" / "metrics.jsonl");
  int lines = 0;
  for (std::string l; std::getline(m, l);) ++lines;
  EXPECT_EQ(lines, 3);
  fs::remove_all(dir);
}

}  // namespace
