// Device-side evaluation of the header-only numeric functions (elementary
// functions, Philox), so tests can require the GPU to compute the very bits the
// CPU computes from the same source. Host-callable; no CUDA headers needed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lockstep::cuda {

// The unary functions of num/elementary.hpp, by name: exp exp2 expm1 log log2
// log1p tanh sigmoid sin cos rsqrt. Throws std::invalid_argument on another.
std::vector<float> elementary_on_device(const std::string& fn, const std::vector<float>& x);

// pow(x[i], y[i]) on the device.
std::vector<float> pow_on_device(const std::vector<float>& x, const std::vector<float>& y);

// num::rng::bits32(seed, stream, first + i) for i < n, on the device.
std::vector<std::uint32_t> philox_on_device(std::uint64_t seed, std::uint64_t stream, std::uint64_t first,
                                            std::size_t n);

}  // namespace lockstep::cuda
