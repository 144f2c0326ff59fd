// The element-wise glue of the LoRA branch (model/lora_branch.hpp), written
// once: the host kernel sets run these loops, and the CUDA kernels of
// backend/cuda/lora.cu are gated against them bit for bit at start-up
// (gate_driver.cpp's lora cases). Each cell is one expression, no fma:
//
//   scale_add:  y[i] = y[i] + u[i] * s          (the update added to the base's output)
//   scale:      out[i] = in[i] * s              (du = dy * s)
//   dropout:    out[i] = keep(i) ? in[i] * q : +0
//               keep(i) = num::rng::uniform(seed, stream, i) >= p   (p compared in float:
//               one mask for every scalar type and device)
//
// dropout serves both directions: x -> xd in the forward, and dxd -> dxd in
// place in the backward (the mask recomputed from the counter, not stored).
#pragma once

#include <cstddef>
#include <cstdint>

#include "lockstep/num/rng.hpp"

namespace lockstep::ops::lora_glue {

inline bool keep(std::uint64_t seed, std::uint64_t stream, std::uint64_t i, float p) {
  return num::rng::uniform(seed, stream, i) >= p;
}

template <class T>
void scale_add(std::size_t n, T* y, const T* u, T s) {
  for (std::size_t i = 0; i < n; ++i) y[i] = y[i] + u[i] * s;
}

template <class T>
void scale(std::size_t n, T* out, const T* in, T s) {
  for (std::size_t i = 0; i < n; ++i) out[i] = in[i] * s;
}

// out may be in.
template <class T>
void dropout(std::size_t n, const T* in, T* out, std::uint64_t seed, std::uint64_t stream, float p, T q) {
  for (std::size_t i = 0; i < n; ++i) out[i] = keep(seed, stream, i, p) ? in[i] * q : T(0);
}

}  // namespace lockstep::ops::lora_glue
