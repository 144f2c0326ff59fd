#include "lockstep/ad/registry.hpp"

#include "lockstep/ops/all.hpp"

namespace lockstep::ad {

namespace {
template <class... Ops>
std::vector<OpEntry> entries_of(OpList<Ops...>) {
  return {OpEntry{Ops::name, Ops::cases().size(), &run_checks<Ops>}...};
}
}  // namespace

const std::vector<OpEntry>& op_registry() {
  static const std::vector<OpEntry> all = entries_of(ops::AllOps{});
  return all;
}

const OpEntry* find_op(std::string_view name) {
  for (const OpEntry& e : op_registry())
    if (e.name == name) return &e;
  return nullptr;
}

}  // namespace lockstep::ad
