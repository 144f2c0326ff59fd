#include "lockstep/train/optim.hpp"

#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "lockstep/num/elementary.hpp"
#include "lockstep/num/reduce.hpp"
#include "lockstep/util/parallel.hpp"

namespace lockstep::train {

void AdamWConfig::validate() const {
  auto need = [](bool ok, const std::string& msg) {
    if (!ok) throw std::invalid_argument(msg);
  };
  need(std::isfinite(lr) && lr > 0, fmt::format("--lr must be a finite number > 0, got {}", lr));
  need(beta1 >= 0 && beta1 < 1, fmt::format("--beta1 must be in [0, 1), got {}", beta1));
  need(beta2 >= 0 && beta2 < 1, fmt::format("--beta2 must be in [0, 1), got {}", beta2));
  need(std::isfinite(eps) && eps > 0, fmt::format("--eps must be a finite number > 0, got {}", eps));
  need(std::isfinite(weight_decay) && weight_decay >= 0 && lr * weight_decay < 1,
       fmt::format("--weight-decay must be >= 0 with lr*weight_decay < 1, got {}", weight_decay));
}

void ScheduleConfig::validate() const {
  if (total_steps < 1) throw std::invalid_argument(fmt::format("--steps must be >= 1, got {}", total_steps));
  if (warmup_steps < 0 || warmup_steps > total_steps)
    throw std::invalid_argument(fmt::format("--warmup must be in [0, steps], got {}", warmup_steps));
  if (!(min_lr_ratio >= 0 && min_lr_ratio <= 1))
    throw std::invalid_argument(fmt::format("--min-lr-ratio must be in [0, 1], got {}", min_lr_ratio));
}

float learning_rate(const AdamWConfig& opt, const ScheduleConfig& s, std::int64_t step) {
  const float peak = static_cast<float>(opt.lr);
  if (step < s.warmup_steps)
    return peak * static_cast<float>(step + 1) / static_cast<float>(s.warmup_steps);
  const float lo = peak * static_cast<float>(s.min_lr_ratio);
  const std::int64_t span = s.total_steps - s.warmup_steps;
  float progress = span > 0 ? static_cast<float>(step - s.warmup_steps) / static_cast<float>(span) : 1.0f;
  progress = progress < 0.0f ? 0.0f : (progress > 1.0f ? 1.0f : progress);
  constexpr float kPi = 0x1.921fb6p+1f;  // π rounded to float
  const float coeff = 0.5f * (1.0f + num::cos(kPi * progress));
  return lo + (peak - lo) * coeff;
}

namespace {
// beta^t by binary exponentiation in double: IEEE double multiplication is
// correctly rounded on every host, so this sequence gives the same bits anywhere.
double power(double beta, std::int64_t t) {
  double r = 1.0, b = beta;
  for (std::int64_t e = t; e > 0; e >>= 1) {
    if (e & 1) r *= b;
    b *= b;
  }
  return r;
}
}  // namespace

AdamWScalars adamw_scalars(const AdamWConfig& opt, float lr, std::int64_t t) {
  if (t < 1) throw std::invalid_argument("adamw_scalars: the update count t starts at 1");
  const double bc1 = 1.0 - power(opt.beta1, t);
  const double bc2 = 1.0 - power(opt.beta2, t);
  AdamWScalars s{};
  s.beta1 = static_cast<float>(opt.beta1);
  s.one_minus_beta1 = static_cast<float>(1.0 - opt.beta1);
  s.beta2 = static_cast<float>(opt.beta2);
  s.one_minus_beta2 = static_cast<float>(1.0 - opt.beta2);
  s.step_size = static_cast<float>(static_cast<double>(lr) / bc1);
  s.inv_sqrt_bc2 = static_cast<float>(1.0 / std::sqrt(bc2));
  s.eps = static_cast<float>(opt.eps);
  s.decay = static_cast<float>(1.0 - static_cast<double>(lr) * opt.weight_decay);
  return s;
}

// The optimizer op's steps 2, 3 and 6 (ops/optim.hpp); the per-tensor sums
// spread over threads (sumsq_parallel: the same bits as ops::tensor_sumsq).
float global_grad_norm(const std::vector<ParamSlot>& slots, int threads) {
  std::vector<float> partial(slots.size());
  for (std::size_t i = 0; i < slots.size(); ++i)
    partial[i] = num::reduce::sumsq_parallel(slots[i].grad.data(), slots[i].grad.size(), threads);
  return ops::global_norm(partial.data(), partial.size());
}

float clip_grad_norm(std::vector<ParamSlot>& slots, float max_norm, int threads) {
  const float norm = global_grad_norm(slots, threads);
  if (!ops::step_updates(0.0f, norm)) {  // the loss was checked by the caller
    for (const auto& s : slots)
      for (float g : s.grad)
        if (!std::isfinite(g))
          throw std::runtime_error(fmt::format("non-finite gradient ({}) in '{}': the step is refused", g, s.name));
    throw std::runtime_error(fmt::format("gradient norm overflowed to {}: the step is refused", norm));
  }
  clip_by_norm(slots, max_norm, norm, threads);
  return norm;
}

float clip_by_norm(std::vector<ParamSlot>& slots, float max_norm, float norm, int threads) {
  const float scale = ops::clip_scale(max_norm, norm);
  if (ops::clips(scale))
    for (auto& s : slots)
      util::parallel_for(s.grad.size(), threads, 1 << 14, [&](std::size_t lo, std::size_t hi) {
        for (std::size_t i = lo; i < hi; ++i) s.grad[i] = ops::clip_grad(s.grad[i], scale);
      });
  return scale;
}

void adamw_step(std::vector<ParamSlot>& slots, const AdamWScalars& sc, int threads) {
  for (auto& s : slots) {
    if (s.grad.size() != s.value.size() || s.m.size() != s.value.size() || s.v.size() != s.value.size())
      throw std::invalid_argument(fmt::format("adamw_step: '{}' has mismatched value/grad/moment sizes", s.name));
    util::parallel_for(s.value.size(), threads, 1 << 14, [&](std::size_t lo, std::size_t hi) {
      for (std::size_t i = lo; i < hi; ++i) ops::adamw_element(s.value[i], s.grad[i], s.m[i], s.v[i], sc, s.decay);
    });
  }
}

}  // namespace lockstep::train
