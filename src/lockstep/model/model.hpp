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
#include <string_view>
#include <vector>

#include "lockstep/model/config.hpp"
#include "lockstep/model/step_stages.hpp"
#include "lockstep/tensor/dtype.hpp"
#include "lockstep/tensor/storage.hpp"

namespace lockstep::model {

// One parameter tensor. `name` is the Hugging Face name of the checkpoint
// format ("transformer.h.0.attn.c_attn.weight", "model.layers.0.self_attn.q_proj.weight");
// `shape` is lockstep's internal layout (nn.Linear's [out, in] for every matrix);
// the checkpoint writer converts where HF differs (GPT-2's Conv1D stores [in, out]).
//
// How the value is held (docs/ARCHITECTURE.md, "Typed storage"):
//   dtype F32 (every parameter today): `value` and `grad`, numel floats each
//     (a frozen one may hold an empty `grad`: model/lora_params.hpp's freeze);
//     `frozen_value` is empty.
//   any other dtype: a frozen value held as what it is (BF16/F16 weights,
//     I8 unit codes with per-row steps, TERNARY2 BitNet codes with their scale)
//     in `frozen_value` (whose dtype and shape are the Param's); then
//     trainable is false and `value` and `grad` are empty.
// check_param_storage states this; a model runs only the dtypes its kernels
// implement and refuses the others by name (require_param_dtypes), never
// converting silently.
struct Param {
  std::string name;
  std::vector<std::int64_t> shape;
  std::vector<float> value;
  std::vector<float> grad;  // same size as value
  bool decay = true;        // AdamW weight decay applies (matrices and embeddings; not norms/biases)
  bool trainable = true;    // false: frozen (LoRA base weights)
  tensor::DType dtype = tensor::DType::f32;
  tensor::Storage frozen_value{};  // the value when dtype != F32 (frozen), else empty
};

// Throws std::invalid_argument naming the parameter unless it is held as the
// comment on Param says (F32: value and grad of numel(shape) floats, no
// frozen_value; other dtypes: frozen, value and grad empty, frozen_value of
// that dtype and shape).
void check_param_storage(const Param& p);
// Heap bytes the parameter holds: value, grad and frozen_value.
std::size_t bytes_held(const Param& p);
// For a model whose kernels run the dtypes in `runs`: throws
// std::invalid_argument for the first parameter held otherwise, naming it, its
// dtype and the model ("parameter 'x' is TERNARY2 (frozen); the CPU model
// runs F32 parameters only: it is refused, not converted"); also checks each
// parameter's storage (check_param_storage).
void require_param_dtypes(const std::vector<Param>& params, std::span<const tensor::DType> runs,
                          std::string_view model);
// The F32-only case: the float engines today, and the code that reads
// Param::value by shape (checkpoints, the weight hash).
inline void require_f32_params(const std::vector<Param>& params, std::string_view model) {
  static constexpr tensor::DType kF32[] = {tensor::DType::f32};
  require_param_dtypes(params, kF32, model);
}

// A decode session (model/decode.hpp): a KV cache of slots() sequences of up
// to context() positions each, filled by prefill and decode passes. A token's
// logits are the same bits whichever way it was passed in: in one prefill, in
// chunks, token by token, alone or decoded among other sequences, on any
// thread count. A pass that would run past a sequence's context throws
// std::length_error before anything runs; the session lives no longer than
// its model.
class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual std::size_t slots() const = 0;
  virtual std::size_t context() const = 0;
  virtual std::size_t length(std::size_t slot) const = 0;  // tokens the slot's cache holds
  virtual void clear(std::size_t slot) = 0;                // the slot starts a new sequence
  // Keeps the slot's first n tokens (n <= length): a chat's shared prefix.
  virtual void truncate(std::size_t slot, std::size_t n) = 0;
  // The largest pass a prefill runs (longer prompts go in chunks of it; default 256).
  virtual void set_prefill_chunk(std::size_t rows) = 0;
  // Appends `tokens` to the slot's sequence: the logits of its last token
  // [vocab], or with all_rows of every token [tokens, vocab].
  virtual std::vector<float> prefill(std::size_t slot, std::span<const std::int32_t> tokens, bool all_rows,
                                     int threads) = 0;
  // One token for each listed slot (distinct), in one pass: [slots, vocab].
  virtual std::vector<float> decode(std::span<const std::size_t> slots, std::span<const std::int32_t> tokens,
                                    int threads) = 0;
};

// How a pass applies the model's LoRA adapter tensors (model/lora_params.hpp,
// docs/LORA.md). Without adapter tensors it changes nothing.
struct LoraRun {
  bool enabled = true;     // false: the base alone (bit for bit)
  double scale = 0.0;      // s = lora_scale(config), rounded to the scalar once
  double dropout = 0.0;    // p, applied only when `training`
  bool training = false;
  std::uint64_t seed = 0;  // dropout's key
  std::uint64_t pass = 0;  // dropout's counter: one value per forward_backward (step·accum + micro-batch)
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
  // init(seed)'s values, computed where the model holds its parameters: the
  // CUDA model fills them on the device (the same bits, num/rng.hpp on the
  // device) and the host view is downloaded when it is next read; the
  // default is init(seed). A benchmark's set-up: a 2.4 B-parameter base is
  // tens of seconds of host work, milliseconds of device work.
  virtual void init_where_held(std::uint64_t seed) { init(seed); }

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

  // A decode session over this model's parameters: `slots` sequences of up
  // to `context` positions (0: max_seq). The model must outlive it; its
  // parameters are read as they are at each pass.
  // A model without one (a test's stand-in) throws std::logic_error.
  virtual std::unique_ptr<Decoder> decoder(std::size_t slots, std::size_t context) {
    (void)slots;
    (void)context;
    throw std::logic_error("this model has no decode mode");
  }

  // Activations: kept from the forward for the backward (false, the default),
  // or recomputed block by block just before each block's backward (true:
  // one block's activations in memory instead of n_layer blocks'). The bits
  // are the same either way.
  virtual void set_recompute(bool recompute) = 0;

  // The LoRA settings of the following passes (a model that cannot run
  // adapters throws std::logic_error, as the CUDA model does today).
  virtual void set_lora(const LoraRun& run) {
    (void)run;
    throw std::logic_error("this model does not run LoRA adapters");
  }

  // Whether the passes run a frozen BitLinear weight held as TERNARY2 codes
  // (model::hold_frozen_ternary_as_codes): the CPU model does, with the F32
  // masters' bits; others run F32 parameters only.
  virtual bool runs_ternary_codes() const { return false; }

  // Lines about the device work so far (the CUDA model: what its start-up
  // gates proved, its live audits' launches, cells and cost); "" for the CPU model.
  virtual std::string report() const { return {}; }

  // --- Optional: the stages of a training step on the model's own storage ---
  // A device model runs a step where its parameters live (values, gradients
  // and AdamW moments never cross to the host inside a step) and returns its
  // stages here; train::run_step (train/step.hpp) sequences them, exactly as it
  // sequences the trainer's host stages for a model that returns nullptr. The
  // expressions are the optimizer op's (ops/optim.hpp): the same bits.
  virtual StepStages* step_stages() { return nullptr; }
};

// Throws std::invalid_argument unless batch, seq > 0 and inputs and targets
// hold batch·seq tokens each (every Model's forward_backward and loss check it).
void check_batch(std::span<const std::int32_t> inputs, std::span<const std::int32_t> targets, std::int64_t batch,
                 std::int64_t seq);

// The CPU model for a config (throws std::invalid_argument on a bad config).
std::unique_ptr<Model> make_cpu_model(const ModelConfig& cfg);

#if defined(LOCKSTEP_HAVE_CUDA)
// The same model on the CUDA device (model/cuda_model.cpp): the same engine
// over the CUDA kernel set (backend/cuda/), so the same loss and gradient bits
// as make_cpu_model. The first call in a process runs the start-up gates
// (backend/cuda/gate.hpp) and throws std::runtime_error naming a refused
// kernel; it also throws when no device is present.
// audit: the live audits (backend/cuda/audit.hpp) of its matrix products and
// attention launches: "stop" (a mismatch stops the run), "warn", or "off";
// audit_budget: the share of wall time in (0, 1] they may take
// (audit::Options::budget; 1: every launch).
// Declared only in a build with the CUDA backend (CMake defines
// LOCKSTEP_HAVE_CUDA and compiles model/cuda_model.cpp): without it there is no
// such function to call, and make_model refuses --device cuda by itself.
std::unique_ptr<Model> make_cuda_model(const ModelConfig& cfg, const std::string& audit = "stop",
                                       double audit_budget = 1.0);
bool cuda_device_available(std::string* why);  // device_available("cuda") in a CUDA build
#endif
// Whether make_model(cfg, device, ...) can run here ("cpu": always; "cuda": a
// CUDA build with a usable device), and if not why, in words a user can act
// on. Cheap: the trainer asks before it prepares data.
bool device_available(const std::string& device, std::string* why = nullptr);

// device "cpu" or "cuda" (throws std::invalid_argument naming --device or
// --audit otherwise); audit and audit_budget apply to cuda.
std::unique_ptr<Model> make_model(const ModelConfig& cfg, const std::string& device,
                                  const std::string& audit = "stop", double audit_budget = 1.0);

}  // namespace lockstep::model
