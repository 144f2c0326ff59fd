// A kernel switch read from the environment (LOCKSTEP_HEAD_GEMV and the
// like): the 1-based index of the variable's value among `names`, 1 when it
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

}  // namespace lockstep::cuda
