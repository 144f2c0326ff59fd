// The run-config reader of training checkpoints (trainer_state.json's "run",
// TrainConfig::from_json) on arbitrary text: only std::runtime_error (a
// malformed file) or std::invalid_argument (a bad setting) may come out, and an
// accepted config that validates round-trips through to_json exactly.
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "lockstep/train/config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const unsigned char* data, std::size_t size) {
  try {
    const auto c = lockstep::train::TrainConfig::from_json(std::string(reinterpret_cast<const char*>(data), size),
                                                           "fuzz");
    c.validate();
    const auto back = lockstep::train::TrainConfig::from_json(c.to_json(), "fuzz");
    if (back.to_json() != c.to_json()) std::abort();
  } catch (const std::runtime_error&) {
  } catch (const std::invalid_argument&) {
  }
  return 0;
}
