// Start-up gates of BitLinear on a weight held as TERNARY2 codes
// (cuda::OpKernels::bitlinear_codes_fwd / _bwd: a frozen LoRA base on the
// device; gate.hpp): each against cpu::OpKernels' codes kernels, which are
// run(BitLinear) on the masters bit for bit (tests/train/lora_codes_test.cpp),
// by bit pattern. Case::op "bitlinear_codes". The shapes are BitLinear's own
// gate shapes (ragged rows, in and out; K not a multiple of 4, so codes
// straddle bytes; a weight sum of three levels); the weights are normals with
// ±large cells, quantized by ops::quantize_ternary and packed as TERNARY2 (as
// model::hold_frozen_ternary_as_codes holds them); x and dy are normals with
// -0, +0 and large cells. With LOCKSTEP_CUDA_BASE_CODES=0 (OpKernels::runs_codes
// false: no base is held as codes) there are none, so that a failure here
// can be switched off without a rebuild.
#include <cstdint>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "lockstep/ad/rng.hpp"
#include "lockstep/backend/cpu/ops.hpp"
#include "lockstep/backend/cuda/device.hpp"
#include "lockstep/backend/cuda/gate.hpp"
#include "lockstep/backend/cuda/ops.hpp"
#include "lockstep/ops/arg_arrays.hpp"
#include "lockstep/ops/quant.hpp"
#include "lockstep/tensor/storage.hpp"

namespace lockstep::cuda::gate {
namespace {

using Vec = std::vector<float>;

struct CodesCase {
  ops::QuantLinearConfig c;
  std::vector<std::uint8_t> bytes;
  float scale = 0;
  Vec x, dy;
  DeviceBuffer<std::uint8_t> d_bytes;

  CodesCase(const ops::QuantLinearConfig& cfg, std::uint64_t seed) : c(cfg) {
    ad::Rng rng(seed);
    Vec w(c.out * c.in);
    ops::seed_floats(ops::Seed::normal(0.05, 3.0f, 7), rng, w.data(), w.size());
    const ops::TernaryCodes<float> q = ops::quantize_ternary(w.data(), w.size());
    bytes = tensor::pack_ternary(q.q);
    scale = q.scale;
    x.resize(c.rows * c.in);
    dy.resize(c.rows * c.out);
    ops::seed_floats(ops::Seed::normal(1.0, 1e4f, 5), rng, x.data(), x.size());
    ops::seed_floats(ops::Seed::normal(1.0, 1e4f, 5), rng, dy.data(), dy.size());
    d_bytes.upload(bytes);
  }
};

cpu::OpKernels cpu_kernels() {
  cpu::OpKernels k;
  k.threads = 0;  // all hardware threads (the bits do not depend on it)
  return k;
}

}  // namespace

std::vector<Case> bitlinear_codes_cases() {
  std::vector<Case> out;
  if (!OpKernels::runs_codes()) return out;  // LOCKSTEP_CUDA_BASE_CODES=0: the kernels are not used
  for (const auto& g : ops::BitLinear::gate_cases()) {
    const ops::QuantLinearConfig c = g.config;
    out.push_back({"bitlinear_codes_fwd", g.shape, "bitlinear_codes", 0, [c](std::uint64_t seed) {
                     CodesCase k(c, seed);
                     Vec y(c.rows * c.out);
                     cpu_kernels().bitlinear_codes_fwd(c, k.x.data(), k.bytes.data(), k.scale, y.data());
                     DeviceBuffer<float> d_x, d_y;
                     d_x.upload(k.x);
                     d_y.resize(y.size());
                     OpKernels().bitlinear_codes_fwd(c, d_x.data(), k.d_bytes.data(), k.scale, d_y.data());
                     synchronize("gate");
                     return first_difference("y", y, d_y.download(), c.out);
                   }});
    out.push_back({"bitlinear_codes_bwd", g.shape, "bitlinear_codes", 0, [c](std::uint64_t seed) {
                     CodesCase k(c, seed);
                     Vec dx(c.rows * c.in);
                     cpu_kernels().bitlinear_codes_bwd(c, k.bytes.data(), k.scale, k.dy.data(), dx.data());
                     DeviceBuffer<float> d_dy, d_dx;
                     d_dy.upload(k.dy);
                     d_dx.resize(dx.size());
                     OpKernels().bitlinear_codes_bwd(c, k.d_bytes.data(), k.scale, d_dy.data(), d_dx.data());
                     synchronize("gate");
                     return first_difference("dx", dx, d_dx.download(), c.in);
                   }});
  }
  return out;
}

}  // namespace lockstep::cuda::gate
