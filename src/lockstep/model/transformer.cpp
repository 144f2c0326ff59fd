// make_cpu_model: the float engine (transformer.hpp) on the fast CPU kernels
// (backend/cpu/ops.hpp), as the one model over a kernel set (kernel_model.hpp)
// with its parameters on the host. Its loss and gradients equal the float
// op-spec composition (Engine<float, SpecKernels<float>>) bit for bit, for any
// thread count: tests/model/cpu_model_test.cpp.
#include <memory>

#include "lockstep/backend/cpu/ops.hpp"
#include "lockstep/model/kernel_model.hpp"
#include "lockstep/model/model.hpp"

namespace lockstep::model {

std::unique_ptr<Model> make_cpu_model(const ModelConfig& cfg) {
  return std::make_unique<KernelModel<cpu::OpKernels, HostStorage>>(cfg);
}

}  // namespace lockstep::model
