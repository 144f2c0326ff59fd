// CUDA graphs for the decode pass (docs/perf/DECODE_CUDA.md, "CUDA graphs"),
// callable from host code compiled by g++ (no CUDA headers here; the
// definitions are in graph.cu).
//
// The backend's launches and stream-ordered copies go to the calling thread's
// default stream (CMakeLists.txt: --default-stream=per-thread), which, unlike
// the legacy stream, can be captured. A Graph captures what that stream is
// given between begin_capture and end_capture (nothing runs meanwhile) and
// launches it as a whole: one host call for the pass's ~663 kernels. The
// capture is in the global mode, so a cudaMalloc, a synchronous copy or any
// other call that cannot be part of a graph fails (and invalidates the
// capture) instead of being silently left out.
#pragma once

#include <cstddef>
#include <cstdint>

namespace lockstep::cuda::graph {

// Whether decode passes may run as graphs: LOCKSTEP_CUDA_GRAPHS=0 turns them
// off (any other value or none: on), unless a test has set it (set_enabled).
bool enabled();
// Tests: -1 back to the environment's choice, 0 off, 1 on.
void set_enabled(int on);

// Whether a replayed pass launches its graph as soon as its ids and rows are
// on the device (the engine's host walk over the pass, which launches
// nothing in a replay, then overlaps the graph on the device) rather than at
// the logits' copy to the host: on by default, LOCKSTEP_DECODE_GRAPH_EARLY=0 turns it off,
// unless a test or decode_bench has set it (set_early_launch: -1 back to the
// environment's choice, 0 off, 1 on). Nothing the graph reads is written
// after that point of a replayed pass (model/decode.hpp, graph_start).
bool early_launch();
void set_early_launch(int on);

// Timing of replays, for decode_bench (docs/perf/DECODE_CUDA.md §20): with
// timing on, each graph launch is bracketed by two device events, and
// Stats::graph_device_s sums the bracketed graphs' device time.
void set_timing(bool on);
// A replayed decode pass's host time (model/decode.hpp notes it): from the
// pass's start to its graph's launch (the walk), and from the launch to the
// logits on the host (the tail: the rest of the graph and the copy).
void note_replayed_pass(double walk_s, double tail_s);

// Planted bugs for the tests that must catch them (tests/infer/decode_graphs_gpu_test.cpp).
enum class Mutant {
  none,
  // a graph is replayed whatever the pass's rows (the key ignores the row pattern)
  key_ignores_rows,
  // a replayed pass does not upload its rows' slots and positions (the graph
  // reads the ones of the pass before)
  rows_not_restaged,
  // a graph is replayed after device buffers it reads were freed (no memory-epoch check)
  no_epoch_check,
  // with early_launch, a replay's graph is launched before the pass's token
  // ids are staged (it reads the ids of the pass before)
  early_before_ids,
};
void set_mutant(Mutant m);
Mutant mutant();

// What the process's graphs did: captures made, replays (graph launches,
// counting the launch right after each capture), and captures abandoned (the
// pass was computed again without a graph; its pattern is not captured again).
struct Stats {
  std::size_t captures = 0, launches = 0, abandoned = 0;
  // The captured graphs' programmatic edges (LOCKSTEP_DECODE_PDL: a programmatic dependent launch
  // captured after a kernel), and those whose upstream node is not a kernel (a copy, a memset: must be 0,
  // CUDA allows the type only between kernel nodes, so such a launch is captured as a full dependency).
  std::size_t programmatic_edges = 0, programmatic_after_non_kernel = 0;
  // set_timing: the launches timed with events and their device time (each
  // finished launch; stats() waits for the last), and note_replayed_pass's sums.
  std::size_t timed_launches = 0;
  double graph_device_s = 0;
  std::size_t replayed_passes = 0;
  double walk_s = 0, tail_s = 0;
};
Stats stats();

// One captured and instantiated sequence of the calling thread's stream.
class Graph {
 public:
  Graph() = default;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  Graph(Graph&& o) noexcept { swap(o); }
  Graph& operator=(Graph&& o) noexcept {
    swap(o);
    return *this;
  }
  ~Graph() { reset(); }

  // Starts capturing the calling thread's stream (throws naming the CUDA error).
  void begin_capture();
  // Ends the capture and instantiates the graph (throws if the capture was
  // invalidated: the stream is then no longer capturing, nothing is held).
  void end_capture();
  // Gives up this graph: ends a capture that failed part-way (if one is
  // open), discards what is held, clears the error left, counts it abandoned.
  void abandon_capture() noexcept;
  // Launches the instantiated graph on the calling thread's stream.
  void launch();
  bool ready() const { return exec_ != nullptr; }
  void reset() noexcept;
  void swap(Graph& o) noexcept {
    std::swap(graph_, o.graph_);
    std::swap(exec_, o.exec_);
    std::swap(capturing_, o.capturing_);
  }

 private:
  void* graph_ = nullptr;  // cudaGraph_t
  void* exec_ = nullptr;   // cudaGraphExec_t
  bool capturing_ = false;
};

}  // namespace lockstep::cuda::graph
