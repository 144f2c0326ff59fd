// Start-up gates of the LoRA branch's glue (lora.cu; gate.hpp): each kernel
// through cuda::OpKernels, as the engine calls it (model/lora_branch.hpp),
// against its CPU reference ops/lora_glue.hpp, by bit pattern. Case::op "lora".
//   lora_scale_add  y = y + u·s    on ragged sizes, with scales that round
//                   (16/3, 16/sqrt(8), PEFT's alpha/r and rsLoRA's) and one
//                   that does not (2: u·s exact, where an fma would agree);
//                   -0 cells and sums past FLT_MAX;
//   lora_scale      du = dy·s      the same sizes and scales;
//   lora_dropout    the keep mask and x·q, out of place (the forward) and in
//                   place (the backward), for several p (0.05, 0.1, 0.5, 0.9),
//                   seeds and streams with both 32-bit halves set, sizes off
//                   the Philox block of four.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "lockstep/ad/rng.hpp"
#include "lockstep/backend/cuda/device.hpp"
#include "lockstep/backend/cuda/gate.hpp"
#include "lockstep/backend/cuda/ops.hpp"
#include "lockstep/ops/arg_arrays.hpp"
#include "lockstep/ops/lora_glue.hpp"

namespace lockstep::cuda::gate {
namespace {

using Vec = std::vector<float>;

Vec seeded(ad::Rng& rng, std::size_t n) {
  // -0 in every fifth cell (-0 + -0 = -0), ±large cells whose sums overflow.
  Vec v(n);
  ops::seed_floats(ops::Seed::normal(1.0, 3e38f, 5), rng, v.data(), n);
  return v;
}

constexpr std::size_t kSizes[] = {1, 5, 33, 97, 256, 5000, 130 * 97};

}  // namespace

std::vector<Case> lora_cases() {
  std::vector<Case> out;
  const float scales[] = {16.0f / 3.0f, static_cast<float>(16.0 / std::sqrt(8.0)), 2.0f};
  for (std::size_t n : kSizes)
    for (float s : scales) {
      out.push_back({"lora_scale_add", fmt::format("n {} s {}", n, s), "lora", 0, [n, s](std::uint64_t seed) {
                       ad::Rng rng(seed);
                       Vec y = seeded(rng, n), u = seeded(rng, n);
                       DeviceBuffer<float> d_y, d_u;
                       d_y.upload(y);
                       d_u.upload(u);
                       ops::lora_glue::scale_add(n, y.data(), u.data(), s);
                       OpKernels().lora_scale_add(n, d_y.data(), d_u.data(), s);
                       return first_difference("y", y, d_y.download());
                     }});
      out.push_back({"lora_scale", fmt::format("n {} s {}", n, s), "lora", 0, [n, s](std::uint64_t seed) {
                       ad::Rng rng(seed);
                       const Vec in = seeded(rng, n);
                       Vec o(n);
                       DeviceBuffer<float> d_in, d_out(n);
                       d_in.upload(in);
                       ops::lora_glue::scale(n, o.data(), in.data(), s);
                       OpKernels().lora_scale(n, d_out.data(), d_in.data(), s);
                       return first_difference("out", o, d_out.download());
                     }});
    }
  const double drops[] = {0.05, 0.1, 0.5, 0.9};
  for (std::size_t n : kSizes)
    for (double p : drops)
      for (bool in_place : {false, true}) {
        out.push_back({"lora_dropout", fmt::format("n {} p {}{}", n, p, in_place ? " in place" : ""), "lora", 0,
                       [n, p, in_place](std::uint64_t seed) {
                         ad::Rng rng(seed);
                         const Vec in = seeded(rng, n);
                         // Both halves of the key and of the stream set: the
                         // counter layout's four words all differ from zero.
                         const std::uint64_t key = 0x9E3779B97F4A7C15ull ^ seed, stream = 0xD1B54A32D192ED03ull + seed;
                         const float pf = static_cast<float>(p);
                         const float q = static_cast<float>(1.0 / (1.0 - p));
                         Vec o(n);
                         ops::lora_glue::dropout(n, in.data(), o.data(), key, stream, pf, q);
                         DeviceBuffer<float> d_in, d_out(n);
                         d_in.upload(in);
                         float* dst = in_place ? d_in.data() : d_out.data();
                         OpKernels().lora_dropout(n, d_in.data(), dst, key, stream, pf, q);
                         return first_difference("out", o, in_place ? d_in.download() : d_out.download());
                       }});
      }
  return out;
}

}  // namespace lockstep::cuda::gate
