// One model over a kernel set: model.hpp's interface for any device.
//
// What the CPU model and the CUDA model share is written once, here: the
// config, the parameter table, the deterministic initialization, the checks
// before a pass (batch sizes, runnable parameter dtypes), and the passes
// themselves (the engine over the kernel set K). Where the parameters live is
// the Storage policy's business:
//
//   CPU  (transformer.cpp)  HostStorage: the engine reads Param itself;
//   CUDA (cuda_model.cpp)   the device copies, synced lazily with the host view,
//                           and the step's stages on the device.
//
// A Storage provides:
//   using EngineParam;                         the parameter type the engine reads
//   static constexpr const char* kName;        "the CPU model" (in refusals)
//   explicit Storage(std::vector<Param>& host) the host view it mirrors
//   std::vector<EngineParam>& engine_params();
//   void host_view_read() const;   the host view brought up to date (const access)
//   void host_view_write();        ... and the caller may write it (non-const access)
//   void host_written();           the host view is the newest (after init)
//   void before_pass(bool accumulate);   values (and, accumulating, gradients)
//                                        where the kernels read them
//   void after_pass(bool wrote_grads, const char* what);   the pass's results are
//                                        where the caller reads them
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "lockstep/model/decode.hpp"
#include "lockstep/model/lora_params.hpp"
#include "lockstep/model/model.hpp"
#include "lockstep/model/params.hpp"
#include "lockstep/model/transformer.hpp"
#include "lockstep/util/parallel.hpp"

namespace lockstep::model {

template <class K, class Storage>
class KernelModel : public Model {
 public:
  explicit KernelModel(const ModelConfig& cfg)
      : cfg_((cfg.validate(), cfg)), specs_(param_specs(cfg)), params_(make_float_params(cfg)), storage_(params_),
        engine_(cfg_, storage_.engine_params(), kernels_) {}
  KernelModel(const KernelModel&) = delete;
  KernelModel& operator=(const KernelModel&) = delete;

  const ModelConfig& config() const override { return cfg_; }
  void set_recompute(bool recompute) override { engine_.recompute_blocks = recompute; }
  bool runs_ternary_codes() const override { return kRunsCodes; }
  // LoRA (lora_branch.hpp): the adapter tensors appended to params() run on
  // every kernel set, the host's and the device's.
  void set_lora(const LoraRun& run) override {
    lora_run_ = run;
    engine_.lora = &lora_run_;
  }
  std::vector<Param>& params() override {
    storage_.host_view_write();
    return params_;
  }
  const std::vector<Param>& params() const override {
    storage_.host_view_read();
    return params_;
  }

  void init(std::uint64_t seed) override {
    require_f32_params(params_, "init");  // it writes F32 values: a parameter held as codes is not re-made
    require_table_params("init");
    for (std::size_t i = 0; i < params_.size(); ++i) {
      init_param(specs_[i], params_[i].value.data(), params_[i].value.size(), seed, 0);
      std::fill(params_[i].grad.begin(), params_[i].grad.end(), 0.0f);
    }
    storage_.host_written();
  }
  // A Storage with init_values (the device's) computes init's values itself;
  // the gradients are zero on the host, as init leaves them.
  void init_where_held(std::uint64_t seed) override {
    if constexpr (requires { storage_.init_values(specs_, seed); }) {
      require_f32_params(params_, "init_where_held");
      require_table_params("init_where_held");
      for (Param& p : params_) std::fill(p.grad.begin(), p.grad.end(), 0.0f);
      storage_.init_values(specs_, seed);
    } else {
      init(seed);
    }
  }

  float forward_backward(std::span<const std::int32_t> inputs, std::span<const std::int32_t> targets,
                         std::int64_t batch, std::int64_t seq, bool accumulate, int threads) override {
    return pass(inputs, targets, batch, seq, threads, true, accumulate);
  }
  float loss(std::span<const std::int32_t> inputs, std::span<const std::int32_t> targets, std::int64_t batch,
             std::int64_t seq, int threads) override {
    return pass(inputs, targets, batch, seq, threads, false, false);
  }

  std::vector<float> next_logits(std::span<const std::int32_t> tokens, int threads) override {
    if (tokens.empty()) throw std::invalid_argument("next_logits: no tokens");
    begin_pass(threads, false);
    // The context window: the last max_seq tokens.
    const auto keep = std::min<std::size_t>(tokens.size(), static_cast<std::size_t>(cfg_.max_seq));
    auto out = engine_.last_logits(tokens.data() + (tokens.size() - keep), keep);
    storage_.after_pass(false, "next_logits");
    return out;
  }

  std::unique_ptr<Decoder> decoder(std::size_t slots, std::size_t context) override {
    if (cfg_.attention == AttentionMode::Units)
      throw std::invalid_argument(
          "decoding: this model's attention runs through int8 units (lockstep_attention = units), and the KV-cache "
          "attention is float only (a model trained with --attention float decodes)");
    // LoRA adapter tensors: the session runs the engine's branch at their
    // projections with the run set_lora gave (no dropout), as next_logits does.
    for (const Param& p : params_) {
      if (p.dtype != tensor::DType::f32)
        throw std::logic_error(fmt::format("decoding: parameter '{}' is held as {} codes, which the float model's "
                                           "decode mode does not read (next_logits does; the decode-only model, "
                                           "make_decode_model, decodes TERNARY2)",
                                           p.name, tensor::dtype_name(p.dtype)));
    }
    auto before = [this](int threads) { begin_pass(threads, false); };
    return std::make_unique<DecodeSession<K, typename Storage::EngineParam, decltype(before)>>(
        cfg_, storage_.engine_params(), kernels_, slots, context, before, engine_.lora);
  }

 protected:
  // One pass over a batch: the mean loss, and with `backward` the gradients.
  float pass(std::span<const std::int32_t> inputs, std::span<const std::int32_t> targets, std::int64_t batch,
             std::int64_t seq, int threads, bool backward, bool accumulate) {
    check_batch(inputs, targets, batch, seq);
    begin_pass(threads, accumulate);
    const float loss = engine_.run(inputs.data(), targets.data(), static_cast<std::size_t>(batch),
                                   static_cast<std::size_t>(seq), backward, accumulate);
    storage_.after_pass(backward, backward ? "training step" : "loss");
    return loss;
  }
  // The float kernels read every parameter as an f32 Param::value: a parameter
  // the caller put in another dtype (params() is writable) is refused by name.
  // A Storage with kRunsCodes (the host's) also runs frozen BitLinear
  // projections held as TERNARY2 codes (the engine's codes path).
  static constexpr bool kRunsCodes = [] {
    if constexpr (requires { Storage::kRunsCodes; }) return Storage::kRunsCodes;
    return false;
  }();
  void require_runnable_params() const {
    if constexpr (kRunsCodes) {
      static constexpr tensor::DType kRuns[] = {tensor::DType::f32, tensor::DType::ternary2};
      require_param_dtypes(params_, kRuns, Storage::kName);
      for (const Param& p : params_)
        if (p.dtype == tensor::DType::ternary2 && !is_bitlinear_weight(cfg_, p.name))
          throw std::invalid_argument("parameter '" + p.name + "' is TERNARY2, but " + Storage::kName +
                                      " runs codes only for the BitLinear projections of a bitnet model");
    } else {
      require_f32_params(params_, Storage::kName);
    }
  }
  // The initialization is the family's table's: a list grown since (LoRA's
  // adapter tensors, which add_lora_params initializes) is refused.
  void require_table_params(const char* what) const {
    if (params_.size() != specs_.size())
      throw std::logic_error(std::string(what) + ": the parameter list is no longer the model's table (adapter "
                             "tensors were added); initialize the base before adding them");
  }
  void begin_pass(int threads, bool accumulate) {
    require_runnable_params();
    kernels_.threads = util::resolve_threads(threads);
    storage_.before_pass(accumulate);
  }

  ModelConfig cfg_;
  std::vector<ParamSpec> specs_;
  mutable std::vector<Param> params_;  // the host view (a device Storage syncs it lazily)
  Storage storage_;
  K kernels_;
  Engine<float, K, typename Storage::EngineParam> engine_;
  LoraRun lora_run_;
};

// Parameters on the host: the engine reads them where they are.
struct HostStorage {
  using EngineParam = Param;
  static constexpr const char* kName = "the CPU model";
  static constexpr bool kRunsCodes = true;
  explicit HostStorage(std::vector<Param>& host) : host_(host) {}
  std::vector<Param>& engine_params() { return host_; }
  void host_view_read() const {}
  void host_view_write() {}
  void host_written() {}
  void before_pass(bool) {}
  void after_pass(bool, const char*) {}

 private:
  std::vector<Param>& host_;
};

}  // namespace lockstep::model
