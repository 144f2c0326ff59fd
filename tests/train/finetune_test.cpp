// LoRA finetuning (train/finetune.hpp, data/sft.hpp):
//  * SFT records: the loss mask on completion / assistant tokens; a malformed
//    record is refused naming the file and the line;
//  * the frozen base is bit-unchanged by a finetune, and only adapter tensors move;
//  * a run stopped and resumed ends on the same adapter bits as one run through;
//  * THE FACTS DEMO: a tiny LLaMA trained here on the embedded Austen corpus,
//    then finetuned on ten invented facts, answers at least 9 of them greedily.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <cstring>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "lockstep/data/corpus.hpp"
#include "lockstep/data/sft.hpp"
#include "lockstep/model/lora_params.hpp"
#include "lockstep/model/model.hpp"
#include "lockstep/num/fp.hpp"
#include "lockstep/num/rng.hpp"
#include "lockstep/ops/quant.hpp"
#include "lockstep/tensor/storage.hpp"
#include "lockstep/tok/tokenizer.hpp"
#include "lockstep/train/finetune.hpp"
#include "lockstep/train/optim.hpp"
#include "lockstep/train/step.hpp"

#include "facts_fixture.hpp"

namespace fs = std::filesystem;
namespace m = lockstep::model;
namespace tr = lockstep::train;
namespace dt = lockstep::data;
using lockstep::tok::ByteTokenizer;
using namespace lockstep::test::facts;

namespace {

TEST(Sft, PromptCompletionMasksThePrompt) {
  ByteTokenizer tok;
  const auto ex = dt::parse_sft_jsonl(R"({"prompt": "ab", "completion": "cd"})", "x.jsonl", tok);
  ASSERT_EQ(ex.size(), 1u);
  EXPECT_EQ(ex[0].tokens, (std::vector<std::int32_t>{'a', 'b', 'c', 'd'}));
  EXPECT_EQ(ex[0].scored, (std::vector<std::uint8_t>{0, 0, 1, 1}));
  std::vector<std::int32_t> in, tg;
  dt::sft_window(ex[0], 64, in, tg);
  EXPECT_EQ(in, (std::vector<std::int32_t>{'a', 'b', 'c'}));
  EXPECT_EQ(tg, (std::vector<std::int32_t>{-1, 'c', 'd'}));
}

TEST(Sft, ChatScoresTheAssistantOnly) {
  ByteTokenizer tok;
  const auto ex = dt::parse_sft_jsonl(
      R"({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]})", "c.jsonl", tok);
  ASSERT_EQ(ex.size(), 1u);
  std::string text(ex[0].tokens.begin(), ex[0].tokens.end()), scored;
  for (std::size_t i = 0; i < text.size(); ++i)
    if (ex[0].scored[i]) scored.push_back(text[i]);
  EXPECT_EQ(text, "User: hi\nAssistant: yo\n");
  EXPECT_EQ(scored, "yo\n");
}

TEST(Sft, MalformedRecordNamesFileAndLine) {
  ByteTokenizer tok;
  const std::vector<std::pair<std::string, std::string>> bad{
      {"{\"prompt\": \"a\", \"completion\": \"b\"}\n{\"prompt\": \"a\"\n", "data.jsonl:2: not a JSON record"},
      {"{\"prompt\": \"a\", \"completion\": \"b\"}\n\n{\"prompt\": \"a\"}\n", "data.jsonl:3: the record has no \"completion\""},
      {"[1, 2]\n", "data.jsonl:1: a record must be a JSON object"},
      {"{\"text\": \"a\"}\n", "data.jsonl:1: a record needs"},
      {"{\"prompt\": 3, \"completion\": \"b\"}\n", "data.jsonl:1: \"prompt\" must be a string"},
      {"{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}]}\n", "data.jsonl:1: no assistant message"},
      {"{\"messages\": [{\"role\": \"user\"}]}\n", "data.jsonl:1 (message 1): the record has no \"content\""},
  };
  for (const auto& [text, want] : bad) {
    try {
      dt::parse_sft_jsonl(text, "data.jsonl", tok);
      ADD_FAILURE() << "accepted: " << text;
    } catch (const std::runtime_error& e) {
      EXPECT_EQ(std::string(e.what()).rfind(want, 0), 0u) << e.what() << "\n wanted: " << want;
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << "one line";
    }
  }
}

TEST(Finetune, FactsDemoTeachesTenInventedFacts) {
  std::string rdb;
  try {
    rdb = dt::find_austen_rdb();
  } catch (const std::runtime_error& e) {
    GTEST_SKIP() << e.what();
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto model = austen_base(rdb, 400);
  const double base_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ByteTokenizer tok;
  const auto data = dt::parse_sft_jsonl(facts_jsonl(), "facts.jsonl", tok);
  std::size_t before = 0;
  for (const auto& [p, c] : kFacts) before += greedy(*model, p, c.size()) == c;
  const auto dir = temp_dir("facts");
  const auto rep = tr::finetune(*model, data, facts_config(), dir.string());
  std::size_t right = 0;
  for (const auto& [p, c] : kFacts) {
    const std::string got = greedy(*model, p, c.size());
    right += got == c;
    std::printf("  %-50s -> \"%s\"%s\n", p.c_str(), got.c_str(), got == c ? "" : "   (wrong)");
  }
  std::printf("facts: %zu/10 after finetuning (%zu before); base %.1f s, finetune %lld steps %.1f s, last loss %.4f, "
              "adapter %016llx\n",
              right, before, base_s, static_cast<long long>(rep.step), rep.seconds, static_cast<double>(rep.last_loss),
              static_cast<unsigned long long>(rep.adapter_hash));
  EXPECT_EQ(before, 0u);
  EXPECT_GE(right, 9u);
  fs::remove_all(dir);
}

TEST(Finetune, FrozenBaseIsBitUnchangedAndOnlyAdaptersMove) {
  for (const char* preset : {"llama-micro", "bitnet-micro"}) {
    auto model = m::make_cpu_model(m::preset(preset));
    model->init(3);
    const std::vector<m::Param> before = model->params();
    ByteTokenizer tok;
    const auto data = dt::parse_sft_jsonl(facts_jsonl(), "facts.jsonl", tok);
    auto cfg = facts_config();
    cfg.steps = 6;
    const auto dir = temp_dir(std::string("frozen_") + preset);
    const auto rep = tr::finetune(*model, data, cfg, dir.string());
    const auto& after = model->params();
    ASSERT_GT(after.size(), before.size());
    // What the run held for the adapters, counted: value + gradient in the
    // model, two AdamW moments in the trainer; the base its values alone.
    // A BitNet base's projections are held as their 2-bit codes and scale
    // (train::FinetuneConfig::base_as_codes), the rest as F32 values.
    std::size_t adapter_floats = 0, held = 0, base_bytes = 0, as_codes = 0;
    for (std::size_t i = 0; i < after.size(); ++i) {
      held += m::bytes_held(after[i]);
      if (i >= before.size()) adapter_floats += after[i].value.size();
      else if (after[i].dtype == lockstep::tensor::DType::ternary2) base_bytes += m::bytes_held(after[i]), ++as_codes;
      else base_bytes += before[i].value.size() * sizeof(float);
    }
    EXPECT_EQ(as_codes, std::string(preset) == "bitnet-micro" ? 2u * 7u : 0u) << preset;
    EXPECT_EQ(rep.moment_bytes, 2 * adapter_floats * sizeof(float)) << preset << ": AdamW moments for the adapters only";
    EXPECT_EQ(held, base_bytes + 2 * adapter_floats * sizeof(float)) << preset << ": the frozen base holds no gradient";
    for (std::size_t i = 0; i < before.size(); ++i) {
      ASSERT_EQ(after[i].name, before[i].name);
      EXPECT_FALSE(after[i].trainable);
      EXPECT_EQ(after[i].grad.capacity(), 0u) << preset << " " << before[i].name << " holds a gradient buffer";
      if (after[i].dtype == lockstep::tensor::DType::ternary2) {  // the codes and scale of the unchanged masters
        const auto q = lockstep::ops::quantize_ternary(before[i].value.data(), before[i].value.size());
        EXPECT_EQ(lockstep::tensor::codes_of(after[i].frozen_value), q.q) << preset << " " << before[i].name;
        EXPECT_EQ(after[i].frozen_value.scales()[0], q.scale) << preset << " " << before[i].name;
        EXPECT_EQ(after[i].value.capacity(), 0u) << preset << " " << before[i].name << " holds floats";
        continue;
      }
      EXPECT_EQ(std::memcmp(after[i].value.data(), before[i].value.data(), before[i].value.size() * sizeof(float)), 0)
          << preset << " " << before[i].name << " moved";
    }
    bool b_moved = false;
    for (std::size_t i = before.size(); i < after.size(); ++i)
      if (after[i].name.find("lora_B") != std::string::npos)
        for (float v : after[i].value) b_moved |= v != 0.0f;
    EXPECT_TRUE(b_moved) << preset;
    fs::remove_all(dir);
  }
}

TEST(Finetune, ResumeIsBitExact) {
  ByteTokenizer tok;
  const auto data = dt::parse_sft_jsonl(facts_jsonl(), "facts.jsonl", tok);
  auto cfg = facts_config();
  cfg.steps = 8;
  cfg.save_every = 3;
  const auto d1 = temp_dir("whole"), d2 = temp_dir("resumed");
  auto a = m::make_cpu_model(m::preset("llama-micro"));
  a->init(3);
  const auto whole = tr::finetune(*a, data, cfg, d1.string());
  auto b = m::make_cpu_model(m::preset("llama-micro"));
  b->init(3);
  tr::FinetuneIo stop;
  stop.stop_after = 5;
  const auto part = tr::finetune(*b, data, cfg, d2.string(), stop);
  EXPECT_EQ(part.step, 5);
  EXPECT_NE(part.adapter_hash, whole.adapter_hash);
  auto c = m::make_cpu_model(m::preset("llama-micro"));
  c->init(3);
  tr::FinetuneIo resume;
  resume.resume = true;
  const auto rest = tr::finetune(*c, data, cfg, d2.string(), resume);
  EXPECT_EQ(rest.step, 8);
  EXPECT_EQ(rest.adapter_hash, whole.adapter_hash);
  // The metrics agree line by line (a resumed run keeps its first 5 lines).
  auto lines = [](const fs::path& p) {
    std::ifstream f(p / "metrics.jsonl");
    std::vector<std::string> v;
    for (std::string l; std::getline(f, l);) v.push_back(l.substr(0, l.find(",\"tokens\"")));
    return v;
  };
  EXPECT_EQ(lines(d1), lines(d2));
  // Another setting refuses to resume the run.
  auto d = m::make_cpu_model(m::preset("llama-micro"));
  d->init(3);
  cfg.lr = 1e-3;
  EXPECT_THROW(tr::finetune(*d, data, cfg, d2.string(), resume), std::runtime_error);
  // The saved adapter reloads into a fresh base with the same logits.
  auto e = m::make_cpu_model(m::preset("llama-micro"));
  e->init(3);
  cfg.lr = facts_config().lr;
  tr::load_lora_state(*e, cfg, d1.string());
  const std::vector<std::int32_t> toks{'T', 'h', 'e'};
  const auto la = a->next_logits(toks, 1), le = e->next_logits(toks, 1);
  ASSERT_EQ(la.size(), le.size());
  for (std::size_t i = 0; i < la.size(); ++i) ASSERT_EQ(lockstep::num::bits_of(la[i]), lockstep::num::bits_of(le[i]));
  fs::remove_all(d1);
  fs::remove_all(d2);
}

// A CPU model that offers step stages (the trainer's host stages over
// itself), as the CUDA model offers its device's: finetune then runs its steps
// through train::run_step, the path it takes on the CUDA model.
class StagedCpuModel final : public m::Model {
 public:
  explicit StagedCpuModel(const m::ModelConfig& cfg) : inner_(m::make_cpu_model(cfg)), stages_(*inner_, opt_) {}
  const m::ModelConfig& config() const override { return inner_->config(); }
  std::vector<m::Param>& params() override { return inner_->params(); }
  const std::vector<m::Param>& params() const override { return std::as_const(*inner_).params(); }
  void init(std::uint64_t seed) override { inner_->init(seed); }
  float forward_backward(std::span<const std::int32_t> in, std::span<const std::int32_t> tg, std::int64_t b,
                         std::int64_t s, bool acc, int threads) override {
    return inner_->forward_backward(in, tg, b, s, acc, threads);
  }
  float loss(std::span<const std::int32_t> in, std::span<const std::int32_t> tg, std::int64_t b, std::int64_t s,
             int threads) override {
    return inner_->loss(in, tg, b, s, threads);
  }
  std::vector<float> next_logits(std::span<const std::int32_t> t, int threads) override {
    return inner_->next_logits(t, threads);
  }
  void set_recompute(bool r) override { inner_->set_recompute(r); }
  void set_lora(const m::LoraRun& run) override { inner_->set_lora(run); }
  m::StepStages* step_stages() override {
    ++stage_calls;
    return &stages_;
  }
  int stage_calls = 0;

 private:
  std::unique_ptr<m::Model> inner_;
  tr::OptimizerState opt_;
  tr::HostStepStages stages_;
};

TEST(Finetune, TheStepStagesPathEndsOnTheHostLoopsBits) {
  ByteTokenizer tok;
  const auto data = dt::parse_sft_jsonl(facts_jsonl(), "facts.jsonl", tok);
  auto cfg = facts_config();
  cfg.steps = 8;
  cfg.save_every = 3;
  const auto d1 = temp_dir("host_loop"), d2 = temp_dir("stages"), d3 = temp_dir("stages_resumed");
  auto a = m::make_cpu_model(m::preset("llama-micro"));
  a->init(3);
  const auto host = tr::finetune(*a, data, cfg, d1.string());
  StagedCpuModel b(m::preset("llama-micro"));
  b.init(3);
  const auto staged = tr::finetune(b, data, cfg, d2.string());
  EXPECT_GT(b.stage_calls, 0);
  EXPECT_EQ(staged.adapter_hash, host.adapter_hash);
  // Stopped and resumed on the stages: the moments go over and come back.
  StagedCpuModel c(m::preset("llama-micro"));
  c.init(3);
  tr::FinetuneIo stop;
  stop.stop_after = 5;
  tr::finetune(c, data, cfg, d3.string(), stop);
  StagedCpuModel d(m::preset("llama-micro"));
  d.init(3);
  tr::FinetuneIo resume;
  resume.resume = true;
  EXPECT_EQ(tr::finetune(d, data, cfg, d3.string(), resume).adapter_hash, host.adapter_hash);
  fs::remove_all(d1);
  fs::remove_all(d2);
  fs::remove_all(d3);
}

}  // namespace
