// model::Aux: what the engine (model/transformer.hpp) keeps per call site for a
// kernel set that declares no K::Aux of its own (the spec kernels, which keep
// nothing): the host kernel sets' storage, cpu::Aux (backend/cpu/kernel_aux.hpp).
#pragma once

#include "lockstep/backend/cpu/kernel_aux.hpp"

namespace lockstep::model {

using Aux = cpu::Aux;

}  // namespace lockstep::model
