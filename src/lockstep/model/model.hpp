// The interface the trainer, the checkpoints and generation use: a transformer
// of one of the three families, its parameters under Hugging Face names, and
// one canonical forward/backward over a batch of token windows.
//
// The model is the composition of the verified op specifications
// (src/lockstep/ops/) in the order its layer op lists declare
// (src/lockstep/model/transformer.hpp); the CPU backend runs that composition in
// the canonical float arithmetic, with the matrix products on the fast GEMM
// (src/lockstep/backend/cpu/gemm.hpp), which is bit-identical to the
// specification's. Its bits do not depend on the thread count.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "lockstep/model/config.hpp"

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
};

// The CPU model for a config (throws std::invalid_argument on a bad config).
std::unique_ptr<Model> make_cpu_model(const ModelConfig& cfg);

}  // namespace lockstep::model
