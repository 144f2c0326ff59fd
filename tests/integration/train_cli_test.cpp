// `lockstep train` and `lockstep generate` as a user runs them: a short run on
// a micro preset, its files, deterministic generation, Ctrl-C, resume, and
// the messages for bad flags.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "../common/sample_text.hpp"

namespace fs = std::filesystem;

namespace {

struct Result {
  int status;
  std::string out;
};

// Runs the lockstep binary with `args` (stderr merged into stdout).
Result run(const std::string& args) {
  const std::string cmd = std::string(LOCKSTEP_CLI_PATH) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return {-1, "popen failed"};
  std::string out;
  std::array<char, 4096> buf{};
  while (fgets(buf.data(), static_cast<int>(buf.size()), p)) out += buf.data();
  const int rc = pclose(p);
  return {WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, out};
}

std::string sample_text(int paragraphs) { return lockstep::test::sample_text(paragraphs, 4242u); }

class TrainCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("lockstep_train_cli_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "text");
    std::ofstream(dir_ / "text" / "one.txt") << sample_text(200);
    std::ofstream(dir_ / "text" / "two.txt") << sample_text(100);
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }
  static std::string micro_flags() {
    return "--model gpt2-micro --data " + (dir_ / "text").string() +
           " --vocab 300 --batch 4 --seq 32 --lr 3e-3 --warmup 2 --threads 2 --log-every 5";
  }
  static fs::path dir_;
};
fs::path TrainCli::dir_;

}  // namespace

TEST_F(TrainCli, ShortRunWritesMetricsAndACheckpointThatGenerates) {
  const fs::path out = dir_ / "run";
  const Result r = run("train " + micro_flags() + " --steps 20 --eval-every 10 --out " + out.string());
  std::printf("%s", r.out.c_str());
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("step 20/20"), std::string::npos);
  EXPECT_NE(r.out.find("final validation at step 20"), std::string::npos);
  EXPECT_NE(r.out.find("bits/byte"), std::string::npos);
  EXPECT_NE(r.out.find("generate with: lockstep generate --checkpoint"), std::string::npos);

  // metrics.jsonl: 20 train lines, validation at 10 and at the end.
  std::ifstream in(out / "metrics.jsonl");
  std::string line;
  int train = 0, val = 0;
  double first_loss = 0, last_loss = 0;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line);
    if (j["type"] == "train") {
      ++train;
      for (const char* k : {"loss", "lr", "grad_norm", "tokens", "tok_per_s", "elapsed_s"})
        EXPECT_TRUE(j.contains(k)) << k;
      (train == 1 ? first_loss : last_loss) = j["loss"].get<double>();
    } else {
      ++val;
      EXPECT_GT(j["bpb"].get<double>(), 0.5);
    }
  }
  EXPECT_EQ(train, 20);
  EXPECT_EQ(val, 2);
  EXPECT_LT(last_loss, first_loss);
  std::printf("training loss %.3f -> %.3f over 20 steps\n", first_loss, last_loss);
  EXPECT_TRUE(fs::exists(out / "latest"));
  EXPECT_TRUE(fs::exists(out / "step-00000020" / "model.safetensors"));
  EXPECT_TRUE(fs::exists(out / "step-00000020" / "tokenizer.json"));
  EXPECT_TRUE(fs::exists(out / "run.json"));

  // Generation: deterministic for a seed, different for another.
  const std::string gen = "generate --checkpoint " + out.string() + " --prompt \"the\" --max-tokens 30 --top-k 0 "
                          "--top-p 1 --temperature 1 --seed ";
  const Result a = run(gen + "3"), b = run(gen + "3"), c = run(gen + "4");
  ASSERT_EQ(a.status, 0) << a.out;
  EXPECT_EQ(a.out, b.out);
  EXPECT_NE(a.out, c.out);
  EXPECT_EQ(a.out.rfind("the", 0), 0u) << a.out;  // the prompt, then the continuation
  EXPECT_GT(a.out.size(), 20u);
  std::printf("generate seed 3: %s", a.out.c_str());
  std::printf("generate seed 4: %s", c.out.c_str());
  const Result greedy = run("generate --checkpoint " + out.string() + "/step-00000020 --temperature 0 --max-tokens 10");
  EXPECT_EQ(greedy.status, 0) << greedy.out;

  // A second fresh run into the same directory is refused, pointing at --resume.
  const Result again = run("train " + micro_flags() + " --steps 20 --out " + out.string());
  EXPECT_EQ(again.status, 2) << again.out;
  EXPECT_NE(again.out.find("--resume"), std::string::npos) << again.out;
  // Resuming with a different learning rate is refused, naming the flag.
  const Result lr = run("train --resume " + out.string() + " --lr 1e-2");
  EXPECT_EQ(lr.status, 2) << lr.out;
  EXPECT_NE(lr.out.find("--lr 0.01 differs from the checkpoint's run"), std::string::npos) << lr.out;
  // A complete run resumed with more steps continues.
  const Result more = run("train --resume " + out.string() + " --steps 24");
  EXPECT_EQ(more.status, 0) << more.out;
  EXPECT_NE(more.out.find("resuming"), std::string::npos) << more.out;
  EXPECT_TRUE(fs::exists(out / "step-00000024"));
}

TEST_F(TrainCli, BadFlagsAreRejectedNamingTheFlag) {
  const std::string base = "train " + micro_flags() + " --out " + (dir_ / "bad").string() + " ";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--lr abc", "--lr: expected a number, got 'abc'"},
      {"--lr -1", "--lr must be a finite number > 0, got -1"},
      {"--steps 2.5", "--steps: expected a whole number, got 2.5"},
      {"--steps 0", "--steps must be >= 1, got 0"},
      {"--batch 0", "--batch must be in [1, 65536], got 0"},
      {"--warmup 50 --steps 10", "--warmup must be in [0, steps], got 50"},
      {"--beta2 1", "--beta2 must be in [0, 1), got 1"},
      {"--seq 1000", "--seq 1000 exceeds the context of --model gpt2-micro (64 positions)"},
      {"--model nope", "unknown model preset 'nope'"},
      {"--max-minutes -1", "--max-minutes must be >= 0"},
      {"--device tpu", "--device must be cpu or cuda, got 'tpu'"},
      {"--activations some", "--activations must be keep or recompute, got 'some'"},
      {"--audit sometimes", "--audit must be stop, warn or off, got 'sometimes'"},
      {"--linear int8", "--linear must be float or units, got 'int8'"},
      {"--unit-backward", "--unit-backward requires --linear units (got --linear float)"},
      {"--units-head", "--units-head requires --linear units (got --linear float)"},
      {"--linear units --model bitnet-micro", "--linear units: --model bitnet-micro is a bitnet model"},
  };
  for (const auto& [flags, msg] : cases) {
    const Result r = run(base + flags);
    EXPECT_EQ(r.status, 2) << flags << "\n" << r.out;
    EXPECT_NE(r.out.find(msg), std::string::npos) << flags << "\n" << r.out;
  }
  const Result g = run("generate --checkpoint " + (dir_ / "nothing").string() + " --top-p 2");
  EXPECT_EQ(g.status, 2) << g.out;
  EXPECT_NE(g.out.find("--top-p must be in (0, 1]"), std::string::npos) << g.out;
  const Result missing = run("generate --checkpoint " + (dir_ / "nothing").string());
  EXPECT_EQ(missing.status, 1) << missing.out;
  EXPECT_NE(missing.out.find("does not exist"), std::string::npos) << missing.out;
  // Scientific notation is accepted everywhere a number is.
  const Result sci = run(base + "--steps 2e0 --lr 2e-4 --eval-tokens 6.4e1 --save-every 0");
  EXPECT_EQ(sci.status, 0) << sci.out;
}

TEST_F(TrainCli, CtrlCSavesAndResumeFinishes) {
  const fs::path out = dir_ / "interrupted";
  const std::string args = "train " + micro_flags() + " --steps 100000 --max-minutes 0 --out " + out.string();
  const std::string log = (dir_ / "interrupted.log").string();
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const std::string cmd = "exec " + std::string(LOCKSTEP_CLI_PATH) + " " + args + " > " + log + " 2>&1";
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  // Wait until a few steps are logged, then Ctrl-C.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  int lines = 0;
  while (std::chrono::steady_clock::now() < deadline && lines < 3) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::ifstream in(out / "metrics.jsonl");
    std::string l;
    lines = 0;
    while (std::getline(in, l)) ++lines;
  }
  ASSERT_GE(lines, 3);
  kill(pid, SIGINT);
  int status = 0;
  waitpid(pid, &status, 0);
  std::ostringstream ss;
  ss << std::ifstream(log).rdbuf();
  const std::string text = ss.str();
  std::printf("%s", text.c_str());
  ASSERT_TRUE(WIFEXITED(status)) << "killed by a signal instead of exiting cleanly";
  EXPECT_EQ(WEXITSTATUS(status), 0) << text;
  EXPECT_NE(text.find("interrupted at step"), std::string::npos) << text;
  EXPECT_NE(text.find("continue with: lockstep train --resume"), std::string::npos) << text;
  ASSERT_TRUE(fs::exists(out / "latest"));
  std::string latest;
  std::getline(std::ifstream(out / "latest"), latest);
  const long step = std::stol(latest.substr(5));
  EXPECT_GE(step, 3);

  // Resume with a step count just above the interruption: it finishes there.
  const Result r = run("train --resume " + out.string() + " --steps " + std::to_string(step + 3));
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("resuming"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("final validation at step " + std::to_string(step + 3)), std::string::npos) << r.out;
}
