// The device pool's block size (device.cu), for tests that count the pool's
// bytes (tests/cuda/lora_cuda_test.cpp, CudaLoraCodes). Apart from device.hpp so that
// the kernels, which include that, do not depend on it.
#pragma once

#include <cstddef>

namespace lockstep::cuda {

// The bytes a DeviceBuffer of `bytes` takes from the pool: its bucket (four a
// power of two, so at most a quarter more) of bytes plus one word.
std::size_t pool_block_bytes(std::size_t bytes);

}  // namespace lockstep::cuda
