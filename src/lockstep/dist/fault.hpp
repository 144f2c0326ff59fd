// Faults injected into a replica, for tests only (LOCKSTEP_FAULT; never set
// in a real run). One fault per process:
//
//   bitflip:rank=R:step=S[:tensor=T][:index=I][:bit=B]
//       as step S begins (after step S−1's checkpoint, before its micro-
//       batches), flip bit B (default 0: one ulp, the silent kind) of element
//       I (default 0) of trainable tensor T (default 0) in replica R's
//       weights: memory corrupted between two steps (S >= 2).
//   update-bitflip:rank=R:step=S[:...]
//       the same right after step S's update: before step S's checkpoint is
//       written and verified.
//   stall:rank=R:step=S:seconds=X   replica R sends its gradients of step S X seconds late
//   drop:rank=R:step=S              replica R's gradients of step S never reach replica 0
//                                   (the others get them: seed 001's asymmetric drop)
//   kill:rank=R:step=S              replica R dies (SIGKILL) as step S begins
//   version:rank=R                  replica R announces NUMERIC_SPEC_VERSION + 1
#pragma once

#include <cstdint>
#include <string>

namespace lockstep::dist {

struct Fault {
  enum class Kind { none, bitflip, update_bitflip, stall, drop, kill, version };
  Kind kind = Kind::none;
  int rank = -1;
  std::int64_t step = -1;
  double seconds = 0;
  std::int64_t tensor = 0, index = 0;
  int bit = 0;
  bool hits(int r, std::int64_t s) const { return kind != Kind::none && rank == r && step == s; }
};

// Parses the text above ("" -> no fault); throws std::invalid_argument naming
// LOCKSTEP_FAULT and the bad part.
Fault parse_fault(const std::string& text);
// LOCKSTEP_FAULT from the environment.
Fault fault_from_env();

}  // namespace lockstep::dist
