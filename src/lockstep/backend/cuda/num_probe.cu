#include "lockstep/backend/cuda/num_probe.hpp"

#include <cuda_runtime.h>

#include <stdexcept>

#include "lockstep/backend/cuda/trace_launch.hpp"
#include "lockstep/num/elementary.hpp"
#include "lockstep/num/rng.hpp"

namespace lockstep::cuda {
namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string("CUDA error in ") + what + ": " + cudaGetErrorString(e));
}

enum class Fn : int { Exp, Exp2, Expm1, Log, Log2, Log1p, Tanh, Sigmoid, Sin, Cos, Rsqrt, Pow };

__device__ float apply(Fn f, float x, float y) {
  switch (f) {
    case Fn::Exp: return num::exp(x);
    case Fn::Exp2: return num::exp2(x);
    case Fn::Expm1: return num::expm1(x);
    case Fn::Log: return num::log(x);
    case Fn::Log2: return num::log2(x);
    case Fn::Log1p: return num::log1p(x);
    case Fn::Tanh: return num::tanh(x);
    case Fn::Sigmoid: return num::sigmoid(x);
    case Fn::Sin: return num::sin(x);
    case Fn::Cos: return num::cos(x);
    case Fn::Rsqrt: return num::rsqrt(x);
    case Fn::Pow: return num::pow(x, y);
  }
  return 0.0f;
}

__global__ void eval_kernel(Fn f, const float* x, const float* y, float* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = apply(f, x[i], y ? y[i] : 0.0f);
}

__global__ void philox_kernel(std::uint64_t seed, std::uint64_t stream, std::uint64_t first, std::uint32_t* out,
                              std::size_t n) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = num::rng::bits32(seed, stream, first + i);
}

// RAII device buffer.
template <class T>
struct DeviceBuffer {
  T* p = nullptr;
  explicit DeviceBuffer(std::size_t n) { check(cudaMalloc(&p, n * sizeof(T) + 1), "cudaMalloc"); }
  ~DeviceBuffer() { cudaFree(p); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

std::vector<float> run(Fn f, const std::vector<float>& x, const std::vector<float>* y) {
  const std::size_t n = x.size();
  std::vector<float> out(n);
  if (n == 0) return out;
  DeviceBuffer<float> dx(n), dout(n);
  DeviceBuffer<float> dy(y ? n : 0);
  check(cudaMemcpy(dx.p, x.data(), n * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy");
  if (y) check(cudaMemcpy(dy.p, y->data(), n * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy");
  trace::launched("num_probe eval");
  eval_kernel<<<static_cast<unsigned>((n + 255) / 256), 256>>>(f, dx.p, y ? dy.p : nullptr, dout.p,
                                                                 static_cast<int>(n));
  check(cudaGetLastError(), "eval_kernel launch");
  check(cudaMemcpy(out.data(), dout.p, n * sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy");
  return out;
}

}  // namespace

std::vector<float> elementary_on_device(const std::string& fn, const std::vector<float>& x) {
  static const std::pair<const char*, Fn> names[] = {
      {"exp", Fn::Exp},   {"exp2", Fn::Exp2}, {"expm1", Fn::Expm1}, {"log", Fn::Log},
      {"log2", Fn::Log2}, {"log1p", Fn::Log1p}, {"tanh", Fn::Tanh}, {"sigmoid", Fn::Sigmoid},
      {"sin", Fn::Sin},   {"cos", Fn::Cos},   {"rsqrt", Fn::Rsqrt}};
  for (const auto& [name, f] : names)
    if (fn == name) return run(f, x, nullptr);
  throw std::invalid_argument("elementary_on_device: unknown function '" + fn + "'");
}

std::vector<float> pow_on_device(const std::vector<float>& x, const std::vector<float>& y) {
  if (x.size() != y.size()) throw std::invalid_argument("pow_on_device: sizes differ");
  return run(Fn::Pow, x, &y);
}

std::vector<std::uint32_t> philox_on_device(std::uint64_t seed, std::uint64_t stream, std::uint64_t first,
                                            std::size_t n) {
  std::vector<std::uint32_t> out(n);
  if (n == 0) return out;
  DeviceBuffer<std::uint32_t> d(n);
  trace::launched("num_probe philox");
  philox_kernel<<<static_cast<unsigned>((n + 255) / 256), 256>>>(seed, stream, first, d.p, n);
  check(cudaGetLastError(), "philox_kernel launch");
  check(cudaMemcpy(out.data(), d.p, n * sizeof(std::uint32_t), cudaMemcpyDeviceToHost), "cudaMemcpy");
  return out;
}

}  // namespace lockstep::cuda
