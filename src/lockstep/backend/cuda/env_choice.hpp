// Switches read from the environment. env_choice: a kernel switch
// (LOCKSTEP_HEAD_GEMV and the like): the 1-based index of the variable's value among `names`, 1 when it
// is unset or empty (names' first is the default), an std::invalid_argument
// naming the variable, its value and the choices otherwise. Host code.
#pragma once

#include <cstdlib>
#include <initializer_list>
#include <stdexcept>
#include <string>

namespace lockstep::cuda {

inline int env_choice(const char* variable, std::initializer_list<const char*> names) {
  const char* env = std::getenv(variable);
  const std::string value = env == nullptr ? "" : env;
  if (value.empty()) return 1;
  int index = 1;
  std::string expected;
  for (const char* name : names) {
    if (value == name) return index;
    expected += (index == 1 ? "" : index == static_cast<int>(names.size()) ? " or " : ", ") + std::string(name);
    ++index;
  }
  throw std::invalid_argument(std::string(variable) + "=" + value + ": expected " + expected);
}

// An on/off switch that is on by default: off only when the variable is "0"
// (LOCKSTEP_CUDA_GRAPHS, LOCKSTEP_DECODE_PDL, LOCKSTEP_DECODE_GRAPH_EARLY,
// LOCKSTEP_PINNED_READBACK).
inline bool env_on_unless_zero(const char* variable) {
  const char* env = std::getenv(variable);
  return env == nullptr || std::string(env) != "0";
}

}  // namespace lockstep::cuda
