// A whole training run, as `lockstep train` does it: prepare (or find) the
// corpus and its tokenizer, build or resume the model, step, evaluate, log
// metrics, checkpoint, and stop cleanly on Ctrl-C or when the wall-clock
// budget is spent.
//
// The run directory (--out):
//   run.json          the TrainConfig of the latest session
//   metrics.jsonl     one JSON object per line:
//                       {"type":"train","step":N,"loss":..,"lr":..,"grad_norm":..,"tokens":..,"tok_per_s":..,"elapsed_s":..}
//                       {"type":"val","step":N,"loss":..,"bpb":..,"tokens":..,"bytes":..,"final":bool}
//                     (loss in nats/token; tokens = tokens seen so far; a resumed run first drops
//                     the lines after its checkpoint's step, so the file reads as one run)
//   data/corpus-<key>/  the prepared corpus (data/corpus.hpp)
//   latest, step-NNNNNNNN/  checkpoints (train/checkpoint.hpp)
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "lockstep/model/model.hpp"
#include "lockstep/train/config.hpp"
#include "lockstep/train/trainer.hpp"

namespace lockstep::train {

struct RunOptions {
  std::string resume;          // a run or checkpoint directory; "" = a fresh run
  std::set<std::string> given; // flags given on the command line ("lr", "steps", ...), for --resume
  bool force = false;          // a fresh run into a directory that holds one: start over
  const std::atomic<bool>* stop = nullptr;  // becomes true on Ctrl-C: save and return
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();  // --max-minutes counts from here
  std::FILE* out = stdout;
  bool tty = false;            // draw a progress bar instead of plain lines
  std::string austen_rdb;      // "" = data::find_austen_rdb()
  // Tests: see every step; make the model some other way (default model::make_cpu_model).
  std::function<void(const StepResult&)> on_step;
  std::function<std::unique_ptr<model::Model>(const model::ModelConfig&)> make_model;
};

struct RunSummary {
  std::int64_t first_step = 0, last_step = 0;  // updates applied before / after this session
  bool interrupted = false;    // Ctrl-C
  bool out_of_time = false;    // --max-minutes
  std::optional<EvalResult> final_eval;
  std::string checkpoint;      // the step directory saved last ("" if none)
  std::uint64_t weights_hash = 0;
  double train_seconds = 0;    // this session's stepping time
  std::uint64_t tokens = 0;    // this session's training tokens
};

// Throws std::invalid_argument (bad settings, naming the flag) or
// std::runtime_error (data, checkpoints, a non-finite loss) with a message for
// the user; the newest checkpoint on disk is then the last good one.
RunSummary run_training(TrainConfig cfg, const RunOptions& opt);

// The configuration a resumed run uses: the checkpoint's, except the flags
// that may change between sessions (--steps, --threads, --out, --max-minutes,
// --eval-every, --eval-tokens, --save-every, --log-every), taken from `cli`
// when given. Any other flag given with a different value is an error naming it.
TrainConfig merge_resume_config(const TrainConfig& saved, const TrainConfig& cli, const std::set<std::string>& given);

// SIGINT/SIGTERM set the returned flag (a second one ends the process the
// default way). Installs once; later calls return the same flag.
const std::atomic<bool>& install_interrupt_handler();

}  // namespace lockstep::train
