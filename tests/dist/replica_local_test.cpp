// dist::Replica in one process: N replicas as threads over an in-memory
// transport (LocalComm below, the same all_gather/send_from contract as MPI,
// deadlines included), so the reduction's exactness, the guard, the repair
// and the timeouts are checked in every build, MPI or not, and under the
// sanitizers. Each replica is a CPU model running train::run_step with the
// replica's hooks; the reference is the plain single-process run_step.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "lockstep/dist/comm.hpp"
#include "lockstep/dist/replica.hpp"
#include "lockstep/model/config.hpp"
#include "lockstep/model/model.hpp"
#include "lockstep/num/hash.hpp"
#include "lockstep/num/rng.hpp"
#include "lockstep/train/checkpoint.hpp"
#include "lockstep/train/optim.hpp"
#include "lockstep/train/step.hpp"

namespace {

using namespace lockstep;
using Clock = std::chrono::steady_clock;

// Messages between threads, keyed by (from, to, tag).
struct Hub {
  std::mutex mu;
  std::condition_variable cv;
  std::map<std::tuple<int, int, int>, std::vector<std::byte>> box;
};

class LocalComm final : public dist::Comm {
 public:
  LocalComm(Hub& hub, int rank, int size) : hub_(hub), rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void all_gather(std::byte* buf, const std::vector<std::size_t>& offset, const std::vector<std::size_t>& bytes,
                  double timeout_s, const std::string& what, const std::vector<int>& withhold_from) override {
    const int tag = tag_++;
    const auto me = static_cast<std::size_t>(rank_);
    for (int q = 0; q < size_; ++q)
      if (q != rank_ && std::find(withhold_from.begin(), withhold_from.end(), q) == withhold_from.end())
        put(q, tag, buf + offset[me], bytes[me]);
    std::vector<int> from;
    for (int q = 0; q < size_; ++q)
      if (q != rank_) from.push_back(q);
    take(from, tag, timeout_s, what, [&](int q) { return buf + offset[static_cast<std::size_t>(q)]; });
  }
  void send_from(int root, const std::vector<int>& to, std::byte* buf, std::size_t bytes, double timeout_s,
                 const std::string& what) override {
    const int tag = tag_++;
    if (rank_ == root) {
      for (int q : to)
        if (q != root) put(q, tag, buf, bytes);
    } else if (std::find(to.begin(), to.end(), rank_) != to.end()) {
      take({root}, tag, timeout_s, what, [&](int) { return buf; });
    }
    (void)bytes;
  }
  [[noreturn]] void abort(int) override { throw std::logic_error("LocalComm::abort"); }

 private:
  void put(int to, int tag, const std::byte* p, std::size_t n) {
    std::lock_guard<std::mutex> lock(hub_.mu);
    hub_.box[{rank_, to, tag}].assign(p, p + n);
    hub_.cv.notify_all();
  }
  template <class Dst>
  void take(const std::vector<int>& from, int tag, double timeout_s, const std::string& what, Dst dst) {
    const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
    std::unique_lock<std::mutex> lock(hub_.mu);
    for (int q : from) {
      const auto key = std::make_tuple(q, rank_, tag);
      if (!hub_.cv.wait_until(lock, deadline, [&] { return hub_.box.count(key) > 0; })) {
        throw dist::ReplicaTimeout(what + ": nothing from replica " + std::to_string(q), {q});
      }
      auto& m = hub_.box[key];
      std::memcpy(dst(q), m.data(), m.size());
      hub_.box.erase(key);
    }
  }
  Hub& hub_;
  int rank_, size_, tag_ = 1;
};

constexpr std::int64_t B = 2, T = 16, A = 6, kSteps = 3;

std::vector<std::int32_t> tokens(std::int64_t step, std::uint64_t stream, std::int64_t vocab) {
  std::vector<std::int32_t> t(static_cast<std::size_t>(B * T * A));
  for (std::size_t i = 0; i < t.size(); ++i)
    t[i] = static_cast<std::int32_t>(num::rng::bits32(static_cast<std::uint64_t>(step), stream, i) %
                                     static_cast<std::uint32_t>(vocab));
  return t;
}

struct Outcome {
  std::uint64_t weights = 0, optimizer = 0;
  std::int64_t repairs = 0;
  std::string error;
};

// kSteps steps of gpt2-micro; `world` 0: one process without hooks.
std::vector<Outcome> run_replicas(int world, dist::Fault fault = {}, double timeout_s = 30) {
  const model::ModelConfig cfg = model::preset("gpt2-micro");
  const int n = std::max(world, 1);
  std::vector<Outcome> out(static_cast<std::size_t>(n));
  Hub hub;
  const auto body = [&](int rank) {
    Outcome& r = out[static_cast<std::size_t>(rank)];
    try {
      auto m = model::make_cpu_model(cfg);
      m->init(7);
      train::OptimizerState opt;
      opt.init(*m);
      train::HostStepStages stages(*m, opt);
      LocalComm comm(hub, rank, n);
      std::unique_ptr<dist::Replica> rep;
      train::StepHooks hooks;
      if (world > 0) {
        dist::ReplicaOptions o;
        o.timeout_s = timeout_s;
        o.fault = fault;
        rep = std::make_unique<dist::Replica>(comm, o);
        dist::Replica* p = rep.get();
        hooks.computes_micro_batch = [p](std::int64_t a) { return p->computes(a); };
        hooks.keep_micro_batch = [p](std::int64_t a, float l, const model::TensorTable& g) { p->keep(a, l, g); };
        hooks.reduce_gradients = [p](model::TensorTable& g, std::span<float> l) { p->reduce(g, l); };
        hooks.guard_weights = [p](const model::TensorTable& w, model::StepStages& s) { return p->guard(w, s); };
        hooks.after_update = [p](const model::TensorTable& w) { p->after_update(w); };
      }
      for (std::int64_t s = 1; s <= kSteps; ++s) {
        const auto in = tokens(s, 1, cfg.vocab_size), tg = tokens(s, 2, cfg.vocab_size);
        if (rep) rep->begin_step(s, A, stages.weights());
        train::run_step(stages, {in, tg, B, T, A}, 1.0f, train::adamw_scalars({}, 1e-3f, s), hooks, 1);
      }
      r.weights = train::weights_hash(*m);
      r.optimizer = train::optimizer_hash(*m, opt);
      if (rep) r.repairs = rep->repairs();
    } catch (const std::exception& e) {
      r.error = e.what();
    }
  };
  std::vector<std::thread> threads;
  for (int q = 0; q < n; ++q) threads.emplace_back(body, q);
  for (auto& t : threads) t.join();
  return out;
}

}  // namespace

TEST(ReplicaLocal, WeightsAndMomentsDoNotDependOnTheNumberOfReplicas) {
  const Outcome plain = run_replicas(0)[0];
  ASSERT_EQ(plain.error, "");
  for (int n : {1, 2, 3, 4}) {  // 4 shares 6 micro-batches unevenly (2, 2, 1, 1)
    for (const Outcome& r : run_replicas(n)) {
      ASSERT_EQ(r.error, "") << n;
      EXPECT_EQ(r.weights, plain.weights) << n << " replicas";
      EXPECT_EQ(r.optimizer, plain.optimizer) << n << " replicas";
    }
  }
}

TEST(ReplicaLocal, AFlippedBitIsRepairedOntoTheFaultFreeRun) {
  const Outcome plain = run_replicas(0)[0];
  for (int n : {2, 3}) {
    for (int bad : {0, n - 1}) {
      dist::Fault f;
      f.kind = dist::Fault::Kind::bitflip;
      f.rank = bad;
      f.step = 2;
      f.tensor = 3;
      f.index = 5;
      f.bit = 9;
      const std::vector<Outcome> runs = run_replicas(n, f);
      for (const Outcome& r : runs) {
        ASSERT_EQ(r.error, "") << n;
        EXPECT_EQ(r.weights, plain.weights) << n << " replicas, flip on " << bad;
        EXPECT_EQ(r.optimizer, plain.optimizer);
        EXPECT_EQ(r.repairs, 1);
      }
    }
  }
}

TEST(ReplicaLocal, AStalledReplicaEndsTheWaitNamingIt) {
  dist::Fault f;
  f.kind = dist::Fault::Kind::stall;
  f.rank = 1;
  f.step = 2;
  f.seconds = 1.5;
  const auto t0 = Clock::now();
  const std::vector<Outcome> runs = run_replicas(3, f, 0.3);
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 20.0);
  for (int r : {0, 2})
    EXPECT_NE(runs[static_cast<std::size_t>(r)].error.find("waiting for the gradients of step 2: nothing from replica 1"),
              std::string::npos)
        << runs[static_cast<std::size_t>(r)].error;
  // A late one within the timeout is waited for.
  f.seconds = 0.2;
  const Outcome plain = run_replicas(0)[0];
  for (const Outcome& r : run_replicas(3, f, 10)) {
    EXPECT_EQ(r.error, "");
    EXPECT_EQ(r.weights, plain.weights);
  }
}
