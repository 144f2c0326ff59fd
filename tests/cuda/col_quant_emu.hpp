// What the column quantizer's host emulator tests share (col_quant_sums_emu_test.cpp,
// col_quant_codes_emu_test.cpp): the fiber emulator, then the kernel files' own
// includes, so that the check_launch hook each test defines around its
// `#include "....cu"` renames only the kernel file's calls; the namespaces they
// name; a float's bits for their messages.
#pragma once

#include <cstdio>
#include <string>

#include "cuda_host_emu.hpp"
#include "lockstep/backend/cpu/units_quant.hpp"
#include "lockstep/backend/cuda/col_fold.hpp"
#include "lockstep/backend/cuda/col_quant_launch.hpp"
#include "lockstep/backend/cuda/cp_async.cuh"
#include "lockstep/backend/cuda/device.hpp"
#include "lockstep/backend/cuda/ls_hooks.cuh"
#include "lockstep/backend/cuda/trace_launch.hpp"
#include "lockstep/num/fp.hpp"

namespace ll = lockstep::cuda::launch;
namespace cf = lockstep::cuda::colfold;
namespace ln = lockstep::num;

namespace col_quant_emu {

inline std::string hex(float v) {
  char b[48];
  std::snprintf(b, sizeof b, "0x%08x (%a)", ln::bits_of(v), static_cast<double>(v));
  return b;
}

}  // namespace col_quant_emu
