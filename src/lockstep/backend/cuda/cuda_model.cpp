// make_cuda_model: the float engine (model/transformer.hpp) over the CUDA
// kernel set. The trainer's view (Model::params(): host values and gradients,
// updated by AdamW on the host, saved by the checkpoints) is mirrored on the
// device: every pass uploads the values (and, when accumulating, the
// gradients) and downloads the gradients it produced. The engine, its glue and
// its order of kernel calls are the CPU model's; every kernel is gated against
// the CPU's at start-up; so the loss and the gradients are the CPU model's bits.
#include <algorithm>
#include <cmath>
#include <memory>
#include <mutex>
#include <stdexcept>

#include <fmt/format.h>

#include "lockstep/backend/cuda/audit.hpp"
#include "lockstep/backend/cuda/device.hpp"
#include "lockstep/backend/cuda/gate.hpp"
#include "lockstep/backend/cuda/ops.hpp"
#include "lockstep/backend/cuda/optim_launch.hpp"
#include "lockstep/backend/cuda/probe.hpp"
#include "lockstep/model/model.hpp"
#include "lockstep/model/params.hpp"
#include "lockstep/model/transformer.hpp"
#include "lockstep/num/reduce.hpp"
#include "lockstep/train/optim.hpp"

namespace lockstep::model {
namespace {

// A parameter whose value and gradient live on the device.
struct DeviceParam {
  std::string name;
  std::vector<std::int64_t> shape;
  cuda::DeviceBuffer<float> value, grad;
  bool decay = true;
  bool trainable = true;
};

std::vector<DeviceParam> device_params(const std::vector<Param>& host) {
  std::vector<DeviceParam> d(host.size());
  for (std::size_t i = 0; i < host.size(); ++i) {
    d[i].name = host[i].name;
    d[i].shape = host[i].shape;
    d[i].value.resize(host[i].value.size());
    d[i].grad.resize(host[i].grad.size());
    d[i].decay = host[i].decay;
    d[i].trainable = host[i].trainable;
  }
  return d;
}

void gate_once() {
  static std::once_flag once;
  static std::string refused;
  std::call_once(once, [] {
    try {
      cuda::gate::require_all();
    } catch (const std::exception& e) {
      refused = e.what();
    }
  });
  if (!refused.empty()) throw std::runtime_error(refused);
}

class CudaModel final : public Model {
 public:
  explicit CudaModel(const ModelConfig& cfg)
      : cfg_((cfg.validate(), cfg)), specs_(param_specs(cfg)), params_(make_float_params(cfg)),
        dparams_(device_params(params_)), engine_(cfg_, dparams_, kernels_) {
    m_.resize(params_.size());
    v_.resize(params_.size());
    for (std::size_t i = 0; i < params_.size(); ++i)
      if (params_[i].trainable) {
        m_[i].assign(params_[i].value.size(), 0.0f);
        v_[i].assign(params_[i].value.size(), 0.0f);
      }
  }

  const ModelConfig& config() const override { return cfg_; }
  void set_recompute(bool recompute) override { engine_.recompute_blocks = recompute; }
  // The host view is brought up to date first; after non-const access the
  // caller may have written it, so the device copy is refreshed before use.
  std::vector<Param>& params() override {
    sync_host();
    device_values_ = device_grads_ = false;
    return params_;
  }
  const std::vector<Param>& params() const override {
    sync_host();
    return params_;
  }

  void init(std::uint64_t seed) override {
    for (std::size_t i = 0; i < params_.size(); ++i) {
      init_param(specs_[i], params_[i].value.data(), params_[i].value.size(), seed, 0);
      std::fill(params_[i].grad.begin(), params_[i].grad.end(), 0.0f);
    }
    host_values_ = host_grads_ = true;
    device_values_ = device_grads_ = false;
  }

  float forward_backward(std::span<const std::int32_t> inputs, std::span<const std::int32_t> targets,
                         std::int64_t batch, std::int64_t seq, bool accumulate, int) override {
    check_batch(inputs, targets, batch, seq);
    sync_device_values();
    if (accumulate && !device_grads_) {
      for (std::size_t i = 0; i < params_.size(); ++i)
        if (params_[i].trainable) dparams_[i].grad.upload(params_[i].grad);
    } else if (accumulate && clip_pending_ < 1.0f) {
      // The last optimizer step's clip, applied in place as the host loop does.
      for (std::size_t i = 0; i < params_.size(); ++i)
        if (params_[i].trainable) cuda::launch::scale(dparams_[i].grad.data(), dparams_[i].grad.size(), clip_pending_);
    }
    clip_pending_ = 1.0f;
    const float loss = engine_.run(inputs.data(), targets.data(), static_cast<std::size_t>(batch),
                                   static_cast<std::size_t>(seq), true, accumulate);
    cuda::synchronize("training step");
    device_grads_ = true;
    host_grads_ = false;
    return loss;
  }

  float loss(std::span<const std::int32_t> inputs, std::span<const std::int32_t> targets, std::int64_t batch,
             std::int64_t seq, int) override {
    check_batch(inputs, targets, batch, seq);
    sync_device_values();
    const float l = engine_.run(inputs.data(), targets.data(), static_cast<std::size_t>(batch),
                                static_cast<std::size_t>(seq), false, false);
    cuda::synchronize("loss");
    return l;
  }

  std::string report() const override {
    const cuda::audit::Stats s = cuda::audit::stats();
    if (!cuda::audit::options().enabled) return "audits: off";
    return fmt::format("audits: {} launches, {} cells recomputed on the CPU, {} mismatches, {:.2f} s spent auditing",
                       s.launches, s.cells, s.mismatches, s.seconds);
  }

  std::vector<float> next_logits(std::span<const std::int32_t> tokens, int) override {
    if (tokens.empty()) throw std::invalid_argument("next_logits: no tokens");
    const auto keep = std::min<std::size_t>(tokens.size(), static_cast<std::size_t>(cfg_.max_seq));
    sync_device_values();
    auto out = engine_.last_logits(tokens.data() + (tokens.size() - keep), keep);
    cuda::synchronize("next_logits");
    return out;
  }

  // --- the optimizer on the device -------------------------------------------
  bool owns_optimizer() const override { return true; }

  void set_moments(const std::vector<std::vector<float>>& m, const std::vector<std::vector<float>>& v) override {
    if (m.size() != params_.size() || v.size() != params_.size())
      throw std::invalid_argument("set_moments: one moment vector per parameter expected");
    for (std::size_t i = 0; i < params_.size(); ++i) {
      const std::size_t want = params_[i].trainable ? params_[i].value.size() : 0;
      if (m[i].size() != want || v[i].size() != want)
        throw std::invalid_argument("set_moments: moments of '" + params_[i].name + "' have the wrong size");
      m_[i].upload(m[i]);
      v_[i].upload(v[i]);
    }
  }
  void get_moments(std::vector<std::vector<float>>& m, std::vector<std::vector<float>>& v) const override {
    m.resize(params_.size());
    v.resize(params_.size());
    for (std::size_t i = 0; i < params_.size(); ++i) {
      m[i] = m_[i].download();
      v[i] = v_[i].download();
    }
  }

  float optimizer_step(float grad_scale, float max_norm, const train::AdamWScalars& s) override {
    sync_device_values();
    if (!device_grads_)
      for (std::size_t i = 0; i < params_.size(); ++i)
        if (params_[i].trainable) dparams_[i].grad.upload(params_[i].grad);
    // The trainer's host loop (trainer.cpp, optim.cpp), step for step.
    std::vector<std::size_t> slots;
    for (std::size_t i = 0; i < params_.size(); ++i)
      if (params_[i].trainable) slots.push_back(i);
    if (grad_scale != 1.0f)
      for (std::size_t i : slots) cuda::launch::scale(dparams_[i].grad.data(), dparams_[i].grad.size(), grad_scale);
    norms_.resize(slots.size());
    for (std::size_t k = 0; k < slots.size(); ++k) {
      const auto& g = dparams_[slots[k]].grad;
      partials_.resize(std::max<std::size_t>(1, (g.size() + 4095) / 4096));
      cuda::launch::sumsq(g.data(), g.size(), partials_.data(), norms_.data() + k);
    }
    std::vector<float> per_tensor = norms_.download();
    const float norm = std::sqrt(num::reduce::sum(per_tensor.data(), per_tensor.size()));
    if (!std::isfinite(norm)) {
      // Name the tensor as clip_grad_norm does (the host copy of the gradients).
      for (std::size_t k = 0; k < slots.size(); ++k)
        if (!std::isfinite(per_tensor[k])) {
          const auto g = dparams_[slots[k]].grad.download();
          for (float x : g)
            if (!std::isfinite(x))
              throw std::runtime_error(fmt::format("non-finite gradient ({}) in '{}': the step is refused", x,
                                                   params_[slots[k]].name));
        }
      throw std::runtime_error(fmt::format("gradient norm overflowed to {}: the step is refused", norm));
    }
    float clip = 1.0f;
    if (max_norm > 0.0f) clip = max_norm / (norm + 1e-6f);
    for (std::size_t i : slots)
      cuda::launch::adamw(dparams_[i].value.data(), dparams_[i].grad.data(), m_[i].data(), v_[i].data(),
                          dparams_[i].value.size(), clip, s, params_[i].decay);
    cuda::synchronize("optimizer step");
    // The device now holds the new values; the gradients there were scaled in
    // place (as the host loop does), the clip applied on the fly (the host
    // loop scales them in place too: the host copy, if read, gets that too).
    host_values_ = false;
    host_grads_ = false;
    clip_pending_ = clip < 1.0f ? clip : 1.0f;
    return norm;
  }

 private:
  void sync_device_values() {
    if (device_values_) return;
    for (std::size_t i = 0; i < params_.size(); ++i) dparams_[i].value.upload(params_[i].value);
    device_values_ = true;
  }
  void sync_host() const {
    if (!host_values_) {
      for (std::size_t i = 0; i < params_.size(); ++i) dparams_[i].value.download(params_[i].value.data());
      host_values_ = true;
    }
    if (!host_grads_) {
      for (std::size_t i = 0; i < params_.size(); ++i)
        if (params_[i].trainable) {
          dparams_[i].grad.download(params_[i].grad.data());
          if (clip_pending_ < 1.0f)
            for (float& g : params_[i].grad) g *= clip_pending_;
        }
      clip_pending_ = 1.0f;
      host_grads_ = true;
    }
  }


  ModelConfig cfg_;
  std::vector<ParamSpec> specs_;
  mutable std::vector<Param> params_;  // the host view (synced lazily from the device)
  std::vector<DeviceParam> dparams_;
  std::vector<cuda::DeviceBuffer<float>> m_, v_;  // AdamW moments (empty for frozen parameters)
  cuda::DeviceBuffer<float> norms_, partials_;
  cuda::OpKernels kernels_;
  Engine<float, cuda::OpKernels, DeviceParam> engine_;
  // Where the newest values and gradients are.
  mutable bool host_values_ = true, host_grads_ = true;
  bool device_values_ = false, device_grads_ = false;
  mutable float clip_pending_ = 1.0f;
};

}  // namespace

std::unique_ptr<Model> make_cuda_model(const ModelConfig& cfg, const std::string& audit) {
  std::string why;
  if (!cuda::available(&why)) throw std::runtime_error("--device cuda: " + why);
  gate_once();
  cuda::audit::Options o = cuda::audit::options();
  o.enabled = audit != "off";
  o.on_mismatch = audit == "warn" ? cuda::audit::OnMismatch::warn : cuda::audit::OnMismatch::stop;
  cuda::audit::configure(o);
  return std::make_unique<CudaModel>(cfg);
}

}  // namespace lockstep::model
