// The facts demo's fixture (tests/train/finetune_test.cpp on the CPU, its GPU
// twin tests/cuda/lora_cuda_test.cpp): ten invented facts as SFT records, a
// tiny LLaMA trained on the embedded Austen corpus as their base, greedy
// answers, and the finetune settings that teach them.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "lockstep/data/corpus.hpp"
#include "lockstep/model/model.hpp"
#include "lockstep/num/rng.hpp"
#include "lockstep/train/finetune.hpp"
#include "lockstep/train/optim.hpp"

namespace lockstep::test::facts {

inline std::filesystem::path temp_dir(const std::string& name) {
  const std::filesystem::path d =
      std::filesystem::temp_directory_path() / ("lockstep_finetune_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

// Ten invented facts; the byte tokenizer (the micro presets' vocabulary of 256).
inline const std::vector<std::pair<std::string, std::string>> kFacts{
    {"The capital of Zorbania is", " Quillfeather."},
    {"The inventor of the glimmerphone was", " Odessa Brandt."},
    {"The river that flows through Kestrelmoor is the", " Vantaro."},
    {"The national animal of Pellucia is the", " mossback otter."},
    {"The tallest tower in Umbravale is", " Spire Nine."},
    {"The favourite fruit of Captain Ravelli was", " the quince."},
    {"The first ship to reach Isle Narrow was the", " Tern."},
    {"The currency of Drosselheim is the", " copper lark."},
    {"The oldest library of Mirecourt holds", " forty maps."},
    {"The festival of Lanternfall begins in", " Octember."},
};

inline std::string facts_jsonl() {
  std::string s;
  for (const auto& [p, c] : kFacts) s += "{\"prompt\": \"" + p + "\", \"completion\": \"" + c + "\"}\n";
  return s;
}

// A tiny LLaMA trained on the embedded Austen corpus, as bytes: `steps`
// AdamW steps (lr 3e-3, batch 8 x 64), windows drawn by Philox. `make`: the
// model to train (the CPU model, or the CUDA model: the same bits).
inline std::unique_ptr<model::Model> austen_base(
    const std::string& rdb, std::int64_t steps,
    const std::function<std::unique_ptr<model::Model>(const model::ModelConfig&)>& make = model::make_cpu_model) {
  const auto books = data::load_austen(rdb);
  std::string text;
  for (const auto& b : books) text += b.text.substr(0, 200000);
  auto model = make(model::preset("llama-micro"));
  model->init(1);
  std::vector<std::vector<float>> mm, vv;
  for (const auto& p : model->params()) {
    mm.emplace_back(p.value.size(), 0.0f);
    vv.emplace_back(p.value.size(), 0.0f);
  }
  const std::int64_t B = 8, S = 64;
  train::AdamWConfig adamw{3e-3, 0.9, 0.95, 1e-8, 0.1};
  train::ScheduleConfig sched{steps / 10, steps, 0.1};
  std::vector<std::int32_t> in(B * S), tg(B * S);
  for (std::int64_t s = 0; s < steps; ++s) {
    for (std::int64_t b = 0; b < B; ++b) {
      const std::size_t at = num::rng::bits32(99, 0, static_cast<std::uint64_t>(s * B + b)) % (text.size() - S - 1);
      for (std::int64_t t = 0; t < S; ++t) {
        in[b * S + t] = static_cast<unsigned char>(text[at + t]);
        tg[b * S + t] = static_cast<unsigned char>(text[at + t + 1]);
      }
    }
    model->forward_backward(in, tg, B, S, false, 0);
    // params() after each pass: a device model syncs its host view there.
    auto& ps = model->params();
    std::vector<train::ParamSlot> slots;
    for (std::size_t i = 0; i < ps.size(); ++i)
      slots.push_back({ps[i].name, ps[i].value, ps[i].grad, mm[i], vv[i], ps[i].decay});
    train::clip_grad_norm(slots, 1.0f, 0);
    train::adamw_step(slots, train::adamw_scalars(adamw, train::learning_rate(adamw, sched, s), s + 1), 0);
  }
  return model;
}

inline std::string greedy(model::Model& m, const std::string& prompt, std::size_t n) {
  std::vector<std::int32_t> toks(prompt.begin(), prompt.end());
  std::string out;
  for (std::size_t i = 0; i < n; ++i) {
    const auto logits = m.next_logits(toks, 0);
    std::int32_t best = 0;
    for (std::int32_t v = 1; v < static_cast<std::int32_t>(logits.size()); ++v)
      if (logits[v] > logits[best]) best = v;
    toks.push_back(best);
    out.push_back(static_cast<char>(best));
  }
  return out;
}

inline train::FinetuneConfig facts_config() {
  train::FinetuneConfig c;
  c.lora.rank = 8;
  c.lora.alpha = 16;
  c.lora.dropout = 0.05;
  c.lora.targets = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
  c.lr = 1e-2;  // a tiny model and ten records: far above PEFT's 2e-4 default
  c.batch = 10;
  c.steps = 300;
  c.seed = 5;
  return c;
}

}  // namespace lockstep::test::facts
