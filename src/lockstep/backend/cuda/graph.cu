// Definitions of graph.hpp.
#include "lockstep/backend/cuda/graph.hpp"

#include <cuda_runtime.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
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

}  // namespace

bool enabled() {
  const int set = g_enabled.load();
  if (set >= 0) return set != 0;
  const char* env = std::getenv("LOCKSTEP_CUDA_GRAPHS");
  return env == nullptr || std::strcmp(env, "0") != 0;
}
void set_enabled(int on) { g_enabled.store(on < 0 ? -1 : (on != 0 ? 1 : 0)); }

void set_mutant(Mutant m) { g_mutant.store(m); }
Mutant mutant() { return g_mutant.load(); }

Stats stats() {
  return {g_captures.load(), g_launches.load(), g_abandoned.load(), g_programmatic_edges.load(),
          g_programmatic_after_non_kernel.load()};
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
  check(cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec_), cudaStreamPerThread), "launch");
  g_launches.fetch_add(1);
}

void Graph::reset() noexcept {
  if (exec_ != nullptr) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec_));
  if (graph_ != nullptr) cudaGraphDestroy(static_cast<cudaGraph_t>(graph_));
  exec_ = nullptr;
  graph_ = nullptr;
}

}  // namespace lockstep::cuda::graph
