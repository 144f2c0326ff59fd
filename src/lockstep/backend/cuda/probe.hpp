// A first CUDA kernel: proves the toolchain, the flags of the numeric contract
// and the device reach each other. Declared here so host code can call it
// without including CUDA headers.
#pragma once

#include <string>
#include <vector>

namespace lockstep::cuda {

// True when this build has the CUDA backend and a device is present.
bool available(std::string* why = nullptr);

// out[i] = fma_rn(a[i], b[i], c[i]) computed on the device with lockstep's
// fma primitive (num/fp.hpp). Throws std::runtime_error on a CUDA error.
std::vector<float> fma_on_device(const std::vector<float>& a, const std::vector<float>& b,
                                 const std::vector<float>& c);

}  // namespace lockstep::cuda
