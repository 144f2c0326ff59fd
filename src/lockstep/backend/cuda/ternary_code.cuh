// BitLinear's ternary weight code on the device, written once for every kernel
// that makes or reads one (quant.cu's quantizer, ternary_expand.cu's backward
// re-quantization and TERNARY2 expansion), so that the same W and scale give
// the same bits wherever they are computed. Host and device (the fiber
// emulator, tests/cuda/cuda_host_emu.hpp, compiles it as host code).
#pragma once

#include <cstddef>
#include <cstdint>

namespace lockstep::cuda::detail {

// ops::quantize_ternary's code of w given inv = 1 / scale:
// min2(max2(floor(w·inv + 1/2), -1), 1), each step one rounding (ops::max2 and
// ops::min2: a NaN w gives -1, as on the CPU).
__device__ __forceinline__ float ternary_code(float w, float inv) {
  const float r = floorf(__fadd_rn(__fmul_rn(w, inv), 0.5f));
  const float lo = r > -1.0f ? r : -1.0f;  // ops::max2(r, -1)
  return lo < 1.0f ? lo : 1.0f;            // ops::min2(lo, 1)
}

// Code i of a TERNARY2 tensor (tensor/storage.hpp: element i in byte i / 4 at
// bits 2·(i % 4), the field code + 1), as a float.
__device__ __forceinline__ float ternary2_code(const std::uint8_t* bytes, std::size_t i) {
  return static_cast<float>(static_cast<int>((bytes[i >> 2] >> (2 * (i & 3))) & 3u) - 1);
}

}  // namespace lockstep::cuda::detail
