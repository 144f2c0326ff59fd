// Launchers of the LoRA branch's element-wise glue (lora.cu), callable from
// g++ code (ops_pointwise.cpp: cuda::OpKernels::lora_*). The CPU reference of
// each is ops/lora_glue.hpp (the host kernel sets run it); the start-up gates
// (gate_driver.cpp, op "lora") compare the two bit for bit. All pointers are
// device pointers; every launcher enqueues on the default stream and returns
// without synchronizing.
#pragma once

#include <cstddef>
#include <cstdint>

namespace lockstep::cuda::launch {

// y[i] = y[i] + u[i] * s (two roundings; mutant lora_scale_add_fused: fma).
void lora_scale_add(std::size_t n, float* y, const float* u, float s);
// out[i] = in[i] * s.
void lora_scale(std::size_t n, float* out, const float* in, float s);
// out[i] = uniform(seed, stream, i) >= p ? in[i] * q : +0 (num/rng.hpp's
// Philox on the device: the host's mask). out may be in.
void lora_dropout(std::size_t n, const float* in, float* out, std::uint64_t seed, std::uint64_t stream, float p,
                  float q);

}  // namespace lockstep::cuda::launch
