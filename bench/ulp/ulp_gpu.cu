#include "ulp_gpu.hpp"

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "lockstep/num/elementary.hpp"
#include "lockstep/num/elementary_ref.hpp"

namespace ulp_gpu {
namespace {

namespace ln = lockstep::num;
using Fn = lockstep::num::elem::Fn;

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string("CUDA error in ") + what + ": " + cudaGetErrorString(e));
}

__device__ float apply(Fn f, float x, float y) {
  switch (f) {
    case Fn::exp: return ln::exp(x);
    case Fn::exp2: return ln::exp2(x);
    case Fn::expm1: return ln::expm1(x);
    case Fn::log: return ln::log(x);
    case Fn::log2: return ln::log2(x);
    case Fn::log1p: return ln::log1p(x);
    case Fn::tanh: return ln::tanh(x);
    case Fn::sigmoid: return ln::sigmoid(x);
    case Fn::sin: return ln::sin(x);
    case Fn::cos: return ln::cos(x);
    case Fn::rsqrt: return ln::rsqrt(x);
    case Fn::pow: return ln::pow(x, y);
  }
  return 0.0f;
}

__global__ void eval_kernel(Fn f, int mode, float fixed, unsigned long long first, unsigned long long step,
                            unsigned count, float* out) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= count) return;
  const float v = ln::float_of(static_cast<std::uint32_t>(first + i * step));
  const float x = mode == 1 ? fixed : v;
  const float y = mode == 1 ? v : (mode == 2 ? fixed : 0.0f);
  out[i] = apply(f, x, y);
}

}  // namespace

bool available(std::string* why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) {
    if (why) *why = e != cudaSuccess ? cudaGetErrorString(e) : "no CUDA device";
    return false;
  }
  return true;
}

void eval(int fn, int mode, float fixed, std::uint64_t first, std::uint64_t step, std::uint32_t count, float* out) {
  static float* dbuf = nullptr;
  static std::uint32_t cap = 0;
  if (count > cap) {
    if (dbuf) cudaFree(dbuf);
    check(cudaMalloc(&dbuf, sizeof(float) * count), "cudaMalloc");
    cap = count;
  }
  eval_kernel<<<(count + 255) / 256, 256>>>(static_cast<Fn>(fn), mode, fixed, first, step, count, dbuf);
  check(cudaGetLastError(), "eval_kernel launch");
  check(cudaMemcpy(out, dbuf, sizeof(float) * count, cudaMemcpyDeviceToHost), "cudaMemcpy");
}

}  // namespace ulp_gpu
