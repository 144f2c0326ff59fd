// Definitions of graph.hpp.
#include "lockstep/backend/cuda/graph.hpp"
#include "lockstep/backend/cuda/env_choice.hpp"

#include <cuda_runtime.h>

#include <atomic>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

namespace lockstep::cuda::graph {
namespace {

std::atomic<int> g_enabled{-1};
std::atomic<Mutant> g_mutant{Mutant::none};
std::atomic<std::size_t> g_captures{0}, g_launches{0}, g_abandoned{0};
std::atomic<std::size_t> g_programmatic_edges{0}, g_programmatic_after_non_kernel{0};

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string("CUDA graph: ") + what + ": " + cudaGetErrorString(e));
}

std::atomic<int> g_early{-1};

// set_timing's events: pairs bracketing launches not yet read, and spare pairs.
struct Timing {
  std::mutex m;
  bool on = false;
  std::vector<std::pair<cudaEvent_t, cudaEvent_t>> pending, spare;
  std::size_t timed = 0, replayed = 0;
  double device_s = 0, walk_s = 0, tail_s = 0;
  // Reads the pending pairs that are done (all of them with wait: a host wait).
  void harvest(bool wait) {
    std::size_t kept = 0;
    for (auto& p : pending) {
      if (!wait && cudaEventQuery(p.second) != cudaSuccess) {
        (void)cudaGetLastError();  // cudaErrorNotReady is no error of ours
        pending[kept++] = p;
        continue;
      }
      float ms = 0;
      if (cudaEventSynchronize(p.second) == cudaSuccess && cudaEventElapsedTime(&ms, p.first, p.second) == cudaSuccess) {
        device_s += 1e-3 * ms;
        ++timed;
      }
      (void)cudaGetLastError();
      spare.push_back(p);
    }
    pending.resize(kept);
  }
};
Timing& timing() {
  static Timing t;
  return t;
}

}  // namespace

bool enabled() {
  const int set = g_enabled.load();
  if (set >= 0) return set != 0;
  return env_on_unless_zero("LOCKSTEP_CUDA_GRAPHS");
}
void set_enabled(int on) { g_enabled.store(on < 0 ? -1 : (on != 0 ? 1 : 0)); }

bool early_launch() {
  const int set = g_early.load();
  if (set >= 0) return set != 0;
  return env_on_unless_zero("LOCKSTEP_DECODE_GRAPH_EARLY");  // on unless =0 (DECODE_CUDA.md §21)
}
void set_early_launch(int on) { g_early.store(on < 0 ? -1 : (on != 0 ? 1 : 0)); }

void set_timing(bool on) {
  Timing& t = timing();
  std::lock_guard<std::mutex> lock(t.m);
  t.on = on;
}
void note_replayed_pass(double walk_s, double tail_s) {
  Timing& t = timing();
  std::lock_guard<std::mutex> lock(t.m);
  ++t.replayed;
  t.walk_s += walk_s;
  t.tail_s += tail_s;
}

void set_mutant(Mutant m) { g_mutant.store(m); }
Mutant mutant() { return g_mutant.load(); }

Stats stats() {
  Stats s{g_captures.load(), g_launches.load(), g_abandoned.load(), g_programmatic_edges.load(),
          g_programmatic_after_non_kernel.load()};
  Timing& t = timing();
  std::lock_guard<std::mutex> lock(t.m);
  t.harvest(true);
  s.timed_launches = t.timed;
  s.graph_device_s = t.device_s;
  s.replayed_passes = t.replayed;
  s.walk_s = t.walk_s;
  s.tail_s = t.tail_s;
  return s;
}

namespace {
// Counts g's programmatic edges into the stats (Stats: LOCKSTEP_DECODE_PDL's launches kept in the graph).
// Bookkeeping only: a failed query counts nothing and leaves no error behind.
void count_programmatic_edges(cudaGraph_t g) {
  std::size_t n = 0;
  if (cudaGraphGetEdges(g, nullptr, nullptr, nullptr, &n) != cudaSuccess || n == 0) {
    (void)cudaGetLastError();
    return;
  }
  std::vector<cudaGraphNode_t> from(n), to(n);
  std::vector<cudaGraphEdgeData> data(n);
  if (cudaGraphGetEdges(g, from.data(), to.data(), data.data(), &n) != cudaSuccess) {
    (void)cudaGetLastError();
    return;
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (data[i].type != cudaGraphDependencyTypeProgrammatic) continue;
    g_programmatic_edges.fetch_add(1);
    cudaGraphNodeType type{};
    if (cudaGraphNodeGetType(from[i], &type) != cudaSuccess || type != cudaGraphNodeTypeKernel)
      g_programmatic_after_non_kernel.fetch_add(1);
  }
}
}  // namespace

void Graph::begin_capture() {
  reset();
  check(cudaStreamBeginCapture(cudaStreamPerThread, cudaStreamCaptureModeGlobal), "begin capture");
  capturing_ = true;
}

void Graph::end_capture() {
  cudaGraph_t g = nullptr;
  capturing_ = false;
  const cudaError_t e = cudaStreamEndCapture(cudaStreamPerThread, &g);
  if (e != cudaSuccess) {
    if (g != nullptr) cudaGraphDestroy(g);
    (void)cudaGetLastError();
    check(e, "end capture");
  }
  graph_ = g;
  count_programmatic_edges(g);
  cudaGraphExec_t x = nullptr;
  const cudaError_t ie = cudaGraphInstantiateWithFlags(&x, g, 0);
  if (ie != cudaSuccess) {
    reset();
    (void)cudaGetLastError();
    check(ie, "instantiate");
  }
  exec_ = x;
  g_captures.fetch_add(1);
}

void Graph::abandon_capture() noexcept {
  if (capturing_) {
    capturing_ = false;
    cudaGraph_t g = nullptr;
    (void)cudaStreamEndCapture(cudaStreamPerThread, &g);  // invalidated: an error, and no graph
    if (g != nullptr) cudaGraphDestroy(g);
  }
  reset();
  (void)cudaGetLastError();
  g_abandoned.fetch_add(1);
}

void Graph::launch() {
  if (exec_ == nullptr) throw std::logic_error("CUDA graph: launch of a graph not captured");
  Timing& t = timing();
  std::unique_lock<std::mutex> lock(t.m);
  if (!t.on) {
    lock.unlock();
    check(cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec_), cudaStreamPerThread), "launch");
    g_launches.fetch_add(1);
    return;
  }
  t.harvest(false);
  std::pair<cudaEvent_t, cudaEvent_t> ev{};
  if (!t.spare.empty()) {
    ev = t.spare.back();
    t.spare.pop_back();
  } else {
    check(cudaEventCreate(&ev.first), "timing event");
    check(cudaEventCreate(&ev.second), "timing event");
  }
  check(cudaEventRecord(ev.first, cudaStreamPerThread), "timing event");
  check(cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec_), cudaStreamPerThread), "launch");
  check(cudaEventRecord(ev.second, cudaStreamPerThread), "timing event");
  t.pending.push_back(ev);
  g_launches.fetch_add(1);
}

void Graph::reset() noexcept {
  if (exec_ != nullptr) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec_));
  if (graph_ != nullptr) cudaGraphDestroy(static_cast<cudaGraph_t>(graph_));
  exec_ = nullptr;
  graph_ = nullptr;
}

}  // namespace lockstep::cuda::graph
