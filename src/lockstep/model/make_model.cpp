// make_model: the device switch, and make_cuda_model's stand-in in a build
// without the CUDA backend (the real one is backend/cuda/cuda_model.cpp).
#include <memory>
#include <stdexcept>
#include <string>

#include "lockstep/model/model.hpp"

namespace lockstep::model {

#if !defined(LOCKSTEP_HAVE_CUDA)
std::unique_ptr<Model> make_cuda_model(const ModelConfig&, const std::string&) {
  throw std::runtime_error("--device cuda: this build of lockstep has no CUDA backend (configure with LOCKSTEP_CUDA=ON)");
}
#endif

std::unique_ptr<Model> make_model(const ModelConfig& cfg, const std::string& device, const std::string& audit) {
  if (audit != "stop" && audit != "warn" && audit != "off")
    throw std::invalid_argument("--audit must be stop, warn or off, got '" + audit + "'");
  if (device == "cpu") return make_cpu_model(cfg);
  if (device == "cuda") return make_cuda_model(cfg, audit);
  throw std::invalid_argument("--device must be cpu or cuda, got '" + device + "'");
}

}  // namespace lockstep::model
