// Runs a shell command for a cross-check against an outside tool (python3 with
// an independent library): its stdout and stderr together, and its exit status.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace lockstep::test {

inline std::string run_command(const std::string& cmd, int* status) {
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  std::string out;
  std::array<char, 4096> buf{};
  while (p && fgets(buf.data(), static_cast<int>(buf.size()), p)) out += buf.data();
  const int rc = p ? pclose(p) : -1;
  *status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  return out;
}

}  // namespace lockstep::test
