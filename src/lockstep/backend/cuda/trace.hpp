// The launch trace: which kernel paths this process has launched, and which
// of them a start-up gate has proved. Every launcher records the name of the
// kernel path it launches (host side, beside its <<<>>>: the kernels' code is
// untouched), one name per path that can compute differently — each GEMM tile
// kernel and load form, each attention path, the optimizer's four kernels —
// so a training run can be checked for a kernel it launched that no gate
// covered (tests/cuda/launch_trace_test.cpp runs a GPT-2 124M step so).
//
// While a gate case runs (gate::run_gates brackets it with begin_case and
// end_case), the names go to that case; when the case passes they join the
// gated set. Outside a case they go to the run's launch counts.
//
// Launchers include only trace_launch.hpp (launched, compose); this header is
// for the gates and the tests. The process-wide log is defined in trace.cu.
// Thread-safe (a mutex; launches come from one host thread, so it is never
// contended).
#pragma once

#include <cstddef>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "lockstep/backend/cuda/trace_launch.hpp"

namespace lockstep::cuda::trace {

// The bookkeeping, on its own so that it can be tested without a device.
class LaunchLog {
 public:
  void launched(std::string_view name) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (in_case_) {
      if (case_names_.find(name) == case_names_.end()) case_names_.emplace(name);
      return;
    }
    auto it = launches_.find(name);
    if (it == launches_.end()) it = launches_.emplace(std::string(name), 0).first;
    ++it->second;
  }
  // A gate case starts: its launches are held apart until it ends.
  void begin_case() {
    std::lock_guard<std::mutex> lock(mutex_);
    in_case_ = true;
    case_names_.clear();
  }
  // The case ended; only a passing case's kernels count as gated.
  void end_case(bool passed) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (passed) gated_.insert(case_names_.begin(), case_names_.end());
    case_names_.clear();
    in_case_ = false;
  }
  // Launches outside gate cases since the last reset, per name.
  std::map<std::string, long, std::less<>> launches() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return launches_;
  }
  void reset_launches() {
    std::lock_guard<std::mutex> lock(mutex_);
    launches_.clear();
  }
  // The kernel paths launched by gate cases that passed.
  std::set<std::string, std::less<>> gated() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return gated_;
  }
  void reset_gated() {
    std::lock_guard<std::mutex> lock(mutex_);
    gated_.clear();
  }
  // The names in launches() that are not gated, in name order.
  std::vector<std::string> ungated() const {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<std::string> out;
    for (const auto& [name, count] : launches_)
      if (gated_.find(name) == gated_.end()) out.push_back(name);
    return out;
  }

 private:
  mutable std::mutex mutex_;
  bool in_case_ = false;
  std::set<std::string, std::less<>> case_names_;
  std::map<std::string, long, std::less<>> launches_;
  std::set<std::string, std::less<>> gated_;
};

// The process-wide log (trace.cu); launched() and intern() (trace_launch.hpp,
// what the launchers include) write to it.
LaunchLog& process_log();

// Brackets one gate case (gate.cpp's run_gates), also when it throws.
class GateCase {
 public:
  GateCase() { process_log().begin_case(); }
  GateCase(const GateCase&) = delete;
  GateCase& operator=(const GateCase&) = delete;
  ~GateCase() {
    if (!ended_) process_log().end_case(false);
  }
  void end(bool passed) {
    process_log().end_case(passed);
    ended_ = true;
  }

 private:
  bool ended_ = false;
};

}  // namespace lockstep::cuda::trace
