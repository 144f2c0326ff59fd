// The CUDA attention kernels (backend/cuda/attention.cu) run on the host by
// the fiber emulator (cuda_host_emu.hpp), against cpu::OpKernels bit for bit:
// the forward on each of its query tiles, the backward on each of its paths
// (stored dS, in chunks, recomputed) and dk/dv loops (v5's, v4's). No GPU: what this proves is the kernels'
// logic (tiling, masks, edges, barriers under shuffled thread orders); the
// device's own runs are test_cuda_attention's (label gpu).
#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "cuda_host_emu.hpp"
// attention.cu's own includes first, so that the hook below renames only its calls.
#include "lockstep/backend/cuda/attention_launch.hpp"
#include "lockstep/backend/cuda/device.hpp"
#include "lockstep/backend/cuda/mutant.hpp"
#include "lockstep/backend/cuda/trace_launch.hpp"
#include "lockstep/backend/cpu/ops.hpp"
#include "lockstep/ops/attention.hpp"

// No device to ask for launch errors: the emulator throws on its own.
#define check_launch(name) ((void)(name))
#include "lockstep/backend/cuda/attention.cu"  // (nvcc's #pragma unroll: -Wno-unknown-pragmas, CMakeLists)
#undef check_launch

namespace ll = lockstep::cuda::launch;
namespace ops = lockstep::ops;

namespace {

struct Shape {
  std::size_t batch, seq, q_heads, kv_heads, head_dim;
  bool fused;
  std::size_t pad = 0;
};

std::string name_of(const Shape& s) {
  return "B " + std::to_string(s.batch) + " T " + std::to_string(s.seq) + " Hq " + std::to_string(s.q_heads) +
         " Hkv " + std::to_string(s.kv_heads) + " Dh " + std::to_string(s.head_dim) + (s.fused ? " fused" : "") +
         (s.pad ? " pad " + std::to_string(s.pad) : "");
}

std::string hex(float v) {
  char b[32];
  std::snprintf(b, sizeof b, "%a", static_cast<double>(v));
  return b;
}

// The first cell whose bits differ, or "".
std::string first_difference(const char* what, const std::vector<float>& want, const std::vector<float>& got) {
  if (want.size() != got.size()) return std::string(what) + ": sizes differ";
  for (std::size_t i = 0; i < want.size(); ++i)
    if (std::memcmp(&want[i], &got[i], sizeof(float)) != 0)
      return std::string(what) + "[" + std::to_string(i) + "]: cpu " + hex(want[i]) + ", emulated " + hex(got[i]);
  return "";
}

struct Case {
  Shape s;
  ops::Attention::Config c;
  ll::AttentionShape sh;
  std::size_t ldq, ldkv, rows, qw, kvw;
  std::size_t q_at = 0, k_at, v_at;  // offsets of q, k, v in x
  std::vector<float> x, dout;        // q|k|v rows (fused or separate), dO
  std::vector<float> o, lse, g;      // the CPU's o, lse, and dq|dk|dv (laid out like x)

  explicit Case(const Shape& sp) : s(sp) {
    c = {s.batch, s.seq, s.q_heads, s.kv_heads, s.head_dim, 0.0, 64};
    rows = s.batch * s.seq;
    qw = s.q_heads * s.head_dim;
    kvw = s.kv_heads * s.head_dim;
    if (s.fused) {
      ldq = ldkv = qw + 2 * kvw + s.pad;
      k_at = qw;
      v_at = qw + kvw;
      x.resize(rows * ldq);
    } else {
      ldq = qw + s.pad;
      ldkv = kvw + s.pad;
      k_at = rows * ldq;
      v_at = k_at + rows * ldkv;
      x.resize(rows * ldq + 2 * rows * ldkv);
    }
    std::mt19937_64 rng(s.seq * 131 + s.head_dim);
    std::normal_distribution<float> nd(0.0f, 1.5f);
    for (float& v : x) v = nd(rng);
    dout.resize(rows * qw);
    for (float& v : dout) v = nd(rng) / 1.5f;
    sh.batch = s.batch;
    sh.seq = s.seq;
    sh.q_heads = s.q_heads;
    sh.kv_heads = s.kv_heads;
    sh.head_dim = s.head_dim;
    sh.ldq = ldq;
    sh.ldkv = ldkv;
    sh.scale = ops::Attention::scale_of<float>(c);

    lockstep::cpu::OpKernels cpu;
    cpu.threads = 2;
    o.assign(rows * qw, 0.0f);
    lse.assign(s.batch * s.q_heads * s.seq, 0.0f);
    cpu.forward<ops::Attention>(c, {.q = x.data() + q_at, .ldq = ldq, .k = x.data() + k_at, .v = x.data() + v_at,
                                    .ldkv = ldkv, .o = o.data(), .lse = lse.data()});
    g.assign(x.size(), 0.0f);
    cpu.backward<ops::Attention>(c, {.q = x.data() + q_at, .ldq = ldq, .k = x.data() + k_at,
                                     .v = x.data() + v_at, .ldkv = ldkv, .o = o.data(), .lse = lse.data(),
                                     .dout = dout.data(), .dq = g.data() + q_at, .dk = g.data() + k_at,
                                     .dv = g.data() + v_at});
  }

  std::string forward() const {
    std::vector<float> eo(o.size(), -7.0f), el(lse.size(), -7.0f);
    ll::attention_fwd(sh, x.data() + q_at, x.data() + k_at, x.data() + v_at, eo.data(), el.data());
    std::string d = first_difference("o", o, eo);
    return d.empty() ? first_difference("lse", lse, el) : d;
  }
  // chunk: batch elements of dS per launch (0: dq recomputes dS).
  std::string backward(std::size_t chunk) const {
    std::vector<float> eg(x.size(), 0.0f);
    const std::size_t rows_n = s.batch * s.q_heads * s.seq;
    const std::size_t all = ll::attention_bwd_scratch_floats(sh, ~std::size_t{0} / 2);
    std::size_t n = rows_n;
    if (chunk > 0 && all > rows_n) {
      const std::size_t offset = (rows_n + 63) / 64 * 64, per_b = (all - offset) / s.batch;
      n = offset + std::min(chunk, s.batch) * per_b;
    }
    std::vector<float> scratch(n, std::numeric_limits<float>::quiet_NaN());
    ll::attention_bwd(sh, x.data() + q_at, x.data() + k_at, x.data() + v_at, o.data(), lse.data(), dout.data(),
                      eg.data() + q_at, eg.data() + k_at, eg.data() + v_at, scratch.data(), n);
    return first_difference("dq|dk|dv", g, eg);
  }
};

// Off and on the 64- and 128-row tiles, every head chunking DC (Dh 8, 17, 33,
// 64, 100), float4 and scalar rows (Dh 33, 17, padded rows), grouped and
// multi-query heads, fused q|k|v.
std::vector<Shape> shapes() {
  return {
      {1, 1, 1, 1, 8, false},    {1, 65, 4, 2, 64, true},    {2, 130, 2, 1, 33, false},
      {1, 193, 2, 1, 64, true},  {1, 129, 2, 2, 64, false, 7}, {2, 70, 2, 2, 17, true},
      {1, 300, 2, 1, 64, true},  {1, 64, 2, 2, 64, false},   {1, 100, 2, 1, 100, false},
      {1, 128, 1, 1, 64, false}, {1, 256, 1, 1, 64, true},
  };
}

}  // namespace

// Each query tile the forward has (128 rows, the rule for head_dim <= 64; 64 rows).
TEST(CudaAttentionEmulated, ForwardBitForBit) {
  for (const Shape& s : shapes()) {
    const Case k(s);
    for (const int rows : {0, 64}) {
      ll::attention_fwd_tile_override(rows);
      EXPECT_EQ(k.forward(), "") << name_of(s) << ", " << ll::attention_fwd_tile(k.sh) << "-query tile";
    }
    ll::attention_fwd_tile_override(0);
  }
}

TEST(CudaAttentionEmulated, BackwardPathsBitForBit) {
  for (const Shape& s : shapes()) {
    const Case k(s);
    EXPECT_EQ(k.backward(k.s.batch), "") << name_of(s) << ", dS stored";
    EXPECT_EQ(k.backward(0), "") << name_of(s) << ", dS recomputed";
    ll::attention_bwd_dkdv_v4_override(true);
    EXPECT_EQ(k.backward(k.s.batch), "") << name_of(s) << ", dS stored, v4 dk/dv loop";
    EXPECT_EQ(k.backward(0), "") << name_of(s) << ", dS recomputed, v4 dk/dv loop";
    ll::attention_bwd_dkdv_v4_override(false);
    if (s.batch > 1) {
      EXPECT_EQ(k.backward(1), "") << name_of(s) << ", dS in chunks of 1";
    }
  }
}

// The barriers are real: thread orders shuffled every round change nothing.
TEST(CudaAttentionEmulated, ShuffledThreadOrders) {
  emu::cta.shuffle_order = true;
  for (const Shape& s : {Shape{1, 193, 2, 1, 64, true}, Shape{2, 70, 2, 2, 17, true}}) {
    const Case k(s);
    EXPECT_EQ(k.forward(), "") << name_of(s);
    ll::attention_fwd_tile_override(64);
    EXPECT_EQ(k.forward(), "") << name_of(s) << ", 64-query tile";
    ll::attention_fwd_tile_override(0);
    EXPECT_EQ(k.backward(1), "") << name_of(s);
  }
  emu::cta.shuffle_order = false;
}

// The gate's mutant (scores without 1/sqrt(Dh)) is seen by every kernel here.
TEST(CudaAttentionEmulated, DropScaleMutantDiffers) {
  const Case k(Shape{1, 193, 2, 1, 64, true});
  lockstep::cuda::set_mutant(lockstep::cuda::Mutant::attention_drop_scale);
  std::vector<std::string> d;
  for (const int rows : {0, 64}) {
    ll::attention_fwd_tile_override(rows);
    d.push_back(k.forward());
  }
  ll::attention_fwd_tile_override(0);
  d.push_back(k.backward(1));
  d.push_back(k.backward(0));
  lockstep::cuda::set_mutant(lockstep::cuda::Mutant::none);
  for (const std::string& x : d) EXPECT_NE(x, "");
  EXPECT_EQ(k.forward(), "");
}
