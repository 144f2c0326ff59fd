// LoRA finetuning (finetune.hpp).
#include "lockstep/train/finetune.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "lockstep/io/atomic_file.hpp"
#include "lockstep/io/safetensors.hpp"
#include "lockstep/model/lora_params.hpp"
#include "lockstep/num/hash.hpp"
#include "lockstep/num/rng.hpp"
#include "lockstep/train/optim.hpp"
#include "lockstep/train/progress.hpp"
#include "lockstep/train/step.hpp"
#include "lockstep/util/parallel.hpp"

namespace lockstep::train {

namespace fs = std::filesystem;

void FinetuneConfig::validate() const {
  auto bad = [](const std::string& what) { throw std::invalid_argument("finetune: " + what); };
  if (lora.rank == 0) bad("--rank must be > 0");
  if (!(lora.alpha > 0)) bad("--alpha must be > 0");
  if (!(lora.dropout >= 0 && lora.dropout < 1)) bad("--dropout must be in [0, 1)");
  if (!(lr >= 0) || !std::isfinite(lr)) bad("--lr must be finite and >= 0");
  if (!(beta1 >= 0 && beta1 < 1) || !(beta2 >= 0 && beta2 < 1)) bad("--beta1/--beta2 must be in [0, 1)");
  if (!(eps > 0)) bad("--eps must be > 0");
  if (!(weight_decay >= 0)) bad("--weight-decay must be >= 0");
  if (!(warmup_ratio >= 0 && warmup_ratio <= 1)) bad("--warmup-ratio must be in [0, 1]");
  if (!(min_lr_ratio >= 0 && min_lr_ratio <= 1)) bad("--min-lr-ratio must be in [0, 1]");
  if (!(grad_clip > 0)) bad("--clip must be > 0");
  if (steps < 0) bad("--steps must be >= 0");
  if (steps == 0 && epochs <= 0) bad("--epochs must be > 0 when --steps is 0");
  if (batch <= 0) bad("--batch must be > 0");
  if (max_seq < 0) bad("--max-seq must be >= 0");
  if (save_every < 0) bad("--save-every must be >= 0");
  if (log_every <= 0) bad("--log-every must be > 0");
  if (threads < 0) bad("--threads must be >= 0");
}

std::string FinetuneConfig::to_json() const {
  nlohmann::ordered_json j;
  j["rank"] = lora.rank;
  j["alpha"] = lora.alpha;
  j["dropout"] = lora.dropout;
  j["rslora"] = lora.rslora;
  j["targets"] = lora.targets;
  j["base"] = lora.base_model;
  j["lr"] = lr;
  j["beta1"] = beta1;
  j["beta2"] = beta2;
  j["eps"] = eps;
  j["weight_decay"] = weight_decay;
  j["warmup_ratio"] = warmup_ratio;
  j["min_lr_ratio"] = min_lr_ratio;
  j["grad_clip"] = grad_clip;
  j["steps"] = steps;
  j["epochs"] = epochs;
  j["batch"] = batch;
  j["max_seq"] = max_seq;
  j["seed"] = seed;
  return j.dump();
}

std::int64_t finetune_steps(const FinetuneConfig& cfg, std::size_t records) {
  if (cfg.steps > 0) return cfg.steps;
  const auto n = static_cast<std::int64_t>(records);
  return cfg.epochs * ((n + cfg.batch - 1) / cfg.batch);
}

std::uint64_t adapter_hash(const model::Model& model) {
  num::Hasher h;
  for (const model::Param& p : model.params())
    if (model::is_lora_param(p.name)) h.add(num::HashDType::f32, p.shape, p.value.data());
  return h.digest();
}

namespace {

// Example order of epoch e: Fisher–Yates under Philox(seed, stream e + 1).
std::vector<std::size_t> epoch_order(std::uint64_t seed, std::uint64_t epoch, std::size_t n) {
  std::vector<std::size_t> o(n);
  for (std::size_t i = 0; i < n; ++i) o[i] = i;
  for (std::size_t i = n; i-- > 1;) {
    const std::size_t j = num::rng::bits32(seed, epoch + 1, n - 1 - i) % (i + 1);
    std::swap(o[i], o[j]);
  }
  return o;
}

struct Batch {
  std::vector<std::int32_t> inputs, targets;
  std::int64_t batch = 0, seq = 0;
  std::uint64_t scored = 0;  // tokens with a target
};

Batch make_batch(const std::vector<data::SftExample>& data, const FinetuneConfig& cfg, std::size_t max_seq,
                 std::int64_t step) {
  const std::size_t n = data.size(), B = static_cast<std::size_t>(cfg.batch);
  std::vector<std::vector<std::int32_t>> ins(B), tgs(B);
  std::size_t seq = 1;
  std::uint64_t cached_epoch = ~0ull;
  std::vector<std::size_t> order;
  for (std::size_t j = 0; j < B; ++j) {
    const std::uint64_t at = static_cast<std::uint64_t>(step) * B + j;
    if (at / n != cached_epoch) {
      cached_epoch = at / n;
      order = epoch_order(cfg.seed, cached_epoch, n);
    }
    data::sft_window(data[order[at % n]], max_seq, ins[j], tgs[j]);
    seq = std::max(seq, ins[j].size());
  }
  Batch b;
  b.batch = static_cast<std::int64_t>(B);
  b.seq = static_cast<std::int64_t>(seq);
  b.inputs.assign(B * seq, 0);
  b.targets.assign(B * seq, -1);
  for (std::size_t j = 0; j < B; ++j)
    for (std::size_t t = 0; t < ins[j].size(); ++t) {
      b.inputs[j * seq + t] = ins[j][t];
      b.targets[j * seq + t] = tgs[j][t];
      b.scored += tgs[j][t] >= 0;
    }
  return b;
}

struct Moments {
  std::vector<std::vector<float>> m, v;  // per parameter (empty for frozen)
};

std::vector<ParamSlot> adapter_slots(std::vector<model::Param>& ps, Moments& mo) {
  std::vector<ParamSlot> slots;
  for (std::size_t i = 0; i < ps.size(); ++i) {
    if (!ps[i].trainable) continue;
    slots.push_back({ps[i].name, ps[i].value, ps[i].grad, mo.m[i], mo.v[i], ps[i].decay});
  }
  return slots;
}

void save_state(const std::string& out, const model::Model& model, const Moments& mo, const FinetuneConfig& cfg,
                std::int64_t step, std::int64_t steps) {
  const auto& ps = model.params();
  std::vector<io::TensorRef> refs;
  for (std::size_t i = 0; i < ps.size(); ++i) {
    if (!ps[i].trainable) continue;
    for (float x : ps[i].value)
      if (!std::isfinite(x)) throw std::runtime_error("finetune: adapter tensor " + ps[i].name + " holds NaN/Inf: not saved");
    refs.push_back(io::TensorRef::f32(ps[i].name, ps[i].shape, ps[i].value));
    refs.push_back(io::TensorRef::f32(ps[i].name + ".exp_avg", ps[i].shape, mo.m[i]));
    refs.push_back(io::TensorRef::f32(ps[i].name + ".exp_avg_sq", ps[i].shape, mo.v[i]));
  }
  io::write_safetensors((fs::path(out) / "lora_state.safetensors").string(), refs,
                        {{"format", "lockstep-lora"}, {"step", std::to_string(step)}});
  nlohmann::ordered_json j;
  j["step"] = step;
  j["steps"] = steps;
  j["adapter_hash"] = fmt::format("{:016x}", adapter_hash(model));
  j["config"] = nlohmann::json::parse(cfg.to_json());
  const std::string text = j.dump(2) + "\n";
  io::write_file_atomic((fs::path(out) / "finetune_state.json").string(),
                        std::span(reinterpret_cast<const std::uint8_t*>(text.data()), text.size()));
}

// The state file's tensors into the model's adapter tensors (and moments).
std::int64_t read_state(const std::string& out, model::Model& model, Moments* mo) {
  const std::string path = (fs::path(out) / "lora_state.safetensors").string();
  const auto f = io::SafetensorsFile::read(path);
  auto& ps = model.params();
  for (std::size_t i = 0; i < ps.size(); ++i) {
    if (!model::is_lora_param(ps[i].name)) continue;
    if (f.find(ps[i].name) == nullptr) throw std::runtime_error(path + ": no tensor " + ps[i].name);
    ps[i].value = f.f32(ps[i].name, &ps[i].shape);
    if (mo) {
      mo->m[i] = f.f32(ps[i].name + ".exp_avg", &ps[i].shape);
      mo->v[i] = f.f32(ps[i].name + ".exp_avg_sq", &ps[i].shape);
    }
  }
  const auto it = f.metadata().find("step");
  if (it == f.metadata().end()) throw std::runtime_error(path + ": no step in its metadata");
  return std::stoll(it->second);
}

model::LoraRun lora_run(const FinetuneConfig& cfg, bool training, std::int64_t step) {
  model::LoraRun r;
  r.scale = model::lora_scale(cfg.lora);
  r.dropout = cfg.lora.dropout;
  r.training = training;
  r.seed = cfg.seed;
  r.pass = static_cast<std::uint64_t>(step);
  return r;
}

// metrics.jsonl: a resumed run keeps the lines up to its step.
std::FILE* open_metrics(const fs::path& path, std::int64_t keep_through) {
  if (keep_through > 0 && fs::exists(path)) {
    std::ifstream in(path);
    std::string kept, line;
    while (std::getline(in, line)) {
      try {
        if (nlohmann::json::parse(line).at("step").get<std::int64_t>() <= keep_through) kept += line + "\n";
      } catch (const std::exception&) {
        // a torn last line: dropped
      }
    }
    io::write_file_atomic(path.string(), std::span(reinterpret_cast<const std::uint8_t*>(kept.data()), kept.size()));
    return std::fopen(path.c_str(), "a");
  }
  return std::fopen(path.c_str(), "w");
}

}  // namespace

void load_lora_state(model::Model& model, const FinetuneConfig& cfg, const std::string& out) {
  model::add_lora_params(model.params(), model.config(), cfg.lora, cfg.seed);
  if (cfg.base_as_codes) model::hold_frozen_ternary_as_codes(model);
  read_state(out, model, nullptr);
  model.set_lora(lora_run(cfg, false, 0));
}

FinetuneReport finetune(model::Model& model, const std::vector<data::SftExample>& data, const FinetuneConfig& cfg,
                        const std::string& out, const FinetuneIo& io) {
  cfg.validate();
  if (data.empty()) throw std::invalid_argument("finetune: no records");
  const auto& mc = model.config();
  for (const auto& ex : data)
    for (std::int32_t t : ex.tokens)
      if (t < 0 || t >= mc.vocab_size)
        throw std::invalid_argument(fmt::format("finetune: record on line {} has token {} outside the model's vocabulary of {}",
                                                ex.line, t, mc.vocab_size));
  const std::size_t max_seq = static_cast<std::size_t>(cfg.max_seq > 0 ? std::min(cfg.max_seq, mc.max_seq) : mc.max_seq);
  const std::int64_t steps = finetune_steps(cfg, data.size());
  fs::create_directories(out);

  model::add_lora_params(model.params(), mc, cfg.lora, cfg.seed);
  if (cfg.base_as_codes) model::hold_frozen_ternary_as_codes(model);
  auto& ps = model.params();
  Moments mo;
  mo.m.resize(ps.size());
  mo.v.resize(ps.size());
  for (std::size_t i = 0; i < ps.size(); ++i)
    if (ps[i].trainable) {
      mo.m[i].assign(ps[i].value.size(), 0.0f);
      mo.v[i].assign(ps[i].value.size(), 0.0f);
    }
  std::int64_t step = 0;
  const fs::path state_json = fs::path(out) / "finetune_state.json";
  if (io.resume) {
    if (!fs::exists(state_json)) throw std::runtime_error("finetune --resume: " + state_json.string() + " does not exist");
    const auto j = nlohmann::json::parse(io::read_file_text(state_json.string()));
    if (j.at("config").dump() != nlohmann::json::parse(cfg.to_json()).dump())
      throw std::runtime_error("finetune --resume: the run in " + out +
                               " was made with other settings; the same flags are needed to resume it");
    step = read_state(out, model, &mo);
    if (fmt::format("{:016x}", adapter_hash(model)) != j.at("adapter_hash").get<std::string>())
      throw std::runtime_error("finetune --resume: lora_state.safetensors does not match finetune_state.json's hash");
  }

  AdamWConfig adamw{cfg.lr, cfg.beta1, cfg.beta2, cfg.eps, cfg.weight_decay};
  ScheduleConfig sched{static_cast<std::int64_t>(std::ceil(cfg.warmup_ratio * static_cast<double>(steps))), steps,
                       cfg.min_lr_ratio};
  const int threads = util::resolve_threads(cfg.threads);
  std::FILE* metrics = open_metrics(fs::path(out) / "metrics.jsonl", step);
  if (!metrics) throw std::runtime_error("finetune: cannot open " + (fs::path(out) / "metrics.jsonl").string());
  std::unique_ptr<Progress> progress;
  if (io.progress) progress = std::make_unique<Progress>(io.progress, io.tty, cfg.log_every);

  // A model with its own step stages (the CUDA model) keeps the adapter
  // tensors, their gradients and AdamW's moments on its device: the host
  // view's moments go over once, and come back at each save.
  model::StepStages* stages = model.step_stages();
  if (stages != nullptr) stages->set_moments(mo.m, mo.v);
  auto save = [&](std::int64_t at) {
    if (stages != nullptr) stages->get_moments(mo.m, mo.v);
    save_state(out, model, mo, cfg, at, steps);
  };

  FinetuneReport rep;
  rep.steps = steps;
  const std::int64_t start_step = step;
  const auto t0 = std::chrono::steady_clock::now();
  std::uint64_t tokens = 0;
  try {
    while (step < steps) {
      if (io.stop_after >= 0 && step >= io.stop_after) break;
      const Batch b = make_batch(data, cfg, max_seq, step);
      const float lr = learning_rate(adamw, sched, step);
      model.set_lora(lora_run(cfg, true, step));
      float loss = 0, norm = 0;
      if (stages != nullptr) {
        // The device's step stages: the same expressions as the host loop
        // below (ops/optim.hpp; accum 1: no gradient scale), where the
        // tensors live.
        const ops::StepDecision d = run_step(*stages, {b.inputs, b.targets, b.batch, b.seq, 1},
                                             static_cast<float>(cfg.grad_clip), adamw_scalars(adamw, lr, step + 1), {},
                                             threads);
        loss = d.loss;
        norm = d.norm;
        if (!std::isfinite(loss))
          throw std::runtime_error(fmt::format("finetune: the loss at step {} is {}", step + 1, loss));
      } else {
        loss = model.forward_backward(b.inputs, b.targets, b.batch, b.seq, false, threads);
        if (!std::isfinite(loss))
          throw std::runtime_error(fmt::format("finetune: the loss at step {} is {}", step + 1, loss));
        auto slots = adapter_slots(ps, mo);
        norm = clip_grad_norm(slots, static_cast<float>(cfg.grad_clip), threads);
        adamw_step(slots, adamw_scalars(adamw, lr, step + 1), threads);
      }
      ++step;
      tokens += static_cast<std::uint64_t>(b.batch * b.seq);
      rep.last_loss = loss;
      const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      fmt::print(metrics,
                 R"({{"type":"train","step":{},"loss":{},"lr":{},"grad_norm":{},"tokens":{},"scored_tokens":{},"tok_per_s":{:.1f},"elapsed_s":{:.3f}}})"
                 "\n",
                 step, loss, lr, norm, tokens, b.scored, el > 0 ? static_cast<double>(tokens) / el : 0.0, el);
      std::fflush(metrics);
      if (progress) {
        const double rate = el > 0 ? static_cast<double>(tokens) / el : 0.0;
        const double per_step = el / static_cast<double>(step - start_step);
        progress->update({step, steps, loss, lr, rate, el, per_step * static_cast<double>(steps - step)});
      }
      if (cfg.save_every > 0 && step % cfg.save_every == 0 && step < steps) save(step);
    }
  } catch (...) {
    std::fclose(metrics);
    throw;
  }
  std::fclose(metrics);
  if (progress) progress->finish();
  save(step);
  model.set_lora(lora_run(cfg, false, step));
  rep.step = step;
  rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  rep.tokens_per_second = rep.seconds > 0 ? static_cast<double>(tokens) / rep.seconds : 0.0;
  rep.adapter_hash = adapter_hash(model);
  for (std::size_t i = 0; i < mo.m.size(); ++i) rep.moment_bytes += (mo.m[i].capacity() + mo.v[i].capacity()) * sizeof(float);
  return rep;
}

}  // namespace lockstep::train
