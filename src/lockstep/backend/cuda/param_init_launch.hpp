// The parameters' deterministic initialization on the device (param_init.cu),
// callable from g++ code (model/cuda_model.cpp). The host's is
// num::rng::fill_normal (model/params.hpp's init_param); the values are the
// same bits: num/rng.hpp's Philox4x32-10 and Box–Muller are LOCKSTEP_HD, with
// lockstep's own log and sincos (num/elementary.hpp) and no contraction
// (-fmad=false), so the device evaluates the host's expression. Checked on the
// device against the CPU model's init (tests/cuda/lora_cuda_test.cpp). Enqueues
// on the default stream; does not synchronize.
#pragma once

#include <cstddef>
#include <cstdint>

namespace lockstep::cuda::launch {

// out[k] = fma(stddev, num::rng::normal(seed, stream, k), mean) for k < n.
void fill_normal(float* out, std::size_t n, std::uint64_t seed, std::uint64_t stream, float mean, float stddev);

}  // namespace lockstep::cuda::launch
