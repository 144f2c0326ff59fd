// make_model: the device switch; check_batch, shared by every Model.
//
// The CUDA model (model/cuda_model.cpp) exists only in a build with the CUDA
// backend. CMake says which build this is, explicitly: it compiles
// cuda_model.cpp and defines LOCKSTEP_HAVE_CUDA together, and this file asks
// the macro. No link-time stand-in (a second definition of make_cuda_model
// chosen by which object the linker finds) and no registry filled by static
// initializers (which a static library drops when nothing references the
// object file that holds them): the switch below names each device's maker.
#include <memory>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "lockstep/model/model.hpp"

namespace lockstep::model {

#if !defined(LOCKSTEP_HAVE_CUDA)
namespace {
constexpr const char* kNoCudaBuild = "this build of lockstep has no CUDA backend (configure with LOCKSTEP_CUDA=ON)";
}
#endif

bool device_available(const std::string& device, std::string* why) {
  if (device == "cpu") return true;
  if (device == "cuda") {
#if defined(LOCKSTEP_HAVE_CUDA)
    return cuda_device_available(why);
#else
    if (why) *why = kNoCudaBuild;
    return false;
#endif
  }
  if (why) *why = "unknown device '" + device + "' (cpu or cuda)";
  return false;
}

void check_batch(std::span<const std::int32_t> inputs, std::span<const std::int32_t> targets, std::int64_t batch,
                 std::int64_t seq) {
  if (batch <= 0 || seq <= 0)
    throw std::invalid_argument(fmt::format("model: batch ({}) and seq ({}) must be > 0", batch, seq));
  const auto n = static_cast<std::size_t>(batch * seq);
  if (inputs.size() != n || targets.size() != n)
    throw std::invalid_argument(fmt::format("model: inputs ({}) and targets ({}) must hold batch*seq = {} tokens",
                                            inputs.size(), targets.size(), n));
}

std::unique_ptr<Model> make_model(const ModelConfig& cfg, const std::string& device, const std::string& audit,
                                  double audit_budget) {
  if (audit != "stop" && audit != "warn" && audit != "off")
    throw std::invalid_argument("--audit must be stop, warn or off, got '" + audit + "'");
  if (!(audit_budget > 0.0 && audit_budget <= 1.0))
    throw std::invalid_argument("--audit-budget must be in (0, 100] percent, got " + std::to_string(audit_budget * 100));
  if (device == "cpu") return make_cpu_model(cfg);
  if (device == "cuda") {
#if defined(LOCKSTEP_HAVE_CUDA)
    return make_cuda_model(cfg, audit, audit_budget);
#else
    throw std::runtime_error(std::string("--device cuda: ") + kNoCudaBuild);
#endif
  }
  throw std::invalid_argument("--device must be cpu or cuda, got '" + device + "'");
}

}  // namespace lockstep::model
