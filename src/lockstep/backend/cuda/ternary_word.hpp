// The 2-bit code word of the decode GEMV: defined once, for host and device, in
// backend/cpu/ternary_word.hpp (the CPU's ternary GEMM reads the same layout);
// the CUDA kernels name it here.
#pragma once

#include "lockstep/backend/cpu/ternary_word.hpp"

namespace lockstep::cuda {

using cpu::dp4a_s8;
using cpu::ternary_word;
using cpu::ternary_word_dot;

}  // namespace lockstep::cuda
