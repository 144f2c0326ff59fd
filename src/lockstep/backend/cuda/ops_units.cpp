// cuda::OpKernels: the int8 unit linear (ops/units.hpp) — STAND-IN until the
// device kernels of branch units-cuda replace this file. Each call copies its
// inputs to the host, runs cpu::OpKernels (the same bits as the spec: the CPU
// bit tests) and copies the outputs back, so a CUDA model can run --linear
// units now, bit-identical to the CPU model, only slowly (every unit linear
// waits for the device twice). The start-up gates compare it with
// cpu::OpKernels like any kernel; they cannot fail here (it is that kernel).
#include <cstddef>
#include <type_traits>
#include <vector>

#include "lockstep/backend/cpu/ops.hpp"
#include "lockstep/backend/cuda/ops.hpp"

namespace lockstep::cuda {
namespace {

// Runs `run(host_args)` on host copies of every array of `args` (device
// pointers): inputs downloaded, outputs uploaded afterwards.
template <class Args, class Config, class Run>
void through_host(const Config& c, const Args& args, Run&& run) {
  Args host = args;
  std::vector<std::vector<float>> copies;
  copies.reserve(8);
  struct Back {
    float* device;
    const float* host;
    std::size_t n;
  };
  std::vector<Back> back;
  ops::for_each_arg(host, c, [&](const ops::Field& f, auto& p) {
    if (p == nullptr || f.count == 0) return;
    std::vector<float>& h = copies.emplace_back(f.count);
    if constexpr (std::is_const_v<std::remove_pointer_t<std::remove_reference_t<decltype(p)>>>) {
      cuda::copy_to_host(h.data(), p, f.count * sizeof(float));
    } else {
      back.push_back({p, h.data(), f.count});
    }
    p = h.data();
  });
  run(host);
  for (const Back& b : back) cuda::copy_to_device(b.device, b.host, b.n * sizeof(float));
}

cpu::OpKernels& host_kernels() {
  static cpu::OpKernels k;  // threads = 1: the bits do not depend on it
  return k;
}

}  // namespace

void OpKernels::run(const ops::Int8LinearConfig& c, const ops::Int8Linear::FwdArgs<float>& args) {
  through_host(c, args, [&](const ops::Int8Linear::FwdArgs<float>& h) { host_kernels().forward<ops::Int8Linear>(c, h); });
}

void OpKernels::run(const ops::Int8LinearConfig& c, const ops::Int8Linear::BwdArgs<float>& args) {
  through_host(c, args, [&](const ops::Int8Linear::BwdArgs<float>& h) { host_kernels().backward<ops::Int8Linear>(c, h); });
}

}  // namespace lockstep::cuda
