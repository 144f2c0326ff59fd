// The op registry: every op of ops::AllOps with its checks, at run time.
// `lockstep verify ops` and the tests iterate it; it is built from the typed
// list, so an op joins it by being added to that list (ops/all.hpp).
#pragma once

#include <functional>
#include <string_view>
#include <vector>

#include "lockstep/ad/check.hpp"
#include "lockstep/ad/gradcheck.hpp"

namespace lockstep::ad {

struct OpEntry {
  std::string_view name;
  std::size_t cases;  // declared shapes
  std::function<std::vector<CheckResult>(const RunOptions&)> run;
};

// All ops, in the order of ops::AllOps.
const std::vector<OpEntry>& op_registry();

// The entry named `name`, or nullptr.
const OpEntry* find_op(std::string_view name);

}  // namespace lockstep::ad
