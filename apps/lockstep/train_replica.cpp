#include "train_replica.hpp"

#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>

#include "lockstep/num/hash.hpp"
#include "lockstep/util/parallel.hpp"

namespace lockstep::cli {

std::unique_ptr<TrainReplica> TrainReplica::start_if_launched(const std::string& device, int threads,
                                                              const ReplicaFlags& flags) {
  const dist::Launch launch = dist::launch_from_env();
  if (!launch.under_launcher) return nullptr;
  if (flags.guard_every < 0) throw std::invalid_argument(fmt::format("--guard-every must be >= 0, got {}", flags.guard_every));
  if (!(flags.timeout_s > 0))
    throw std::invalid_argument(fmt::format("--replica-timeout must be > 0 seconds, got {}", flags.timeout_s));
  return std::unique_ptr<TrainReplica>(new TrainReplica(launch, device, threads, flags));
}

TrainReplica::TrainReplica(const dist::Launch& launch, const std::string& device, int threads,
                           const ReplicaFlags& flags)
    : launch_(launch), mpi_(launch) {
  dist::ReplicaOptions o;
  o.guard_every = flags.guard_every;
  o.timeout_s = flags.timeout_s;
  o.device = device;
  o.threads = util::resolve_threads(threads);
  o.fault = dist::fault_from_env();
  replica_ = std::make_unique<dist::Replica>(mpi_.comm(), o);
  dist::Replica* r = replica_.get();
  run_.rank = r->rank();
  run_.world = r->world();
  run_.hooks.computes_micro_batch = [r](std::int64_t a) { return r->computes(a); };
  run_.hooks.keep_micro_batch = [r](std::int64_t a, float loss, const model::TensorTable& g) { r->keep(a, loss, g); };
  run_.hooks.reduce_gradients = [r](model::TensorTable& g, std::span<float> losses) { r->reduce(g, losses); };
  if (flags.guard_every > 0)
    run_.hooks.guard_weights = [r](const model::TensorTable& w, model::StepStages& s) { return r->guard(w, s); };
  run_.hooks.after_update = [r](const model::TensorTable& w) { r->after_update(w); };
  run_.begin_step = [r](std::int64_t step, std::int64_t accum, const model::TensorTable& w) {
    r->begin_step(step, accum, w);
  };
  run_.agree = [r](const std::string& what, const std::string& v, const std::string& shown) { r->agree(what, v, shown); };
  // Preparing a corpus (training its tokenizer) may take minutes.
  run_.barrier = [r](const std::string& what) { r->barrier(what, std::max(1800.0, r->options().timeout_s)); };
  run_.any = [r](bool mine) { return r->any(mine); };
  run_.verify_checkpoint = [r](const std::string& dir, std::uint64_t rw, std::uint64_t ro, std::uint64_t ow,
                               std::uint64_t oo) { return r->verify_checkpoint(dir, rw, ro, ow, oo); };
  run_.step_metrics = [r] {
    const dist::StepFigures& f = r->figures();
    std::string s = fmt::format(R"(,"replicas":{},"reduce_ms":{:.3f},"guard_ms":{:.3f},"guard":"{}","repaired":{},"repairs":{})",
                                r->world(), f.reduce_ms, f.guard_ms,
                                !f.guarded ? "skipped" : f.repaired > 0 ? "repaired" : "agreed", f.repaired,
                                r->repairs());
    if (f.guarded && f.repaired == 0) s += fmt::format(R"(,"weights_hash":"{}")", num::hash_hex(f.weights_hash));
    return s;
  };
}

void TrainReplica::abort(const std::string& message, int code) {
  std::fprintf(stderr, "lockstep train: replica %d of %d: %s\n", launch_.rank, launch_.world, message.c_str());
  std::fflush(stderr);
  mpi_.comm().abort(code);
  std::_Exit(code);  // abort() does not return; this says so to the compiler
}

}  // namespace lockstep::cli
