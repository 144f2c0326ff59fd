// Compile-time checks (model/kernel_set.hpp): the spec kernels, in the
// checking and the canonical arithmetic, and the fast CPU kernels serve every
// layer of every family, and every op of ops::ModelOps.
#include "lockstep/model/kernel_set.hpp"

#include "lockstep/backend/cpu/ops.hpp"
#include "lockstep/model/spec_kernels.hpp"

namespace lockstep::model {

static_assert(KernelSetForFamilies<SpecKernels<double>, double>);
static_assert(KernelSetForFamilies<SpecKernels<float>, float>);
static_assert(KernelSetForFamilies<cpu::OpKernels, float>);
static_assert(ad::KernelSetFor<SpecKernels<double>, double, ops::ModelOps>);
static_assert(ad::KernelSetFor<cpu::OpKernels, float, ops::ModelOps>);

}  // namespace lockstep::model
