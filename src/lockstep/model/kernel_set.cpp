// Compile-time checks (model/kernel_set.hpp): the spec kernels, in the
// checking and the canonical arithmetic, and the fast CPU kernels serve every
// layer of every family, and every op of ops::ModelOps.
#include "lockstep/model/kernel_set.hpp"

#include "lockstep/backend/cpu/ops.hpp"
#include "lockstep/model/families/bitnet.hpp"
#include "lockstep/model/families/gpt2.hpp"
#include "lockstep/model/families/llama.hpp"
#include "lockstep/model/spec_kernels.hpp"

namespace lockstep::model {

template <class K, class T>
constexpr bool serves_every_family =
    KernelSetForFamily<K, T, Gpt2Family> && KernelSetForFamily<K, T, LlamaFamily> && KernelSetForFamily<K, T, BitnetFamily>;

static_assert(serves_every_family<SpecKernels<double>, double>);
static_assert(serves_every_family<SpecKernels<float>, float>);
static_assert(serves_every_family<cpu::OpKernels, float>);
static_assert(ad::KernelSetFor<SpecKernels<double>, double, ops::ModelOps>);
static_assert(ad::KernelSetFor<cpu::OpKernels, float, ops::ModelOps>);

}  // namespace lockstep::model
