// PEFT adapter_config.json reader on arbitrary text: only std::runtime_error
// may come out, and an accepted config is written and read back to the same
// fields (the writer's output is always accepted).
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "lockstep/load/adapter.hpp"

extern "C" int LLVMFuzzerTestOneInput(const unsigned char* data, std::size_t size) {
  try {
    const auto c = lockstep::load::parse_adapter_config(std::string(reinterpret_cast<const char*>(data), size), "fuzz");
    if (c.rank == 0 || c.rank > lockstep::load::kMaxAdapterRank) std::abort();
    const auto back = lockstep::load::parse_adapter_config(lockstep::load::adapter_config_json(c), "fuzz");
    if (back.rank != c.rank || back.alpha != c.alpha || back.dropout != c.dropout || back.rslora != c.rslora ||
        back.targets != c.targets || back.base_model != c.base_model)
      std::abort();
  } catch (const std::runtime_error&) {
  }
  return 0;
}
