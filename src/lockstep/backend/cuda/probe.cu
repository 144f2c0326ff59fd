#include "lockstep/backend/cuda/probe.hpp"

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "lockstep/backend/cuda/trace_launch.hpp"
#include "lockstep/num/fp.hpp"

namespace lockstep::cuda {
namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string("CUDA error in ") + what + ": " + cudaGetErrorString(e));
}

__global__ void fma_kernel(const float* a, const float* b, const float* c, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = num::fma_rn(a[i], b[i], c[i]);
}

}  // namespace

bool available(std::string* why) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) {
    if (why) *why = e != cudaSuccess ? cudaGetErrorString(e) : "no CUDA device";
    return false;
  }
  return true;
}

std::vector<float> fma_on_device(const std::vector<float>& a, const std::vector<float>& b,
                                 const std::vector<float>& c) {
  if (a.size() != b.size() || a.size() != c.size())
    throw std::invalid_argument("fma_on_device: operand sizes differ");
  const int n = static_cast<int>(a.size());
  std::vector<float> out(a.size());
  if (n == 0) return out;
  const size_t bytes = a.size() * sizeof(float);
  float *da = nullptr, *db = nullptr, *dc = nullptr, *dout = nullptr;
  check(cudaMalloc(&da, bytes), "cudaMalloc");
  check(cudaMalloc(&db, bytes), "cudaMalloc");
  check(cudaMalloc(&dc, bytes), "cudaMalloc");
  check(cudaMalloc(&dout, bytes), "cudaMalloc");
  check(cudaMemcpy(da, a.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
  check(cudaMemcpy(db, b.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
  check(cudaMemcpy(dc, c.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
  trace::launched("probe fma");
  fma_kernel<<<(n + 255) / 256, 256>>>(da, db, dc, dout, n);
  check(cudaGetLastError(), "fma_kernel launch");
  check(cudaMemcpy(out.data(), dout, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
  cudaFree(da);
  cudaFree(db);
  cudaFree(dc);
  cudaFree(dout);
  return out;
}

}  // namespace lockstep::cuda
