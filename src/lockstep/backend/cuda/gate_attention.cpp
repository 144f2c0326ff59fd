// Gate cases of the attention family (gate.hpp): cuda::OpKernels'
// attention_fwd and attention_bwd against cpu::OpKernels, by bit pattern, on
// ragged shapes — sequence lengths off and on the 64-key block (1, 2, 63, 64,
// 65, 130), head sizes 1, 8, 33, 64 (and 17, 100, 128 for the other register
// tilings, 160 for the per-cell kernels), multi-head, grouped-query and
// multi-query heads, batch 1 and 3, q/k/v separate (ldq = Hq·Dh) or fused in
// one [N, (Hq + 2·Hkv)·Dh] buffer as GPT-2's projection writes them.
//
// Outputs are pre-filled with the same sentinel on both sides, so a kernel
// that accumulates into its output, or writes a cell it does not own (the gaps
// of the fused gradient buffer belong to the other two tensors), differs.
// The backward runs on the CPU forward's o and lse, so its verdict does not
// depend on the forward's.
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "lockstep/backend/cpu/ops.hpp"
#include "lockstep/backend/cuda/device.hpp"
#include "lockstep/backend/cuda/gate.hpp"
#include "lockstep/backend/cuda/ops.hpp"
#include "lockstep/num/fp.hpp"

namespace lockstep::cuda::gate {
namespace {

struct AttnShape {
  std::size_t batch, seq, q_heads, kv_heads, head_dim;
  bool fused;
  std::size_t key_block = 64;
};

// Where q, k, v (and dq, dk, dv) live in one buffer: fused rows
// [q heads | k heads | v heads] of length ld, or three separate tensors.
struct Layout {
  std::size_t ldq, ldkv, qo, ko, vo, size;
};
Layout layout_of(const AttnShape& s) {
  const std::size_t N = s.batch * s.seq, dq = s.q_heads * s.head_dim, dkv = s.kv_heads * s.head_dim;
  if (s.fused) {
    const std::size_t ld = dq + 2 * dkv;
    return {ld, ld, 0, dq, dq + dkv, N * ld};
  }
  return {dq, dkv, 0, N * dq, N * dq + N * dkv, N * (dq + 2 * dkv)};
}

std::string describe(const AttnShape& s) {
  const Layout L = layout_of(s);
  return fmt::format("B {} T {} Hq {} Hkv {} Dh {} ldq {} ldkv {}{}{}", s.batch, s.seq, s.q_heads, s.kv_heads,
                     s.head_dim, L.ldq, L.ldkv, s.fused ? " (fused qkv)" : "",
                     s.key_block != 64 ? fmt::format(" key_block {}", s.key_block) : "");
}

constexpr std::uint32_t kSentinel = 0x7FC0DEADu;  // a NaN no kernel writes

std::vector<float> random_vector(std::size_t n, std::mt19937_64& rng, float sigma) {
  std::normal_distribution<float> dist(0.0f, sigma);
  std::vector<float> x(n);
  for (float& v : x) v = dist(rng);
  return x;
}

// The cells of rows [0, N) × cols [0, width) of a strided buffer, packed.
std::vector<float> gather(const std::vector<float>& buf, std::size_t off, std::size_t ld, std::size_t N,
                          std::size_t width) {
  std::vector<float> out(N * width);
  for (std::size_t r = 0; r < N; ++r)
    for (std::size_t c = 0; c < width; ++c) out[r * width + c] = buf[off + r * ld + c];
  return out;
}

std::string run_case(const AttnShape& s, bool backward, std::uint64_t seed) {
  const ops::Attention::Config c{s.batch, s.seq, s.q_heads, s.kv_heads, s.head_dim, 0.0, s.key_block};
  const Layout L = layout_of(s);
  const std::size_t N = s.batch * s.seq, dq = s.q_heads * s.head_dim, dkv = s.kv_heads * s.head_dim;
  std::mt19937_64 rng(seed);
  const std::vector<float> x = random_vector(L.size, rng, 1.5f);
  const float sentinel = num::float_of(kSentinel);

  cpu::OpKernels cpu;
  std::vector<float> o(N * dq, sentinel), lse(s.batch * s.q_heads * s.seq, sentinel);
  cpu.attention_fwd(c, x.data() + L.qo, L.ldq, x.data() + L.ko, x.data() + L.vo, L.ldkv, o.data(), lse.data());

  OpKernels gpu;
  DeviceBuffer<float> X, O, LSE;
  X.upload(x);
  if (!backward) {
    O.upload(std::vector<float>(o.size(), sentinel));
    LSE.upload(std::vector<float>(lse.size(), sentinel));
    gpu.attention_fwd(c, X.data() + L.qo, L.ldq, X.data() + L.ko, X.data() + L.vo, L.ldkv, O.data(), LSE.data());
    synchronize("attention_fwd gate");
    std::string d = first_difference("o", o, O.download(), dq);
    if (d.empty()) d = first_difference("lse", lse, LSE.download(), s.seq);
    return d;
  }

  const std::vector<float> dout = random_vector(N * dq, rng, 1.0f);
  std::vector<float> g(L.size, sentinel);
  cpu.attention_bwd(c, x.data() + L.qo, L.ldq, x.data() + L.ko, x.data() + L.vo, L.ldkv, o.data(), lse.data(),
                    dout.data(), g.data() + L.qo, g.data() + L.ko, g.data() + L.vo);
  DeviceBuffer<float> DO, G;
  O.upload(o);
  LSE.upload(lse);
  DO.upload(dout);
  G.upload(std::vector<float>(L.size, sentinel));
  gpu.attention_bwd(c, X.data() + L.qo, L.ldq, X.data() + L.ko, X.data() + L.vo, L.ldkv, O.data(), LSE.data(),
                    DO.data(), G.data() + L.qo, G.data() + L.ko, G.data() + L.vo);
  synchronize("attention_bwd gate");
  const std::vector<float> gg = G.download();
  std::string d = first_difference("dq", gather(g, L.qo, L.ldq, N, dq), gather(gg, L.qo, L.ldq, N, dq), dq);
  if (d.empty()) d = first_difference("dk", gather(g, L.ko, L.ldkv, N, dkv), gather(gg, L.ko, L.ldkv, N, dkv), dkv);
  if (d.empty()) d = first_difference("dv", gather(g, L.vo, L.ldkv, N, dkv), gather(gg, L.vo, L.ldkv, N, dkv), dkv);
  if (d.empty()) d = first_difference("dq|dk|dv buffer (cells outside the three tensors)", g, gg);
  return d;
}

std::vector<AttnShape> shapes() {
  std::vector<AttnShape> out;
  const std::size_t seqs[] = {1, 2, 63, 64, 65, 130};
  const std::size_t dims[] = {1, 8, 33, 64};
  const std::size_t heads[][2] = {{1, 1}, {4, 2}, {6, 1}, {12, 12}};
  // Every (T, Dh, heads) triple; batch and layout alternate so that each
  // value of either meets every T, every Dh and every head grouping.
  std::size_t n = 0;
  for (std::size_t t : seqs)
    for (std::size_t d : dims)
      for (const auto& h : heads) {
        const bool fused = (n + n / 4) % 2 == 0;
        const std::size_t batch = (n / 2 + n / 8) % 2 == 0 ? 1 : 3;
        out.push_back({batch, t, h[0], h[1], d, fused});
        ++n;
      }
  // The other register tilings (Dh <= 16, 32, 128), a group of 3, long rows.
  out.push_back({2, 129, 4, 4, 17, true});
  out.push_back({1, 130, 2, 1, 100, false});
  out.push_back({1, 193, 2, 1, 128, true});
  out.push_back({1, 300, 12, 4, 64, true});
  // The per-cell kernels: another key block, a head beyond the tiled kernels'.
  out.push_back({2, 70, 4, 2, 33, true, 16});
  out.push_back({1, 130, 2, 2, 8, false, 100});
  out.push_back({1, 65, 2, 2, 160, true});
  return out;
}

}  // namespace

std::vector<Case> attention_cases() {
  std::vector<Case> cases;
  for (const AttnShape& s : shapes())
    for (const bool backward : {false, true})
      cases.push_back({backward ? "attention_bwd" : "attention_fwd", describe(s),
                       [s, backward](std::uint64_t seed) { return run_case(s, backward, seed); }});
  return cases;
}

}  // namespace lockstep::cuda::gate
