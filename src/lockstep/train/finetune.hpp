// LoRA finetuning (docs/LORA.md): a frozen base model, adapter tensors on
// the configured projections (model/lora_params.hpp), the loss on the
// completion tokens of SFT records (data/sft.hpp), AdamW over the adapter
// tensors only.
//
// One step s (0-based; update t = s + 1), on the host (a model with its own
// step stages, the CUDA model, runs the same expressions on its device through
// train::run_step: the same bits):
//   examples = batch indices (s·batch + j), j < batch, into the epoch's order
//              (epoch e = index / n: a Philox-seeded Fisher–Yates shuffle of
//              0..n-1 under (seed, e)); each example's window (data::sft_window,
//              cut at max_seq), padded with token 0 / target -1 to the batch's longest
//   lr       = learning_rate(peak, warmup = ceil(warmup_ratio · steps), cosine to
//              min_lr_ratio · peak)                              (optim.hpp)
//   loss     = model.forward_backward(batch) with LoraRun{dropout training, pass = s}
//   norm     = clip_grad_norm(adapter tensors, grad_clip)
//   AdamW update of the adapter tensors (decay on A and B, as HF's Trainer)
// Every step is a pure function of (seed, s) and the state after step s - 1,
// so a resumed run ends on the same bits as an uninterrupted one.
//
// The run directory `out`:
//   lora_state.safetensors   the adapter tensors under their model names
//                            ("<module>.lora_A.weight"), and AdamW's moments
//                            ("<name>.exp_avg", "<name>.exp_avg_sq"); metadata
//                            format "lockstep-lora", step
//   finetune_state.json      step, steps, the config, the adapter hash (written last)
//   metrics.jsonl            one "train" line per step, as `lockstep train` writes
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "lockstep/data/sft.hpp"
#include "lockstep/model/lora.hpp"
#include "lockstep/model/model.hpp"

namespace lockstep::train {

struct FinetuneConfig {
  model::LoraConfig lora;       // r 8, alpha 16, dropout 0.05, q_proj + v_proj
  double lr = 2e-4;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  double weight_decay = 0.01;
  double warmup_ratio = 0.06;
  double min_lr_ratio = 0.0;    // cosine to 0, as HF's get_cosine_schedule_with_warmup
  double grad_clip = 1.0;
  std::int64_t steps = 0;       // 0: epochs · ceil(records / batch)
  std::int64_t epochs = 3;
  std::int64_t batch = 4;
  std::int64_t max_seq = 0;     // 0: the model's context
  std::uint64_t seed = 0;
  std::int64_t save_every = 0;  // 0: at the end only
  std::int64_t log_every = 10;  // plain progress lines (not a terminal)
  int threads = 0;              // 0: all cores
  // A frozen ternary base (BitNet's projections) held as its 2-bit codes and
  // scale on a model that runs them (the CPU model; model::hold_frozen_ternary_as_codes),
  // not as F32 masters: the same bits, a sixteenth of the bytes. Not in the
  // state's config (it changes no result); false keeps the masters (the
  // benchmark's comparison).
  bool base_as_codes = true;
  void validate() const;        // throws std::invalid_argument naming the field
  std::string to_json() const;
};

struct FinetuneIo {
  bool resume = false;            // continue from out/finetune_state.json
  std::FILE* progress = nullptr;  // nullptr: quiet
  bool tty = false;
  std::int64_t stop_after = -1;   // >= 0: stop (state saved) after that many updates (tests: an interrupted run)
};

struct FinetuneReport {
  std::int64_t step = 0, steps = 0;  // updates applied; planned
  float last_loss = 0;
  double seconds = 0, tokens_per_second = 0;
  std::uint64_t adapter_hash = 0;
  // Bytes of AdamW moments the host held for the run: the adapter tensors'
  // only (a frozen parameter has none), whether or not a device held them.
  std::size_t moment_bytes = 0;
};

// The total steps of a run over `records` examples.
std::int64_t finetune_steps(const FinetuneConfig& cfg, std::size_t records);

// XXH3 over the adapter tensors' (f32, shape, values) records in parameter order.
std::uint64_t adapter_hash(const model::Model& model);

// Adds the adapter tensors to `model` (its parameters must be the base's,
// F32, on a model that runs LoRA: the CPU or the CUDA model — the same bits),
// then trains them.
FinetuneReport finetune(model::Model& model, const std::vector<data::SftExample>& data, const FinetuneConfig& cfg,
                        const std::string& out, const FinetuneIo& io = {});

// Reads out/lora_state.safetensors' adapter tensors into a model that has
// none yet (they are added, then set): the finetuned model, for generation.
void load_lora_state(model::Model& model, const FinetuneConfig& cfg, const std::string& out);

}  // namespace lockstep::train
