// A data-parallel replica: its share of each step, the exact reduction, the
// weight-hash guard and its repair (docs/DISTRIBUTED.md).
//
// The exact reduction is gather-then-canonical-sum. Micro-batch a of a step
// belongs to replica a mod N; a replica computes each of its micro-batches'
// gradients apart (written, not added: train::run_step with
// computes_micro_batch), every replica receives every micro-batch's gradient
// and loss, and every replica sums them in micro-batch order
//   g = g_0;  g = g + g_1;  ...;  g = g + g_{A−1}
// — the expression one process computes when it accumulates (grad = grad +
// new, model/model.hpp) — so the weights after a step are the same bits for
// every N, and N = 1 is the unchanged single-process run (its golden hashes
// stay). The cost: each replica receives (A − A/N) gradients per step instead
// of a ring all-reduce's ~2·(N−1)/N, and keeps its own A/N gradients apart.
//
// The guard (every --guard-every steps, before the update): each replica
// hashes each trainable tensor by bit pattern (num::hash_bits) and the reduced
// gradient; the hashes are exchanged and compared. A divergent replica is the
// minority (N >= 3), or (N = 2, or no majority) the one whose weights are no
// longer those it wrote at its last update (each keeps the hashes its update
// produced from the agreed reduced gradient and re-checks them). It is
// reported (step, replica, host, device, first differing tensor) and repaired
// with the weights and AdamW moments of the lowest healthy replica; the step
// is then computed again from its batch, so the run goes on on the fault-free
// trajectory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "lockstep/dist/comm.hpp"
#include "lockstep/dist/fault.hpp"
#include "lockstep/model/step_stages.hpp"

namespace lockstep::dist {

struct ReplicaOptions {
  std::int64_t guard_every = 1;  // 0: no guard
  double timeout_s = 120;        // the longest wait for a peer (--replica-timeout)
  std::string device = "cpu";    // for reports
  int threads = 1;               // for the canonical sum
  Fault fault;                   // tests only (fault.hpp)
};

// A handshake value that differs between replicas (the run is refused on all).
class Refused : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What the last step cost and found (metrics.jsonl, the benchmark).
struct StepFigures {
  double reduce_ms = 0;   // gather + canonical sum (+ host staging)
  double guard_ms = 0;    // hash + exchange + compare (+ repair)
  bool guarded = false;
  int repaired = 0;       // replicas repaired at this step
  std::uint64_t weights_hash = 0;  // the agreed weights (before the update), when guarded
};

class Replica {
 public:
  // Exchanges host and device names, and refuses (Refused, on every replica)
  // replicas of different NUMERIC_SPEC_VERSION.
  Replica(Comm& comm, ReplicaOptions opt);

  int rank() const { return comm_.rank(); }
  int world() const { return comm_.size(); }
  Comm& comm() { return comm_; }
  const ReplicaOptions& options() const { return opt_; }

  // Every replica's `value` of `what` must be replica 0's; otherwise every
  // replica throws Refused naming both (`shown`: how to print a value).
  void agree(const std::string& what, const std::string& value, const std::string& shown);
  void barrier(const std::string& what, double timeout_s);
  bool any(bool mine);  // true on every replica when it is true on one

  // --- the step's hooks (train/step.hpp) -------------------------------------
  // 1-based: the step about to run, and its micro-batches (the run's --accum,
  // known once a resumed run has read its checkpoint's settings).
  void begin_step(std::int64_t step, std::int64_t accum, const model::TensorTable& weights);
  bool computes(std::int64_t a) const { return a % world() == rank(); }
  void keep(std::int64_t a, float loss, const model::TensorTable& grads);
  void reduce(model::TensorTable& grads, std::span<float> losses);
  bool guard(const model::TensorTable& weights, model::StepStages& stages);
  void after_update(const model::TensorTable& weights);

  const StepFigures& figures() const { return figures_; }
  std::int64_t repairs() const { return repairs_; }

  // After a checkpoint: the writer's directory and the hashes it recorded
  // (the others pass ""/0) against every replica's own; throws naming each
  // replica that does not match. Returns the directory.
  std::string verify_checkpoint(const std::string& dir, std::uint64_t recorded_weights,
                                std::uint64_t recorded_optimizer, std::uint64_t own_weights,
                                std::uint64_t own_optimizer);

  std::string where(int r) const;  // "replica 1 (host h, device cpu)"

 private:
  void size_for(const model::TensorTable& grads);
  std::vector<std::uint64_t> tensor_hashes(const model::TensorTable& t);
  void repair(const std::vector<int>& bad, int source, const model::TensorTable& weights,
              model::StepStages& stages);
  void inject_bitflip(const model::TensorTable& weights);

  Comm& comm_;
  ReplicaOptions opt_;
  std::vector<std::string> hosts_, devices_;
  std::int64_t step_ = 0;
  std::int64_t accum_ = 1;
  std::size_t params_ = 0;                 // trainable floats P
  std::vector<std::size_t> tensor_offset_; // into a micro-batch's slot
  std::vector<float> gathered_;            // A slots of P + 1 floats (gradient, loss), grouped by replica
  std::vector<std::size_t> block_offset_;  // floats: replica r's slots start here
  std::vector<float> staging_;             // host copy of a device table
  std::uint64_t reduced_hash_ = 0;
  std::vector<std::uint64_t> post_update_;  // tensor hashes this replica's last update wrote
  StepFigures figures_;
  std::int64_t repairs_ = 0;
};

}  // namespace lockstep::dist
