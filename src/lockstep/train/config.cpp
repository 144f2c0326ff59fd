#include "lockstep/train/config.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace lockstep::train {

AdamWConfig TrainConfig::adamw() const {
  AdamWConfig a;
  a.lr = lr;
  a.beta1 = beta1;
  a.beta2 = beta2;
  a.eps = eps;
  a.weight_decay = weight_decay;
  return a;
}

ScheduleConfig TrainConfig::schedule() const {
  ScheduleConfig s;
  s.warmup_steps = warmup;
  s.total_steps = steps;
  s.min_lr_ratio = min_lr_ratio;
  return s;
}

void TrainConfig::validate() const {
  auto need = [](bool ok, const std::string& msg) {
    if (!ok) throw std::invalid_argument(msg);
  };
  need(!model.empty(), "--model must name a preset");
  need(vocab >= 258 && vocab <= 65536, fmt::format("--vocab must be in [258, 65536], got {}", vocab));
  need(val_fraction > 0 && val_fraction < 0.5, fmt::format("--val-fraction must be in (0, 0.5), got {}", val_fraction));
  need(!out.empty(), "--out must name a directory");
  need(steps >= 1, fmt::format("--steps must be >= 1, got {}", steps));
  need(batch >= 1 && batch <= 65536, fmt::format("--batch must be in [1, 65536], got {}", batch));
  need(seq >= 2, fmt::format("--seq must be >= 2, got {}", seq));
  need(accum >= 1 && accum <= 65536, fmt::format("--accum must be in [1, 65536], got {}", accum));
  need(std::isfinite(grad_clip) && grad_clip >= 0, fmt::format("--grad-clip must be >= 0, got {}", grad_clip));
  need(device == "cpu" || device == "cuda", fmt::format("--device must be cpu or cuda, got '{}'", device));
  need(activations == "keep" || activations == "recompute",
       fmt::format("--activations must be keep or recompute, got '{}'", activations));
  need(audit == "stop" || audit == "warn" || audit == "off",
       fmt::format("--audit must be stop, warn or off, got '{}'", audit));
  need(std::isfinite(audit_budget) && audit_budget > 0 && audit_budget <= 100,
       fmt::format("--audit-budget must be in (0, 100] percent, got {}", audit_budget));
  need(linear == "float" || linear == "units", fmt::format("--linear must be float or units, got '{}'", linear));
  need(!unit_backward || linear == "units",
       fmt::format("--unit-backward requires --linear units (got --linear {})", linear));
  need(!units_head || linear == "units", fmt::format("--units-head requires --linear units (got --linear {})", linear));
  need(attention == "float" || attention == "units",
       fmt::format("--attention must be float or units, got '{}'", attention));
  need(threads >= 0 && threads <= 4096, fmt::format("--threads must be in [0, 4096], got {}", threads));
  need(eval_every >= 0, fmt::format("--eval-every must be >= 0, got {}", eval_every));
  need(eval_tokens >= 1, fmt::format("--eval-tokens must be >= 1, got {}", eval_tokens));
  need(save_every >= 0, fmt::format("--save-every must be >= 0, got {}", save_every));
  need(log_every >= 0, fmt::format("--log-every must be >= 0, got {}", log_every));
  need(std::isfinite(max_minutes) && max_minutes >= 0,
       fmt::format("--max-minutes must be >= 0 (0: no limit), got {}", max_minutes));
  adamw().validate();     // --lr, --beta1, --beta2, --eps, --weight-decay
  schedule().validate();  // --steps, --warmup, --min-lr-ratio
}

model::ModelConfig TrainConfig::model_config(std::int64_t vocab_size, std::int64_t eos_token) const {
  model::ModelConfig c = model::preset(model);  // throws listing the known presets
  c.vocab_size = vocab_size;
  c.bos_token = c.eos_token = eos_token;  // <|endoftext|> separates documents, as in GPT-2
  if (linear == "units" && c.family == model::Family::Bitnet)
    throw std::invalid_argument(fmt::format(
        "--linear units: --model {} is a bitnet model, whose projections are BitLinear already (units: gpt2, llama)",
        model));
  c.linear = linear == "units" ? model::LinearMode::Units : model::LinearMode::Float;
  c.unit_backward = unit_backward;
  c.units_head = units_head;
  c.attention = attention == "units" ? model::AttentionMode::Units : model::AttentionMode::Float;
  if (seq > c.max_seq)
    throw std::invalid_argument(
        fmt::format("--seq {} exceeds the context of --model {} ({} positions)", seq, model, c.max_seq));
  c.validate();
  return c;
}

std::string TrainConfig::to_json() const {
  nlohmann::ordered_json j;
  j["model"] = model;
  j["data"] = data;
  j["vocab"] = vocab;
  j["val_fraction"] = val_fraction;
  j["out"] = out;
  j["steps"] = steps;
  j["batch"] = batch;
  j["seq"] = seq;
  j["accum"] = accum;
  j["lr"] = lr;
  j["warmup"] = warmup;
  j["min_lr_ratio"] = min_lr_ratio;
  j["weight_decay"] = weight_decay;
  j["beta1"] = beta1;
  j["beta2"] = beta2;
  j["eps"] = eps;
  j["grad_clip"] = grad_clip;
  j["threads"] = threads;
  j["device"] = device;
  j["audit"] = audit;
  j["audit_budget"] = audit_budget;
  j["activations"] = activations;
  j["linear"] = linear;
  j["unit_backward"] = unit_backward;
  j["units_head"] = units_head;
  j["attention"] = attention;
  j["seed"] = seed;
  j["eval_every"] = eval_every;
  j["eval_tokens"] = eval_tokens;
  j["save_every"] = save_every;
  j["log_every"] = log_every;
  j["max_minutes"] = max_minutes;
  return j.dump(2);
}

namespace {
// One field of a run config. An integer field must hold a JSON integer: a
// float such as 1.3e88 read into an int64 is undefined behaviour (found by
// fuzz_train_config under UBSan).
template <class T>
void read_field(const nlohmann::json& j, const char* key, T& out) {
  const auto& v = j.at(key);
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    if (!v.is_number_integer()) throw std::runtime_error(std::string("'") + key + "' must be an integer");
  }
  v.get_to(out);
}
}  // namespace

TrainConfig TrainConfig::from_json(std::string_view json, const std::string& what) {
  TrainConfig c;
  try {
    const auto j = nlohmann::json::parse(json);
    // Every field must be present: a run config is written by to_json, and a
    // silently defaulted field would resume a different run.
    read_field(j, "model", c.model);
    read_field(j, "data", c.data);
    read_field(j, "vocab", c.vocab);
    read_field(j, "val_fraction", c.val_fraction);
    read_field(j, "out", c.out);
    read_field(j, "steps", c.steps);
    read_field(j, "batch", c.batch);
    read_field(j, "seq", c.seq);
    read_field(j, "accum", c.accum);
    read_field(j, "lr", c.lr);
    read_field(j, "warmup", c.warmup);
    read_field(j, "min_lr_ratio", c.min_lr_ratio);
    read_field(j, "weight_decay", c.weight_decay);
    read_field(j, "beta1", c.beta1);
    read_field(j, "beta2", c.beta2);
    read_field(j, "eps", c.eps);
    read_field(j, "grad_clip", c.grad_clip);
    read_field(j, "threads", c.threads);
    if (j.contains("device")) read_field(j, "device", c.device);  // absent before the CUDA backend: cpu
    if (j.contains("audit")) read_field(j, "audit", c.audit);
    // absent before the audit budget: every launch was audited
    if (j.contains("audit_budget")) read_field(j, "audit_budget", c.audit_budget);
    else c.audit_budget = 100;
    if (j.contains("activations")) read_field(j, "activations", c.activations);
    // absent before the int8 units: the float linear layers
    if (j.contains("linear")) read_field(j, "linear", c.linear);
    if (j.contains("unit_backward")) read_field(j, "unit_backward", c.unit_backward);
    if (j.contains("units_head")) read_field(j, "units_head", c.units_head);
    if (j.contains("attention")) read_field(j, "attention", c.attention);  // absent: float
    read_field(j, "seed", c.seed);
    read_field(j, "eval_every", c.eval_every);
    read_field(j, "eval_tokens", c.eval_tokens);
    read_field(j, "save_every", c.save_every);
    read_field(j, "log_every", c.log_every);
    read_field(j, "max_minutes", c.max_minutes);
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(fmt::format("{}: {}", what, e.what()));
  } catch (const std::runtime_error& e) {  // read_field's
    throw std::runtime_error(fmt::format("{}: {}", what, e.what()));
  }
  return c;
}

double parse_real(std::string_view flag, std::string_view text) {
  const std::string s(text);
  errno = 0;
  char* end = nullptr;
  const double v = s.empty() ? 0.0 : std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || s.find_first_of(" \t\n") != std::string::npos)
    throw std::invalid_argument(fmt::format("{}: expected a number, got '{}'", flag, text));
  if (errno == ERANGE || !std::isfinite(v))
    throw std::invalid_argument(fmt::format("{}: {} is out of range", flag, text));
  return v;
}

std::int64_t parse_int(std::string_view flag, std::string_view text) {
  double v = 0;
  try {
    v = parse_real(flag, text);
  } catch (const std::invalid_argument&) {
    throw std::invalid_argument(fmt::format("{}: expected a whole number, got '{}'", flag, text));
  }
  if (v != std::floor(v)) throw std::invalid_argument(fmt::format("{}: expected a whole number, got {}", flag, text));
  if (std::fabs(v) > 9.0e15)  // beyond 2^53 a double no longer holds every integer
    throw std::invalid_argument(fmt::format("{}: {} is out of range", flag, text));
  return static_cast<std::int64_t>(v);
}

}  // namespace lockstep::train
