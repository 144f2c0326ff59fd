// What a launcher includes to record its kernel path in the launch trace
// (trace.hpp has the log and its description). No standard headers: nvcc's
// code generation for a file of kernels was seen to shift with what its host
// side includes (attention.cu with <string>: one redundant shared load fewer
// in dq_stored_kernel), and the kernels' PTX must stay as it is.
#pragma once

namespace lockstep::cuda::trace {

// The kernel path `name` (NUL-terminated; copied) is being launched.
void launched(const char* name);

// A stable name composed of parts, for paths named at run time (the GEMM's
// tile and layouts, attention's head chunking): the same parts give the same
// pointer, valid for the process. Launchers compose once per path (a static).
const char* intern(const char* const* parts, int count);
template <class... Parts>
const char* compose(Parts... parts) {
  const char* list[] = {parts...};
  return intern(list, static_cast<int>(sizeof...(Parts)));
}

}  // namespace lockstep::cuda::trace
