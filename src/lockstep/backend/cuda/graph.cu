// Definitions of graph.hpp.
#include "lockstep/backend/cuda/graph.hpp"

#include <cuda_runtime.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

namespace lockstep::cuda::graph {
namespace {

std::atomic<int> g_enabled{-1};
std::atomic<Mutant> g_mutant{Mutant::none};
std::atomic<std::size_t> g_captures{0}, g_launches{0}, g_abandoned{0};

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

Stats stats() { return {g_captures.load(), g_launches.load(), g_abandoned.load()}; }

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
