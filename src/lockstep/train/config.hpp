// A training run's settings: every `lockstep train` flag, their defaults (the
// README's one-command run), validation with messages that name the flag, and
// the JSON form stored beside each checkpoint (so --resume continues the same run).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "lockstep/model/config.hpp"
#include "lockstep/train/optim.hpp"

namespace lockstep::train {

struct TrainConfig {
  // Model and data.
  std::string model = "gpt2-tiny";  // a preset (model::preset_names()); vocab_size comes from the tokenizer
  std::string data;                 // text file or folder; "" = the embedded Jane Austen novels
  std::int32_t vocab = 1024;        // BPE vocabulary trained on the training split
  double val_fraction = 0.05;       // documents held out for validation
  std::string out = "runs/default"; // run directory: checkpoints, metrics.jsonl, data cache

  // Steps and batches. One optimizer step sees batch·accum windows of seq tokens.
  std::int64_t steps = 600;
  std::int64_t batch = 16;          // windows per micro-batch
  std::int64_t seq = 128;           // tokens per window (<= the model's context)
  std::int64_t accum = 1;           // micro-batches per step (gradient accumulation)

  // Optimizer and schedule (optim.hpp).
  double lr = 2e-3;
  std::int64_t warmup = 60;
  double min_lr_ratio = 0.1;
  double weight_decay = 0.1;
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8;
  double grad_clip = 1.0;           // global L2 norm; 0 = no clipping

  // The linear layers (model::LinearMode, docs/UNITS.md): float, or units (the
  // int8 unit linear in every block's linear layers; unit_backward: dx and dW
  // through int8 products too; units_head: the LM head too). Part of the run:
  // a resume keeps them.
  std::string linear = "float";
  bool unit_backward = false;
  bool units_head = false;
  // Attention (model::AttentionMode): float, or units (QKᵀ and P·V through
  // int8 units, ops/unit_attention.hpp). Part of the run, as linear.
  std::string attention = "float";

  // Execution.
  int threads = 0;                  // 0 = all hardware threads (the bits do not depend on it)
  std::string device = "cpu";       // cpu or cuda (the same bits on either; a run may resume on the other)
  std::string activations = "keep";  // keep (for the backward) or recompute (block by block; same bits, less memory)
  std::string audit = "stop";       // cuda: live audits of GEMM/attention cells; stop, warn or off
  double audit_budget = 5;          // cuda: percent of wall time the audits may take, per kind (100: every launch)
  std::uint64_t seed = 1;           // model init and batch sampling
  std::int64_t eval_every = 100;    // steps between validation passes (0 = only at the end)
  std::int64_t eval_tokens = 16384; // validation tokens per periodic pass (the final pass scores all)
  std::int64_t save_every = 200;    // steps between checkpoints (0 = only at the end)
  std::int64_t log_every = 0;       // plain progress line every N steps when not a TTY (0 = ~50 lines)
  double max_minutes = 10;          // wall-clock budget for the whole command (0 = none): stop, evaluate, save

  AdamWConfig adamw() const;
  ScheduleConfig schedule() const;

  // Throws std::invalid_argument naming the flag ("--batch must be >= 1, got 0").
  void validate() const;
  // The model configuration the run trains: the preset with vocab_size and
  // bos/eos set from the trained tokenizer. Throws naming --model / --seq.
  model::ModelConfig model_config(std::int64_t vocab_size, std::int64_t eos_token) const;

  std::string to_json() const;  // every field, by flag name
  static TrainConfig from_json(std::string_view json, const std::string& what = "run config");
};

// Numeric flag parsing shared by the CLI: decimal or scientific notation
// ("2e-4", "1e3"), the whole text must be the number; errors name the flag:
//   "--lr: expected a number, got 'abc'", "--steps: expected a whole number, got 2.5".
double parse_real(std::string_view flag, std::string_view text);
std::int64_t parse_int(std::string_view flag, std::string_view text);

}  // namespace lockstep::train
