// A whole training run, as `lockstep train` does it: prepare (or find) the
// corpus and its tokenizer, build or resume the model, step, evaluate, log
// metrics, checkpoint, and stop cleanly on Ctrl-C or when the wall-clock
// budget is spent.
//
// Under mpirun every replica runs this with RunOptions::replica set: the same
// steps on its share of each batch, output from replica 0 only.
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
#include "lockstep/train/step.hpp"
#include "lockstep/train/trainer.hpp"

namespace lockstep::train {

// A data-parallel replica's part in a run (docs/DISTRIBUTED.md). The CLI
// fills it from dist::Replica under mpirun; every function is a collective
// call that every replica makes at the same point of the run. Replica 0 is
// the writer: progress, metrics.jsonl, run.json and checkpoints are its alone.
struct ReplicaRun {
  int rank = 0, world = 1;
  StepHooks hooks;                                  // the reduction and the guard
  // Before each step (1-based), with the weights as they are then.
  std::function<void(std::int64_t step, std::int64_t accum, const model::TensorTable& weights)> begin_step;
  // Refuses (throws on every replica) values that differ from replica 0's.
  std::function<void(const std::string& what, const std::string& value, const std::string& shown)> agree;
  std::function<void(const std::string& what)> barrier;  // the writer prepares the corpus first
  std::function<bool(bool)> any;                    // stop decisions: true on all when true on one
  // After a save: the writer's directory and recorded hashes ("", 0 on the
  // others) against every replica's own; returns the directory.
  std::function<std::string(const std::string& dir, std::uint64_t recorded_weights, std::uint64_t recorded_optimizer,
                            std::uint64_t own_weights, std::uint64_t own_optimizer)>
      verify_checkpoint;
  std::function<std::string()> step_metrics;        // extra JSON fields of a train line ("" for none)
};

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
  const ReplicaRun* replica = nullptr;  // under mpirun (null: one process)
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
