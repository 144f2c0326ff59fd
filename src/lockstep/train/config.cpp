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
  need(linear == "float" || linear == "units", fmt::format("--linear must be float or units, got '{}'", linear));
  need(!unit_backward || linear == "units",
       fmt::format("--unit-backward requires --linear units (got --linear {})", linear));
  need(!units_head || linear == "units", fmt::format("--units-head requires --linear units (got --linear {})", linear));
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
  j["activations"] = activations;
  j["linear"] = linear;
  j["unit_backward"] = unit_backward;
  j["units_head"] = units_head;
  j["seed"] = seed;
  j["eval_every"] = eval_every;
  j["eval_tokens"] = eval_tokens;
  j["save_every"] = save_every;
  j["log_every"] = log_every;
  j["max_minutes"] = max_minutes;
  return j.dump(2);
}

TrainConfig TrainConfig::from_json(std::string_view json, const std::string& what) {
  TrainConfig c;
  try {
    const auto j = nlohmann::json::parse(json);
    // Every field must be present: a run config is written by to_json, and a
    // silently defaulted field would resume a different run.
    j.at("model").get_to(c.model);
    j.at("data").get_to(c.data);
    j.at("vocab").get_to(c.vocab);
    j.at("val_fraction").get_to(c.val_fraction);
    j.at("out").get_to(c.out);
    j.at("steps").get_to(c.steps);
    j.at("batch").get_to(c.batch);
    j.at("seq").get_to(c.seq);
    j.at("accum").get_to(c.accum);
    j.at("lr").get_to(c.lr);
    j.at("warmup").get_to(c.warmup);
    j.at("min_lr_ratio").get_to(c.min_lr_ratio);
    j.at("weight_decay").get_to(c.weight_decay);
    j.at("beta1").get_to(c.beta1);
    j.at("beta2").get_to(c.beta2);
    j.at("eps").get_to(c.eps);
    j.at("grad_clip").get_to(c.grad_clip);
    j.at("threads").get_to(c.threads);
    if (j.contains("device")) j.at("device").get_to(c.device);  // absent before the CUDA backend: cpu
    if (j.contains("audit")) j.at("audit").get_to(c.audit);
    if (j.contains("activations")) j.at("activations").get_to(c.activations);
    // absent before the int8 units: the float linear layers
    if (j.contains("linear")) j.at("linear").get_to(c.linear);
    if (j.contains("unit_backward")) j.at("unit_backward").get_to(c.unit_backward);
    if (j.contains("units_head")) j.at("units_head").get_to(c.units_head);
    j.at("seed").get_to(c.seed);
    j.at("eval_every").get_to(c.eval_every);
    j.at("eval_tokens").get_to(c.eval_tokens);
    j.at("save_every").get_to(c.save_every);
    j.at("log_every").get_to(c.log_every);
    j.at("max_minutes").get_to(c.max_minutes);
  } catch (const nlohmann::json::exception& e) {
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
