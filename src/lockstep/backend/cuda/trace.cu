// The process-wide launch log (trace.hpp). Host code only: in a .cu file so
// that the kernels' library, which records into it, defines it itself.
#include "lockstep/backend/cuda/trace.hpp"

#include "lockstep/backend/cuda/profile.hpp"

#include <mutex>
#include <set>
#include <string>
#include <utility>

namespace lockstep::cuda::trace {

LaunchLog& process_log() {
  static LaunchLog log;
  return log;
}

void launched(const char* name) {
  process_log().launched(name);
  if (profile::active()) profile::mark(name);  // the step profile's interval for this launch (profile.hpp)
}

const char* intern(const char* const* parts, int count) {
  std::string name;
  for (int i = 0; i < count; ++i) name += parts[i];
  static std::mutex mutex;
  static std::set<std::string, std::less<>> names;  // nodes never move: c_str() stays valid
  std::lock_guard<std::mutex> lock(mutex);
  return names.insert(std::move(name)).first->c_str();
}

}  // namespace lockstep::cuda::trace
