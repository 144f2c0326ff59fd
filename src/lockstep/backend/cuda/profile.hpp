// The step profile: how long each kernel launch class of a training step runs
// on the device, timed with CUDA events (docs/perf/TRAIN_CUDA.md).
//
// While a profile is open (begin() .. end()), every launch that the launch
// trace sees (trace::launched, beside each <<<>>>) and every stream-ordered
// copy records a CUDA event just before it is enqueued. All work runs on one
// stream in call order, so the interval from a launch's event to the next
// event is that launch's device time plus any idle gap before it started (the
// host late with the launch). The intervals tile the profiled time exactly:
// their sum is the device time from begin() to end(), which is compared with
// the unprofiled step time to show what profiling itself costs. Nothing
// synchronizes between launches; an event costs the host a few microseconds.
//
// Each interval is attributed to (scope, kernel): the kernel is the launch
// trace's path name; the scope is the op call that launched it ("linear fwd
// 16384x768x3072", set by cuda::OpKernels::forward/backward), empty for the
// step's glue (optimizer, loss mean, staging). Intervals that are not a
// launch have names in parentheses ("(host: between steps)").
//
// Also here: the CUDA profiler's capture window (cudaProfilerStart/Stop), so
// that `nsys --capture-range=cudaProfilerApi` or `ncu --profile-from-start off`
// sees the timed steps only, not the start-up gates.
//
// Off (the default), the hooks cost one load of a flag per launch. The model
// opens a profile only where asked (train_bench --profile, LOCKSTEP_CUDA_PROFILE).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::cuda::profile {

// Whether a profile is open (the hooks test this before doing anything).
bool active();

// Opens a profile: waits for the device, drops what an earlier profile held,
// records the opening event. Throws std::logic_error if one is open already.
void begin();
// An interval named `kernel` starts here (in stream order). trace::launched
// and the stream-ordered copies call it; callers may name host-side gaps too.
// No-op when no profile is open.
void mark(const char* kernel);

// The op call whose launches follow (nested scopes restore the outer one).
class Scope {
 public:
  // label: composed only while a profile is open (see OpKernels::forward).
  explicit Scope(std::string label);
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;
  ~Scope();

 private:
  std::string outer_;
};
// An op scope's label: "linear fwd", with a product's shape "linear fwd 16384x768x3072" (rows x in x out).
std::string op_label(std::string_view op, const char* direction);
std::string op_label(std::string_view op, const char* direction, std::size_t rows, std::size_t in, std::size_t out);
// The current scope's label ("" outside any op).
const std::string& scope();

struct Row {
  std::string scope, kernel;
  long calls = 0;
  double ms = 0;  // summed over the profiled span
};
struct Result {
  std::vector<Row> rows;  // by ms, largest first
  double device_ms = 0;   // the sum of all intervals: opening event to closing event
  double host_ms = 0;     // host wall clock from begin() to end()
  long intervals = 0;
};
// Closes the profile: records the closing event, waits for the device, and
// sums the intervals per (scope, kernel). Throws std::logic_error if none is open.
Result end();

// Rows summed over their kernel alone, or over their scope's op (the label's
// first two words, "linear fwd"), largest first.
std::vector<Row> by_kernel(const Result& r);
std::vector<Row> by_op(const Result& r);
// Rows summed over their whole scope label (each op call shape), largest first.
std::vector<Row> by_scope(const Result& r);
// The multiply-add work of one call of a scope whose label carries a product's
// shape "... fwd NxKxM" (2·N·K·M) or "... bwd NxKxM" (4·N·K·M: dx and dW);
// 0 for any other label.
double scope_flops(const std::string& scope);

// The table for people: the op summary, the kernel summary, the op calls by
// shape with their achieved rate (scope_flops / time: TFLOP/s, or TOPS for
// int8), then the `top` largest (scope, kernel) rows; calls and ms per step (divided by `steps`),
// the % of the profiled step, and the sum against `unprofiled_ms_per_step`.
std::string table(const Result& r, int steps, double unprofiled_ms_per_step, std::size_t top = 40);
// The same as one JSON object (every row; the summaries too). `context`: extra
// members written first, as `"key":value,` pairs, without braces (may be empty).
std::string to_json(const Result& r, int steps, double unprofiled_ms_per_step, std::string_view context = {});

// A model's step profile on request: LOCKSTEP_CUDA_PROFILE=FILE.json[:STEP]
// (read at construction; throws std::invalid_argument naming the variable on a
// malformed value). Step STEP (counted by staged(), from 1; default 3, after
// the warm-up) runs under the profile: staged() at the step's start opens it,
// finished() after the step's wait closes it, writes the table to stderr
// (against the step before, unprofiled, timed on the host the same way) and
// the JSON to FILE. Unset: a step count and a clock read, nothing else.
class StepOnRequest {
 public:
  StepOnRequest();
  void staged();
  void finished();

 private:
  std::string path_;
  long long at_ = 3, step_ = 0;
  double previous_ms_ = 0, start_ms_ = 0;
};

// cudaProfilerStart / cudaProfilerStop (errors thrown naming the call).
void capture_start();
void capture_stop();

}  // namespace lockstep::cuda::profile
