// The elementary functions evaluated on the GPU over ranges of bit patterns, for
// ulp_exhaustive --gpu (every input's GPU bits against the CPU's). Host-callable;
// no CUDA headers needed.
#pragma once

#include <cstdint>
#include <string>

namespace ulp_gpu {

// True when a CUDA device is present.
bool available(std::string* why);

// out[i] = f(x_i, y_i) computed on the device for u_i = first + i * step, i < count:
//   mode 0: (x, y) = (float_of(u_i), 0)       unary functions
//   mode 1: (x, y) = (fixed, float_of(u_i))   pow over every exponent
//   mode 2: (x, y) = (float_of(u_i), fixed)   pow over every base
// fn is the value of lockstep::num::elem::Fn. out is host memory (count floats).
void eval(int fn, int mode, float fixed, std::uint64_t first, std::uint64_t step, std::uint32_t count, float* out);

}  // namespace ulp_gpu
