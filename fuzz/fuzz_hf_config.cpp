// Hugging Face config.json reader on arbitrary text: only std::runtime_error
// may come out, and an accepted config validates and round-trips.
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "lockstep/model/config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const unsigned char* data, std::size_t size) {
  try {
    const auto c = lockstep::model::from_hf_config_json(std::string(reinterpret_cast<const char*>(data), size), "fuzz");
    const auto back = lockstep::model::from_hf_config_json(lockstep::model::to_hf_config_json(c), "fuzz");
    if (back.parameter_count() != c.parameter_count()) std::abort();
  } catch (const std::runtime_error&) {
  }
  return 0;
}
