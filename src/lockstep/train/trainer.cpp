#include "lockstep/train/trainer.hpp"

#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "lockstep/num/hash.hpp"
#include "lockstep/ops/optim.hpp"
#include "lockstep/train/step.hpp"
#include "lockstep/util/parallel.hpp"

namespace lockstep::train {

std::uint64_t batch_seed(std::uint64_t seed) {
  static constexpr char kTag[] = "lockstep.batches";
  return num::hash_bytes(kTag, sizeof kTag - 1, seed);
}

double bits_per_byte(double total_nats, std::uint64_t bytes) {
  if (bytes == 0) throw std::invalid_argument("bits_per_byte: no bytes scored");
  return total_nats / (std::log(2.0) * static_cast<double>(bytes));
}

Trainer::Trainer(const TrainConfig& cfg, std::unique_ptr<model::Model> model, data::Shard train,
                 std::optional<data::Shard> val, std::vector<std::uint32_t> token_bytes)
    : cfg_(cfg),
      model_(std::move(model)),
      train_(std::move(train)),
      val_(std::move(val)),
      token_bytes_(std::move(token_bytes)),
      adamw_(cfg.adamw()),
      sched_(cfg.schedule()),
      data_seed_(batch_seed(cfg.seed)),
      threads_(util::resolve_threads(cfg.threads)) {
  cfg_.validate();
  const model::ModelConfig& mc = model_->config();
  if (cfg_.seq > mc.max_seq)
    throw std::invalid_argument(fmt::format("--seq {} exceeds the model's context ({})", cfg_.seq, mc.max_seq));
  auto check_shard = [&](const data::Shard& s, const char* what) {
    if (s.header().vocab_size > static_cast<std::uint64_t>(mc.vocab_size))
      throw std::invalid_argument(fmt::format("the {} shard's vocabulary ({}) exceeds the model's ({})", what,
                                              s.header().vocab_size, mc.vocab_size));
    if (s.size() < static_cast<std::uint64_t>(cfg_.seq) + 1)
      throw std::invalid_argument(fmt::format(
          "the {} split has {} tokens, fewer than one window of --seq {} + 1: use a smaller --seq, more text, or a "
          "larger --val-fraction",
          what, s.size(), cfg_.seq));
  };
  check_shard(train_, "training");
  if (val_) check_shard(*val_, "validation");
  if (token_bytes_.size() < static_cast<std::size_t>(mc.vocab_size))
    token_bytes_.resize(static_cast<std::size_t>(mc.vocab_size), 0);
  opt_.init(*model_);
}

void Trainer::init_fresh() {
  model_->init(cfg_.seed);
  opt_.init(*model_);
  if (auto* own = model_->step_stages()) own->set_moments(opt_.m, opt_.v);
}

const OptimizerState& Trainer::optimizer() const {
  if (auto* own = model_->step_stages()) own->get_moments(opt_.m, opt_.v);
  return opt_;
}

void Trainer::restore(OptimizerState opt) {
  const auto& ps = model_->params();
  if (opt.m.size() != ps.size() || opt.v.size() != ps.size())
    throw std::invalid_argument("restore: the optimizer state does not match the model's parameters");
  for (std::size_t i = 0; i < ps.size(); ++i) {
    const std::size_t want = ps[i].trainable ? ps[i].value.size() : 0;
    if (opt.m[i].size() != want || opt.v[i].size() != want)
      throw std::invalid_argument(fmt::format("restore: moments of '{}' have the wrong size", ps[i].name));
  }
  if (opt.step < 0 || opt.step > cfg_.steps)
    throw std::invalid_argument(fmt::format("restore: step {} is outside the run's {} steps", opt.step, cfg_.steps));
  opt_ = std::move(opt);
  if (auto* own = model_->step_stages()) own->set_moments(opt_.m, opt_.v);
}

StepResult Trainer::step() {
  const std::int64_t s = opt_.step;
  if (s >= cfg_.steps) throw std::logic_error(fmt::format("step: the run's {} steps are done", cfg_.steps));
  const std::int64_t B = cfg_.batch, T = cfg_.seq, A = cfg_.accum;
  const float lr = learning_rate(adamw_, sched_, s);
  const data::Batch b = data::sample_batch(train_, data_seed_, static_cast<std::uint64_t>(s), B * A, T);

  // The step pipeline (step.hpp): the model's own stages where its parameters
  // live, or the host stages; a replica's hooks (none for one process).
  HostStepStages host(*model_, opt_);
  model::StepStages* own = model_->step_stages();
  const StepBatch batch{b.inputs, b.targets, B, T, A};
  const ops::StepDecision d = run_step(own != nullptr ? *own : host, batch, static_cast<float>(cfg_.grad_clip),
                                       adamw_scalars(adamw_, lr, s + 1), hooks_, threads_);
  if (!std::isfinite(d.loss))
    throw std::runtime_error(fmt::format("step {}: the training loss is {}: the step is refused (lower --lr?)", s + 1,
                                         d.loss));
  opt_.step = s + 1;
  return {s + 1, d.loss, lr, d.norm, static_cast<std::uint64_t>(B * A * T)};
}

model::TensorTable Trainer::weights_table() {
  if (model::StepStages* own = model_->step_stages()) return own->weights();
  return HostStepStages(*model_, opt_).weights();
}

std::int64_t Trainer::val_windows() const {
  if (!val_) return 0;
  return static_cast<std::int64_t>((val_->size() - 1) / static_cast<std::uint64_t>(cfg_.seq));
}

EvalResult Trainer::evaluate(std::int64_t max_tokens) {
  if (!val_) throw std::logic_error("evaluate: no validation shard");
  const std::int64_t T = cfg_.seq;
  std::int64_t windows = val_windows();
  if (max_tokens > 0) windows = std::min(windows, std::max<std::int64_t>(1, max_tokens / T));
  const std::int64_t per_call = cfg_.batch * cfg_.accum;
  EvalResult r;
  r.step = opt_.step;
  double nats = 0;
  for (std::int64_t first = 0; first < windows; first += per_call) {
    const std::int64_t n = std::min(per_call, windows - first);
    const data::Batch b = data::sequential_batch(*val_, static_cast<std::uint64_t>(first), n, T);
    const float l = model_->loss(b.inputs, b.targets, n, T, threads_);
    if (!std::isfinite(l)) throw std::runtime_error(fmt::format("validation at step {}: the loss is {}", r.step, l));
    nats += static_cast<double>(l) * static_cast<double>(n * T);
    for (std::int32_t t : b.targets) r.bytes += token_bytes_[static_cast<std::size_t>(t)];
    r.tokens += static_cast<std::uint64_t>(n * T);
  }
  r.loss = nats / static_cast<double>(r.tokens);
  r.bpb = bits_per_byte(nats, r.bytes);
  return r;
}

}  // namespace lockstep::train
