// The step profile's device side (profile.hpp): the events, the scope, the
// capture window. The summaries and the formatting are in profile.cpp.
#include "lockstep/backend/cuda/profile.hpp"

#include <cuda_profiler_api.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace lockstep::cuda::profile {
namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string("CUDA error in profile: ") + what + ": " +
                                                 cudaGetErrorString(e));
}

// One interval's opening: its event and what it is attributed to. Events are
// created once and reused by later profiles (creation costs more than a record).
struct Mark {
  std::string scope, kernel;
};
struct State {
  bool open = false;
  std::vector<cudaEvent_t> events;  // the pool; the first `used` are this profile's
  std::size_t used = 0;
  std::vector<Mark> marks;  // marks[i] opens the interval events[i] -> events[i + 1]
  std::string scope;
  std::chrono::steady_clock::time_point host_start;
};
State& state() {
  static State s;
  return s;
}

void record(State& s, const char* kernel) {
  if (s.used == s.events.size()) {
    cudaEvent_t e = nullptr;
    check(cudaEventCreate(&e), "cudaEventCreate");
    s.events.push_back(e);
  }
  check(cudaEventRecord(s.events[s.used], 0), "cudaEventRecord");
  ++s.used;
  s.marks.push_back({s.scope, kernel});
}

}  // namespace

bool active() { return state().open; }

void begin() {
  State& s = state();
  if (s.open) throw std::logic_error("profile::begin: a profile is open already");
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize before the profile");
  s.used = 0;
  s.marks.clear();
  s.open = true;
  s.host_start = std::chrono::steady_clock::now();
  record(s, "(before the first launch)");
}

void mark(const char* kernel) {
  State& s = state();
  if (s.open) record(s, kernel);
}

Scope::Scope(std::string label) : outer_(std::move(state().scope)) { state().scope = std::move(label); }
Scope::~Scope() { state().scope = std::move(outer_); }
const std::string& scope() { return state().scope; }

Result end() {
  State& s = state();
  if (!s.open) throw std::logic_error("profile::end: no profile is open");
  record(s, "(closing)");
  s.open = false;
  check(cudaEventSynchronize(s.events[s.used - 1]), "cudaEventSynchronize of the closing event");
  Result r;
  r.host_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - s.host_start).count();
  std::map<std::pair<std::string, std::string>, Row> rows;
  for (std::size_t i = 0; i + 1 < s.used; ++i) {
    float ms = 0;
    check(cudaEventElapsedTime(&ms, s.events[i], s.events[i + 1]), "cudaEventElapsedTime");
    Row& row = rows[{s.marks[i].scope, s.marks[i].kernel}];
    row.scope = s.marks[i].scope;
    row.kernel = s.marks[i].kernel;
    ++row.calls;
    row.ms += ms;
    ++r.intervals;
  }
  float total = 0;
  check(cudaEventElapsedTime(&total, s.events[0], s.events[s.used - 1]), "cudaEventElapsedTime (span)");
  r.device_ms = total;
  for (auto& [key, row] : rows) r.rows.push_back(std::move(row));
  std::stable_sort(r.rows.begin(), r.rows.end(), [](const Row& a, const Row& b) { return a.ms > b.ms; });
  s.marks.clear();
  return r;
}

void capture_start() { check(cudaProfilerStart(), "cudaProfilerStart"); }
void capture_stop() { check(cudaProfilerStop(), "cudaProfilerStop"); }

}  // namespace lockstep::cuda::profile
