// The interface the trainer, the checkpoints and generation use: a transformer
// of one of the three families, its parameters under Hugging Face names, and
// one canonical forward/backward over a batch of token windows.
//
// The model is the composition of the verified op specifications
// (src/lockstep/ops/) in the order its family's layer op lists declare
// (src/lockstep/model/families/, run by the engine in transformer.hpp); the CPU backend runs that composition in
// the canonical float arithmetic, with the matrix products on the fast GEMM
// (src/lockstep/backend/cpu/gemm.hpp), which is bit-identical to the
// specification's. Its bits do not depend on the thread count.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "lockstep/model/config.hpp"

namespace lockstep::train {
struct AdamWScalars;
}

namespace lockstep::model {

// One parameter tensor. `name` is the Hugging Face name of the checkpoint
// format ("transformer.h.0.attn.c_attn.weight", "model.layers.0.self_attn.q_proj.weight");
// `shape` is lockstep's internal layout (nn.Linear's [out, in] for every matrix);
// the checkpoint writer converts where HF differs (GPT-2's Conv1D stores [in, out]).
struct Param {
  std::string name;
  std::vector<std::int64_t> shape;
  std::vector<float> value;
  std::vector<float> grad;  // same size as value
  bool decay = true;        // AdamW weight decay applies (matrices and embeddings; not norms/biases)
  bool trainable = true;    // false: frozen (LoRA base weights)
};

class Model {
 public:
  virtual ~Model() = default;
  virtual const ModelConfig& config() const = 0;
  virtual std::vector<Param>& params() = 0;
  virtual const std::vector<Param>& params() const = 0;

  // Deterministic initialization from Philox(seed): GPT-2 style N(0, 0.02),
  // residual projections scaled by 1/sqrt(2·n_layer), norms at 1, biases at 0.
  virtual void init(std::uint64_t seed) = 0;

  // Mean cross-entropy (natural log) over the batch·seq targets, and the
  // gradient of that mean into every trainable Param::grad: overwritten when
  // accumulate is false, added (grad = grad + new, in call order) when true.
  // inputs, targets: [batch, seq] row-major; seq <= max_seq.
  virtual float forward_backward(std::span<const std::int32_t> inputs, std::span<const std::int32_t> targets,
                                 std::int64_t batch, std::int64_t seq, bool accumulate, int threads) = 0;

  // The same loss without the backward (validation).
  virtual float loss(std::span<const std::int32_t> inputs, std::span<const std::int32_t> targets,
                     std::int64_t batch, std::int64_t seq, int threads) = 0;

  // Logits of the last position of one sequence (generation): [vocab_size].
  virtual std::vector<float> next_logits(std::span<const std::int32_t> tokens, int threads) = 0;

  // Activations: kept from the forward for the backward (false, the default),
  // or recomputed block by block just before each block's backward (true:
  // one block's activations in memory instead of n_layer blocks'). The bits
  // are the same either way.
  virtual void set_recompute(bool recompute) = 0;

  // Lines about the device work so far (the CUDA model: what its start-up
  // gates proved, its live audits' launches, cells and cost); "" for the CPU model.
  virtual std::string report() const { return {}; }

  // --- Optional: the optimizer step on the model's own storage ---------------
  // A device model updates its parameters where they live, so values and
  // gradients do not cross to the host every step. The trainer then calls
  // these instead of its host loop; the update is train/optim.hpp's, bit for
  // bit (the same per-tensor canonical sums of squares, the same clip scale,
  // the same adamw_element).
  virtual bool owns_optimizer() const { return false; }
  // The AdamW moments (the trainer's OptimizerState layout: one vector per
  // parameter, empty for a frozen one), in and out.
  virtual void set_moments(const std::vector<std::vector<float>>&, const std::vector<std::vector<float>>&) {
    throw std::logic_error("set_moments: this model does not own its optimizer");
  }
  virtual void get_moments(std::vector<std::vector<float>>&, std::vector<std::vector<float>>&) const {
    throw std::logic_error("get_moments: this model does not own its optimizer");
  }
  // grads *= grad_scale (when != 1), the global L2 norm, clipping to max_norm
  // (when > 0), then AdamW with `s`. Returns the norm before clipping; throws
  // std::runtime_error naming the tensor on a non-finite gradient (as
  // train::clip_grad_norm does), with no update applied.
  virtual float optimizer_step(float /*grad_scale*/, float /*max_norm*/, const train::AdamWScalars&) {
    throw std::logic_error("optimizer_step: this model does not own its optimizer");
  }

  // The trainer's whole step, for a model that owns its optimizer: `accum`
  // micro-batches of [batch, seq] (inputs and targets hold accum·batch·seq
  // tokens, micro-batch after micro-batch), each's gradient accumulated; the
  // loss is the float sum of the micro-batch means in order (from +0), divided
  // by accum when accum > 1; then what optimizer_step(1/accum, max_norm, s)
  // does — unless the loss is not finite: then no parameter or moment is
  // updated and the loss is returned for the caller to refuse the step (the
  // gradients may already carry the 1/accum scale: they are not checkpointed). The result is that of
  // forward_backward per micro-batch then optimizer_step, bit for bit; a
  // device model runs it without waiting for the device until the step's end.
  struct StepStats {
    float loss = 0.0f;
    float norm = 0.0f;  // NaN when no update was tried (non-finite loss)
  };
  virtual StepStats train_step(std::span<const std::int32_t> /*inputs*/, std::span<const std::int32_t> /*targets*/,
                               std::int64_t /*batch*/, std::int64_t /*seq*/, std::int64_t /*accum*/,
                               float /*max_norm*/, const train::AdamWScalars&, int /*threads*/) {
    throw std::logic_error("train_step: this model does not own its optimizer");
  }
};

// Throws std::invalid_argument unless batch, seq > 0 and inputs and targets
// hold batch·seq tokens each (every Model's forward_backward and loss check it).
void check_batch(std::span<const std::int32_t> inputs, std::span<const std::int32_t> targets, std::int64_t batch,
                 std::int64_t seq);

// The CPU model for a config (throws std::invalid_argument on a bad config).
std::unique_ptr<Model> make_cpu_model(const ModelConfig& cfg);

// The same model on the CUDA device (backend/cuda/): the same engine over the
// CUDA kernel set, so the same loss and gradient bits as make_cpu_model. The
// first call in a process runs the start-up gates (backend/cuda/gate.hpp) and
// throws std::runtime_error naming a refused kernel; it also throws when the
// build has no CUDA backend or no device is present.
// audit: the live audits (backend/cuda/audit.hpp) of its matrix products and
// attention launches: "stop" (a mismatch stops the run), "warn", or "off".
std::unique_ptr<Model> make_cuda_model(const ModelConfig& cfg, const std::string& audit = "stop");
// Whether make_model(cfg, device, ...) can run here ("cpu": always; "cuda": a
// CUDA build with a usable device), and if not why, in words a user can act
// on. Cheap: the trainer asks before it prepares data.
bool device_available(const std::string& device, std::string* why = nullptr);
bool cuda_device_available(std::string* why);  // device_available("cuda"): backend/cuda, or the stand-in

// device "cpu" or "cuda" (throws std::invalid_argument naming --device or
// --audit otherwise); audit applies to cuda.
std::unique_ptr<Model> make_model(const ModelConfig& cfg, const std::string& device,
                                  const std::string& audit = "stop");

}  // namespace lockstep::model
