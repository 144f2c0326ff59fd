// What exactness and the guard cost a replica, per step, under mpirun:
//
//   mpirun --oversubscribe -np 2 build/<dir>/bench/dist/replica_bench [PRESET B T A STEPS THREADS DEVICE]
//   (defaults: gpt2-tiny 4 128 4 6 1 cpu — `lockstep train`'s default model and
//    its 16 x 128-token global batch, as 4 micro-batches of 4)
//
// Each step runs train::run_step with dist::Replica's hooks (each replica's
// micro-batches apart, the gather, the canonical sum, the guard), and then,
// on the same gradients, a plain MPI_Allreduce(MPI_SUM) of P floats: what a
// float data-parallel trainer would pay instead of the gather and sum (its
// sum is not exact: its order depends on MPI's algorithm and the world size).
// The last step has a bit flipped in replica 1's weights before it: the guard
// finds it and repairs, and the step is computed again; its line gives the
// cost of one repair. Replica 0 prints the table (medians over the steps but
// the first and the repaired one). The exchange and the float all-reduce are
// each timed after a barrier, so neither includes waiting for a slower peer.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "lockstep/dist/comm.hpp"
#include "lockstep/dist/replica.hpp"
#include "lockstep/model/model.hpp"
#include "lockstep/num/rng.hpp"
#include "lockstep/train/optim.hpp"
#include "lockstep/train/step.hpp"
#include "lockstep/util/parallel.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using namespace lockstep;

double ms(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::milli>(b - a).count(); }

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const std::string preset = argc > 1 ? argv[1] : "gpt2-tiny";
  const std::int64_t B = argc > 2 ? std::atoll(argv[2]) : 4, T = argc > 3 ? std::atoll(argv[3]) : 128,
                     A = argc > 4 ? std::atoll(argv[4]) : 4;
  const int steps = argc > 5 ? std::atoi(argv[5]) : 6;
  const int threads = argc > 6 ? std::atoi(argv[6]) : 1;
  const std::string device = argc > 7 ? argv[7] : "cpu";
  if (steps < 3) {
    std::fprintf(stderr, "replica_bench: STEPS must be >= 3\n");
    return 2;
  }
  const dist::Launch launch = dist::launch_from_env();
  dist::MpiSession mpi(launch);
  dist::Comm& comm = mpi.comm();
  try {
    model::ModelConfig cfg = model::preset(preset);
    if (preset == "gpt2-tiny") cfg.vocab_size = 1024;  // `lockstep train`'s default: a 1024-token BPE vocabulary
    std::unique_ptr<model::Model> m = model::make_model(cfg, device, "off");
    m->init(1);
    train::OptimizerState opt;
    opt.init(*m);
    train::HostStepStages host(*m, opt);
    model::StepStages& stages = m->step_stages() ? *m->step_stages() : host;
    if (m->step_stages()) m->step_stages()->set_moments(opt.m, opt.v);

    dist::ReplicaOptions ro;
    ro.device = device;
    ro.threads = util::resolve_threads(threads);
    ro.fault.kind = dist::Fault::Kind::bitflip;
    ro.fault.rank = comm.size() > 1 ? 1 : -1;
    ro.fault.step = steps;
    dist::Replica rep(comm, ro);
    train::StepHooks hooks;
    hooks.computes_micro_batch = [&](std::int64_t a) { return rep.computes(a); };
    // Timed here, the exchange after a barrier: the time one replica waits
    // for a slower one to finish its micro-batches is imbalance, not the
    // reduction's cost (the float all-reduce below is timed the same way).
    double keep_ms = 0, exchange_ms = 0;
    hooks.keep_micro_batch = [&](std::int64_t a, float l, const model::TensorTable& g) {
      const auto t = Clock::now();
      rep.keep(a, l, g);
      keep_ms += ms(t, Clock::now());
    };
    hooks.reduce_gradients = [&](model::TensorTable& g, std::span<float> l) {
      MPI_Barrier(MPI_COMM_WORLD);
      const auto t = Clock::now();
      rep.reduce(g, l);
      exchange_ms += ms(t, Clock::now());
    };
    hooks.guard_weights = [&](const model::TensorTable& w, model::StepStages& s) { return rep.guard(w, s); };
    hooks.after_update = [&](const model::TensorTable& w) { rep.after_update(w); };

    std::size_t P = 0;
    for (const auto& p : m->params())
      if (p.trainable) P += p.value.size();
    std::vector<float> scratch(P);
    const auto n = static_cast<std::size_t>(B * T * A);
    std::vector<std::int32_t> in(n), tg(n);
    std::vector<double> step_ms, reduce_ms, reduce_all_ms, guard_ms, float_ms;
    double repair_ms = 0, repaired_step_ms = 0;
    const auto sc = train::adamw_scalars({}, 1e-3f, 1);
    for (int s = 1; s <= steps; ++s) {
      for (std::size_t i = 0; i < n; ++i) {
        in[i] = static_cast<std::int32_t>(num::rng::bits32(5, static_cast<std::uint64_t>(s), i) %
                                          static_cast<std::uint32_t>(cfg.vocab_size));
        tg[i] = static_cast<std::int32_t>(num::rng::bits32(6, static_cast<std::uint64_t>(s), i) %
                                          static_cast<std::uint32_t>(cfg.vocab_size));
      }
      rep.begin_step(s, A, stages.weights());
      keep_ms = exchange_ms = 0;
      MPI_Barrier(MPI_COMM_WORLD);
      const auto t0 = Clock::now();
      train::run_step(stages, {in, tg, B, T, A}, 1.0f, sc, hooks, ro.threads);
      const auto t1 = Clock::now();
      // The plain float all-reduce of the same P floats (after the step: the
      // gradients are already reduced; only the time matters here).
      model::TensorTable g = stages.gradients();
      std::size_t o = 0;
      for (const auto& t : g.tensors) {
        if (!g.on_device) std::copy(t.data, t.data + t.n, scratch.begin() + static_cast<std::ptrdiff_t>(o));
        o += t.n;
      }
      MPI_Barrier(MPI_COMM_WORLD);
      const auto t2 = Clock::now();
      MPI_Allreduce(MPI_IN_PLACE, scratch.data(), static_cast<int>(P), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      const auto t3 = Clock::now();
      const dist::StepFigures& f = rep.figures();
      if (f.repaired > 0) {
        repair_ms = f.guard_ms;
        repaired_step_ms = ms(t0, t1);
      } else if (s > 1) {
        step_ms.push_back(ms(t0, t1));
        reduce_ms.push_back(keep_ms + exchange_ms);
        reduce_all_ms.push_back(f.reduce_ms);
        guard_ms.push_back(f.guard_ms);
        float_ms.push_back(ms(t2, t3));
      }
    }
    if (comm.rank() == 0) {
      const double st = median(step_ms), re = median(reduce_ms), gu = median(guard_ms), fl = median(float_ms);
      const double compute = st - median(reduce_all_ms) - gu;  // micro-batches + update (+ imbalance)
      std::printf("replica_bench: %s (%zu trainable floats), %lld x %lld windows of %lld tokens, %d replica(s), %d "
                  "thread(s) each, device %s\n",
                  cfg.summary().c_str(), P, static_cast<long long>(A), static_cast<long long>(B),
                  static_cast<long long>(T), comm.size(), ro.threads, device.c_str());
      std::printf("  step (exact reduction + guard)     %9.2f ms\n", st);
      std::printf("  exact reduction (copies + gather + sum, after a barrier) %9.2f ms  %5.1f%% of the step\n", re,
                  100 * re / st);
      std::printf("  guard (hash + exchange + compare)  %9.2f ms  %5.1f%% of the step\n", gu, 100 * gu / st);
      std::printf("  plain MPI float all-reduce         %9.2f ms  %5.1f%% of a float step (%.2f ms)\n", fl,
                  100 * fl / (compute + fl), compute + fl);
      std::printf("  exactness + guard over float       %+9.2f ms  %+5.1f%% per step\n", re + gu - fl,
                  100 * (re + gu - fl) / (compute + fl));
      if (comm.size() > 1)
        std::printf("  one repair (detect + weights and moments from a healthy replica) %.2f ms; the repaired step "
                    "%.2f ms (computed twice)\n",
                    repair_ms, repaired_step_ms);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "replica_bench (replica %d): %s\n", comm.rank(), e.what());
    comm.abort(1);
  }
  return 0;
}
