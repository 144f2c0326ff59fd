// The checkpoint format's proof: a lockstep model saved by save_hf_model loads
// in Hugging Face transformers (GPT2LMHeadModel, LlamaForCausalLM) with no
// missing or unexpected tensors and gives the same next-token logits
// (tests/integration/hf_check.py). Skips where torch/transformers are not
// importable (this machine); the GPU machine has both.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "lockstep/model/model.hpp"
#include "lockstep/num/rng.hpp"
#include "lockstep/train/checkpoint.hpp"

namespace fs = std::filesystem;
using namespace lockstep;

namespace {

struct Result {
  int status;
  std::string out;
};

Result run(const std::string& cmd) {
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return {-1, "popen failed"};
  std::string out;
  std::array<char, 4096> buf{};
  while (fgets(buf.data(), static_cast<int>(buf.size()), p)) out += buf.data();
  const int rc = pclose(p);
  return {WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, out};
}

// Every parameter moved off its initial value (biases and norms too), so a
// tensor stored in the wrong layout or under the wrong name changes the logits.
void perturb(model::Model& m, std::uint64_t seed) {
  auto& ps = m.params();
  for (std::size_t i = 0; i < ps.size(); ++i) {
    std::vector<float> noise(ps[i].value.size());
    num::rng::fill_normal(noise.data(), noise.size(), seed, 1000 + i, 0, 0.0f, 0.05f, 1);
    for (std::size_t k = 0; k < noise.size(); ++k) ps[i].value[k] += noise[k];
  }
}

void check_in_transformers(const std::string& preset, model::RopeLayout layout) {
  model::ModelConfig c = model::preset(preset);
  c.vocab_size = 300;
  c.bos_token = c.eos_token = 299;  // inside the vocabulary, as a trained run sets them
  c.rope_layout = layout;
  const fs::path dir = fs::temp_directory_path() /
                       ("lockstep_hf_export_" + std::to_string(::getpid()) + "_" + preset +
                        (layout == model::RopeLayout::Interleaved ? "_interleaved" : ""));
  fs::remove_all(dir);
  auto m = model::make_cpu_model(c);
  m->init(3);
  perturb(*m, 4);
  train::save_hf_model(dir.string(), *m);

  nlohmann::json expected;
  for (std::int64_t len : {std::int64_t{1}, std::int64_t{7}, c.max_seq}) {
    std::vector<std::int32_t> ids;
    for (std::int64_t i = 0; i < len; ++i)
      ids.push_back(static_cast<std::int32_t>(num::rng::bits32(5, static_cast<std::uint64_t>(len), static_cast<std::uint64_t>(i)) % 300u));
    expected["sequences"].push_back(ids);
    expected["logits"].push_back(m->next_logits(ids, 2));
  }
  std::ofstream(dir / "expected.json") << expected.dump();

  const Result r = run("python3 " + std::string(LOCKSTEP_TEST_DIR) + "/hf_check.py " + dir.string());
  std::printf("%s %s:\n%s", preset.c_str(), layout == model::RopeLayout::Interleaved ? "(interleaved RoPE)" : "",
              r.out.c_str());
  fs::remove_all(dir);
  if (r.status == 77) GTEST_SKIP() << r.out;
  EXPECT_EQ(r.status, 0) << r.out;
}

}  // namespace

TEST(HfExport, Gpt2LoadsInGPT2LMHeadModel) { check_in_transformers("gpt2-micro", model::RopeLayout::RotateHalf); }

TEST(HfExport, LlamaLoadsInLlamaForCausalLM) { check_in_transformers("llama-micro", model::RopeLayout::RotateHalf); }

// A model computing RoPE on interleaved pairs is exported with its q/k rows
// permuted into HF's rotate-half order: same logits in LlamaForCausalLM.
TEST(HfExport, InterleavedRopeLlamaLoadsInLlamaForCausalLM) {
  check_in_transformers("llama-micro", model::RopeLayout::Interleaved);
}
