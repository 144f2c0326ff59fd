// Whole-model verification, for tiny GPT-2, LLaMA and BitNet configurations:
//
// 1. Every parameter tensor's gradient, from the model's backward (the op
//    specs' backwards composed in the order of the backward lists), against
//    central finite differences of the model's loss in double precision at
//    sampled coordinates. BitNet's quantized projections are differentiated
//    through their straight-through surrogate (ops/quant.hpp): the corrections
//    x̂ - x and Ŵ - W are detached at the point, as BitNet's reference does,
//    so the function finite differences see is the one the STE backward is
//    the exact derivative of.
// 2. The loss the model computes IS the composition of the op specs: the
//    test composes the ops by hand (ops::X::forward, no model code) and
//    compares — bit for bit in float (against both the spec model and the
//    fast CPU model), and in double; the float loss is the double one to
//    float accuracy, BitLinear's quantizer decisions shared (see BitCodes).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <string>
#include <type_traits>
#include <vector>

#include "lockstep/model/model.hpp"
#include "lockstep/model/transformer.hpp"
#include "lockstep/ops/all.hpp"
#include "model_test_util.hpp"

namespace m = lockstep::model;
namespace mt = lockstep::model::testing;
namespace ops = lockstep::ops;
using lockstep::Tensor;
using lockstep::num::bits_of;

namespace {

std::uint64_t test_seed() {
  static const std::uint64_t s = [] {
    const std::uint64_t v = lockstep::ad::seed_from_env();
    std::printf("seed %llu (LOCKSTEP_SEED=%llu reproduces)\n", static_cast<unsigned long long>(v),
                static_cast<unsigned long long>(v));
    return v;
  }();
  return s;
}

// ---------------------------------------------------------------------------
// The loss composed by hand from the op specifications (no model code).
// ---------------------------------------------------------------------------
// BitLinear's quantizer decisions at one call site (in call order): the
// activation codes [rows, in] and the ternary weight codes [out, in].
//
// Why the float loss is compared with a double evaluation that REPLAYS the
// float evaluation's codes: a quantizer is a step function, so the two
// precisions, whose inputs differ by rounding (~2^-24 relative), take
// different decisions wherever a value lies within that rounding of a code
// boundary (x·127/m_r near a half-integer, or w/mean|w| near ±1/2). Among
// ~10^5 decisions a few do, and one flipped code moves the loss by up to a
// step times its sensitivity: a whole activation step, m_r/127, or a whole
// weight scale, mean|w|. That is not float round-off, yet it reached 1e-4 of
// the loss about once in 30 seeds (LOCKSTEP_SEED=6608125647251228489:
// 1.4e-4). With the decisions shared, what is left between the two losses is
// the canonical arithmetic's rounding alone, which the bound is about; the
// double evaluation stays the op's forward everywhere the decisions agree
// (checked bit for bit per call site), and where they do not the codes are
// adjacent (a rounding-sized discrepancy crosses at most one boundary) and
// rare (checked below).
struct BitCodes {
  std::vector<std::int8_t> x, w;
};
// A replay's account: decisions compared, how many differed from this
// precision's own and by how many codes at most; call sites whose decisions
// all agreed, and elements where the replay then differed from the forward.
struct CodeShare {
  std::size_t codes = 0, differing = 0, sites_agreeing = 0, replay_not_forward = 0;
  int max_gap = 0;
};

template <class T>
class Hand {
 public:
  Hand(const m::ModelConfig& c, const std::vector<m::ParamT<T>>& ps) : c_(c) {
    for (const auto& p : ps) {
      lockstep::Shape s;
      for (auto d : p.shape) s.push_back(static_cast<std::size_t>(d));
      w_[p.name] = Tensor<T>(s, p.value);
    }
  }
  // BitLinear records its decisions into `into` (the loss is unchanged).
  void record_codes(std::vector<BitCodes>* into) { record_ = into; }
  // BitLinear uses the decisions in `from` with this precision's scales.
  void replay_codes(const std::vector<BitCodes>* from) { replay_ = from; next_site_ = 0; }
  const CodeShare& share() const { return share_; }

  T loss(const std::vector<ops::Index>& ids, const std::vector<ops::Index>& targets, std::size_t B, std::size_t S) {
    const std::size_t N = B * S, V = sz(c_.vocab_size), D = sz(c_.d_model);
    const bool gpt = c_.family == m::Family::Gpt2;
    Tensor<ops::Index> tid({N}, ids), ttg({N}, targets);
    const std::string wte_name = gpt ? "transformer.wte.weight" : "model.embed_tokens.weight";
    Tensor<T> x = ops::Embedding::forward<T>({N, V, D}, {tid, w(wte_name)}).y;
    if (gpt) x = ops::LearnedPositions::forward<T>({B, S, D, sz(c_.max_seq), 0}, {x, w("transformer.wpe.weight")}).y;
    for (std::int64_t l = 0; l < c_.n_layer; ++l) x = gpt ? gpt_block(x, l, B, S) : rope_block(x, l, B, S);
    Tensor<T> h = gpt ? ops::LayerNorm::forward<T>({N, D, c_.norm_eps}, {x, w("transformer.ln_f.weight"),
                                                                         w("transformer.ln_f.bias")})
                            .y
                      : ops::RmsNorm::forward<T>({N, D, c_.norm_eps}, {x, w("model.norm.weight")}).y;
    const Tensor<T>& head = c_.tie_embeddings ? w(wte_name) : w("lm_head.weight");
    const Tensor<T> logits = ops::Linear::forward<T>({N, D, V, false}, {h, head, {}}).y;
    const auto ce = ops::CrossEntropy::forward<T>({N, V}, {logits, ttg});
    std::size_t valid = 0;
    for (auto t : targets) valid += t >= 0;
    return ops::Math<T>::sum(ce.loss.ptr(), N) / static_cast<T>(valid);
  }

 private:
  static std::size_t sz(std::int64_t v) { return static_cast<std::size_t>(v); }
  const Tensor<T>& w(const std::string& name) const { return w_.at(name); }

  Tensor<T> gpt_block(const Tensor<T>& x, std::int64_t l, std::size_t B, std::size_t S) {
    const std::size_t N = B * S, D = sz(c_.d_model), F = sz(c_.d_ff), H = sz(c_.n_head), Dh = sz(c_.head_dim);
    const std::string p = "transformer.h." + std::to_string(l) + ".";
    const ops::NormConfig nc{N, D, c_.norm_eps};
    const Tensor<T> n1 = ops::LayerNorm::forward<T>(nc, {x, w(p + "ln_1.weight"), w(p + "ln_1.bias")}).y;
    const Tensor<T> qkv =
        ops::Linear::forward<T>({N, D, 3 * D, true}, {n1, w(p + "attn.c_attn.weight"), w(p + "attn.c_attn.bias")}).y;
    // HF GPT-2: query, key, value = c_attn(x).split(n_embd, dim=2).
    Tensor<T> q({B, S, H, Dh}), k({B, S, H, Dh}), v({B, S, H, Dh});
    for (std::size_t n = 0; n < N; ++n)
      for (std::size_t e = 0; e < D; ++e) {
        q[n * D + e] = qkv[n * 3 * D + e];
        k[n * D + e] = qkv[n * 3 * D + D + e];
        v[n * D + e] = qkv[n * 3 * D + 2 * D + e];
      }
    const Tensor<T> o = ops::Attention::forward<T>({B, S, H, H, Dh, 0.0, 64}, {q, k, v}).o;
    const Tensor<T> a =
        ops::Linear::forward<T>({N, D, D, true}, {o, w(p + "attn.c_proj.weight"), w(p + "attn.c_proj.bias")}).y;
    const Tensor<T> x1 = ops::ResidualAdd::forward<T>({N * D}, {x, a}).y;
    const Tensor<T> n2 = ops::LayerNorm::forward<T>(nc, {x1, w(p + "ln_2.weight"), w(p + "ln_2.bias")}).y;
    const Tensor<T> fc =
        ops::Linear::forward<T>({N, D, F, true}, {n2, w(p + "mlp.c_fc.weight"), w(p + "mlp.c_fc.bias")}).y;
    const Tensor<T> g = ops::Gelu::forward<T>({N * F}, {fc}).y;
    const Tensor<T> mo =
        ops::Linear::forward<T>({N, F, D, true}, {g, w(p + "mlp.c_proj.weight"), w(p + "mlp.c_proj.bias")}).y;
    return ops::ResidualAdd::forward<T>({N * D}, {x1, mo}).y;
  }

  Tensor<T> proj(const Tensor<T>& x, const std::string& name, std::size_t N, std::size_t in, std::size_t out) {
    if (c_.family == m::Family::Bitnet) return bitlinear(x, w(name), N, in, out);
    return ops::Linear::forward<T>({N, in, out, false}, {x, w(name), {}}).y;
  }

  // BitLinear: the op's forward; recording its decisions, or replaying the
  // recorded ones (see BitCodes).
  Tensor<T> bitlinear(const Tensor<T>& x, const Tensor<T>& wt, std::size_t N, std::size_t in, std::size_t out) {
    const ops::QuantLinearConfig qc{N, in, out};
    const ops::BitLinear::Inputs<T> bin{x, wt};
    Tensor<T> y = ops::BitLinear::forward<T>(qc, bin).y;
    if (record_ == nullptr && replay_ == nullptr) return y;
    const auto z = ops::BitLinear::quantize<T>(qc, bin);
    if (record_ != nullptr) {
      record_->push_back({z.x.q, z.qw});
      return y;
    }
    const BitCodes& r = replay_->at(next_site_++);
    std::size_t differing = 0;
    auto compare = [&](const std::vector<std::int8_t>& own, const std::vector<std::int8_t>& given) {
      for (std::size_t i = 0; i < own.size(); ++i) {
        const int gap = std::abs(int{own[i]} - int{given[i]});
        differing += gap != 0;
        share_.max_gap = std::max(share_.max_gap, gap);
      }
      share_.codes += own.size();
    };
    compare(z.x.q, r.x);
    compare(z.qw, r.w);
    share_.differing += differing;
    // This precision's scales (steps from its own row maxima, its own mean
    // |w|), the given codes, the op's exact integer product and epilogue.
    const auto acc = ops::int8_matmul_nt(r.x, r.w, N, out, in);
    Tensor<T> yr({N, out});
    for (std::size_t n = 0; n < N; ++n)
      for (std::size_t o = 0; o < out; ++o)
        yr[n * out + o] = ops::BitLinear::epilogue<T>(acc[n * out + o], z.x.step[n], z.wstep[o]);
    // Where the decisions agree the replay IS the op's forward, bit for bit.
    if (differing == 0) {
      ++share_.sites_agreeing;
      for (std::size_t i = 0; i < yr.numel(); ++i) share_.replay_not_forward += !bit_equal(yr[i], y[i]);
    }
    return yr;
  }
  static bool bit_equal(T a, T b) {
    using U = std::conditional_t<sizeof(T) == 8, std::uint64_t, std::uint32_t>;
    return std::bit_cast<U>(a) == std::bit_cast<U>(b);
  }

  Tensor<T> rope_block(const Tensor<T>& x, std::int64_t l, std::size_t B, std::size_t S) {
    const bool bit = c_.family == m::Family::Bitnet;
    const std::size_t N = B * S, D = sz(c_.d_model), F = sz(c_.d_ff), Hq = sz(c_.n_head), Hkv = sz(c_.n_kv_head),
                      Dh = sz(c_.head_dim);
    const std::string p = "model.layers." + std::to_string(l) + ".";
    const Tensor<T> n1 = ops::RmsNorm::forward<T>({N, D, c_.norm_eps}, {x, w(p + "input_layernorm.weight")}).y;
    Tensor<T> q = proj(n1, p + "self_attn.q_proj.weight", N, D, Hq * Dh);
    Tensor<T> k = proj(n1, p + "self_attn.k_proj.weight", N, D, Hkv * Dh);
    Tensor<T> v = proj(n1, p + "self_attn.v_proj.weight", N, D, Hkv * Dh);
    const auto layout =
        c_.rope_layout == m::RopeLayout::RotateHalf ? ops::RopeLayout::rotate_half : ops::RopeLayout::interleaved;
    q = ops::Rope::forward<T>({B, S, Hq, Dh, c_.rope_theta, layout, 0}, {q}).y;
    k = ops::Rope::forward<T>({B, S, Hkv, Dh, c_.rope_theta, layout, 0}, {k}).y;
    Tensor<T> o = ops::Attention::forward<T>({B, S, Hq, Hkv, Dh, 0.0, 64}, {q, k, v}).o;
    if (bit)
      o = ops::RmsNorm::forward<T>({N, Hq * Dh, c_.norm_eps}, {o, w(p + "self_attn.attn_sub_norm.weight")}).y;
    const Tensor<T> a = proj(o, p + "self_attn.o_proj.weight", N, Hq * Dh, D);
    const Tensor<T> x1 = ops::ResidualAdd::forward<T>({N * D}, {x, a}).y;
    const Tensor<T> n2 = ops::RmsNorm::forward<T>({N, D, c_.norm_eps}, {x1, w(p + "post_attention_layernorm.weight")}).y;
    const Tensor<T> gate = proj(n2, p + "mlp.gate_proj.weight", N, D, F);
    const Tensor<T> up = proj(n2, p + "mlp.up_proj.weight", N, D, F);
    Tensor<T> act = bit ? ops::ReluSqMul::forward<T>({N * F}, {gate, up}).y : ops::SwiGlu::forward<T>({N * F}, {gate, up}).y;
    if (bit) act = ops::RmsNorm::forward<T>({N, F, c_.norm_eps}, {act, w(p + "mlp.ffn_sub_norm.weight")}).y;
    const Tensor<T> down = proj(act, p + "mlp.down_proj.weight", N, F, D);
    return ops::ResidualAdd::forward<T>({N * D}, {x1, down}).y;
  }

  m::ModelConfig c_;
  std::map<std::string, Tensor<T>> w_;
  std::vector<BitCodes>* record_ = nullptr;
  const std::vector<BitCodes>* replay_ = nullptr;
  std::size_t next_site_ = 0;
  CodeShare share_;
};

struct Case {
  std::string name;
  m::ModelConfig cfg;
  std::size_t batch, seq;
};

std::vector<Case> cases() {
  auto v = mt::micro_configs(true);
  std::vector<Case> out;
  for (auto& nc : v) {
    const bool long_seq = nc.cfg.max_seq > 64;
    out.push_back({nc.name, nc.cfg, long_seq ? std::size_t{1} : std::size_t{2}, long_seq ? std::size_t{67} : std::size_t{7}});
  }
  return out;
}

}  // namespace

TEST(ModelSpec, TheLossIsTheCompositionOfTheOpSpecs) {
  const std::uint64_t seed = test_seed();
  for (const Case& k : cases()) {
    const bool quantized = k.cfg.family == m::Family::Bitnet;
    const auto b = mt::random_batch(k.batch, k.seq, k.cfg.vocab_size, seed ^ 0x11, true);
    // double
    m::SpecModel<double> md(k.cfg);
    mt::randomize(md.params(), seed ^ 0x12, 0.2);
    const double ld = md.run(b.ids, b.targets, k.batch, k.seq, false);
    const double hd = Hand<double>(k.cfg, md.params()).loss(b.ids, b.targets, k.batch, k.seq);
    // float: the spec model, the fast model and the hand composition (which
    // records BitLinear's decisions)
    m::SpecModel<float> mf(k.cfg);
    mt::copy_values(md.params(), mf.params());
    const float lf = mf.run(b.ids, b.targets, k.batch, k.seq, false);
    std::vector<BitCodes> float_codes;
    Hand<float> hand_f(k.cfg, mf.params());
    hand_f.record_codes(&float_codes);
    const float hf = hand_f.loss(b.ids, b.targets, k.batch, k.seq);
    auto fast = m::make_cpu_model(k.cfg);
    mt::copy_values(md.params(), fast->params());
    const float ff = fast->loss(b.ids, b.targets, static_cast<std::int64_t>(k.batch),
                                static_cast<std::int64_t>(k.seq), 2);
    std::printf("%-40s B=%zu T=%-2zu float: hand %.9g, spec model %.9g, cpu model %.9g (%s); double: hand %.17g, "
                "model %.17g (|diff| %.2g)\n",
                k.name.c_str(), k.batch, k.seq, static_cast<double>(hf), static_cast<double>(lf),
                static_cast<double>(ff),
                bits_of(hf) == bits_of(lf) && bits_of(hf) == bits_of(ff) ? "bit-equal" : "DIFFERENT", hd, ld,
                std::fabs(hd - ld));
    EXPECT_EQ(bits_of(hf), bits_of(lf)) << k.name;
    EXPECT_EQ(bits_of(hf), bits_of(ff)) << k.name;
    EXPECT_NEAR(hd, ld, 1e-14 * std::fabs(hd)) << k.name;
    // The float loss is the double one to float accuracy (a sanity bound on
    // the canonical arithmetic: ~1e-6 relative after a few hundred roundings).
    // With quantizers, the double one evaluated on the float one's decisions
    // (BitCodes says why).
    double reference = hd;
    if (quantized) {
      Hand<double> hand_d(k.cfg, md.params());
      hand_d.replay_codes(&float_codes);
      reference = hand_d.loss(b.ids, b.targets, k.batch, k.seq);
      const CodeShare& s = hand_d.share();
      std::printf("%-40s double on the float decisions: %.17g; %zu of %zu decisions differ (at most %d code "
                  "apart); own decisions: %.2g from it\n",
                  "", reference, s.differing, s.codes, s.max_gap, std::fabs(hd - reference));
      ASSERT_GT(s.codes, 0u) << k.name;
      EXPECT_EQ(s.replay_not_forward, 0u) << k.name << ": replaying agreeing decisions is not the op's forward";
      EXPECT_GT(s.sites_agreeing, 0u) << k.name;
      EXPECT_LE(s.max_gap, 1) << k.name << ": a decision two codes apart is no rounding-sized discrepancy";
      // A rounding-sized discrepancy (δ code units) flips about 2δ of the
      // decisions: over 300 seeds at most 6 of ~10^5 (0.2 on average), the
      // losses then 1.3e-7 apart at most. A quantizer that decides
      // differently in one precision (another rounding rule, another scale)
      // flips a large fraction (truncating instead of rounding: 7% to 21%).
      EXPECT_LE(s.differing, s.codes / 1000) << k.name << ": the precisions' quantizers decide differently";
    }
    EXPECT_NEAR(static_cast<double>(hf), reference, 1e-4 * std::fabs(reference)) << k.name;
  }
}

TEST(ModelSpec, EveryParameterGradientMatchesFiniteDifferencesInDouble) {
  const std::uint64_t seed = test_seed();
  // Step and tolerance. fd = (L(x + h) - L(x - h)) / (x⁺ - x⁻), h = 1e-6·max(1, |x|).
  // Its error has three parts:
  //  * truncation, h²·|third derivative|/6: ~1e-12 here;
  //  * ReLU² (BitNet's gate) is only C¹: when a gate crosses 0 inside the
  //    step the error is up to a²h/2 (a: the gate's sensitivity to x) — linear
  //    in h, the reason for the small step (at 1e-5 it reached 5e-7 of the
  //    scale in a sweep of seeds; at 1e-6 it stays near 5e-8). A gate can sit
  //    at exactly 0 (BitLinear's integer dot products are 0 often): then the
  //    error is that linear term in full, and CI's seed 6412935922590924150
  //    put one at 1.18x the bound in the NumPy reference. So a coordinate over
  //    the bound gets a second difference at h/10 and passes only if that is
  //    within the bound and its error fell at least fivefold: a correct
  //    gradient's O(h) error falls tenfold, a wrong gradient's does not;
  //  * round-off: the loss (~5-9) evaluated twice in double, ~64·2^-53·|L|
  //    apart at most, divided by the step: the absolute floor `noise`
  //    (the op checker's noise term, docs/VERIFIED_AD.md).
  // A tensor passes when max|fd - g| <= max(rtol·scale, noise), scale = the
  // largest |g| of the tensor. Measured errors are ~1e-9 absolute; a wrong
  // gradient term moves them to the scale of the gradient (>= 1e-3).
  constexpr double kStep = 1e-6;
  constexpr double kRtol = 1e-6;
  constexpr std::size_t kCoords = 4;
  std::size_t total_checked = 0, total_failed = 0;
  double worst = 0.0;  // largest error / tolerance
  for (const Case& k : cases()) {
    m::SpecModel<double> model(k.cfg);
    mt::randomize(model.params(), seed ^ 0x21, 0.3);
    const auto b = mt::random_batch(k.batch, k.seq, k.cfg.vocab_size, seed ^ 0x22, true);
    // The analytic gradient, recording BitLinear's inputs at the point.
    model.kernels().quant = m::SpecKernels<double>::Quant::Record;
    const double l0 = model.run(b.ids, b.targets, k.batch, k.seq, true);
    model.kernels().quant = m::SpecKernels<double>::Quant::Surrogate;
    // At the point the surrogate IS the forward.
    const double l0s = model.run(b.ids, b.targets, k.batch, k.seq, false);
    EXPECT_NEAR(l0s, l0, 1e-13 * std::fabs(l0)) << k.name;
    std::printf("%s (B=%zu T=%zu, loss %.6f)%s\n", k.name.c_str(), k.batch, k.seq, l0,
                k.cfg.family == m::Family::Bitnet ? ", BitLinear through its STE surrogate" : "");
    const double noise = 64.0 * 0x1p-53 * std::fabs(l0) / kStep;
    std::printf("  %-46s %-26s %9s %9s %9s %9s\n", "tensor", "coordinates", "|grad|max", "max abs", "max rel",
                "tol (abs)");
    lockstep::ad::Rng rng(seed ^ 0x23);
    auto& ps = model.params();
    for (std::size_t pi = 0; pi < ps.size(); ++pi) {
      auto& p = ps[pi];
      const std::vector<double> g = p.grad;  // analytic
      double scale = 0.0;
      for (double v : g) scale = std::max(scale, std::fabs(v));
      // Coordinates: embeddings at rows of tokens in the batch (and one
      // other), positions at rows < seq, everything else uniformly.
      const std::size_t rows = p.shape.size() == 2 ? static_cast<std::size_t>(p.shape[0]) : 1;
      const std::size_t cols = p.value.size() / rows;
      std::vector<std::size_t> at;
      const bool emb = p.name.find("wte") != std::string::npos || p.name.find("embed_tokens") != std::string::npos;
      const bool pos = p.name.find("wpe") != std::string::npos;
      for (std::size_t c = 0; c < kCoords; ++c) {
        std::size_t r = rng.below(rows);
        if (emb && c + 1 < kCoords) r = static_cast<std::size_t>(b.ids[rng.below(b.ids.size())]);
        if (pos) r = rng.below(k.seq);
        at.push_back(r * cols + rng.below(cols));
      }
      double max_abs = 0.0, max_rel = 0.0;
      std::string coords;
      const double tol = std::max(kRtol * scale, noise);
      const auto central_difference = [&](std::size_t e, double h) {
        const double x = p.value[e];
        p.value[e] = x + h;
        const double xp = p.value[e];
        const double lp = model.run(b.ids, b.targets, k.batch, k.seq, false);
        p.value[e] = x - h;
        const double xn = p.value[e];
        const double ln = model.run(b.ids, b.targets, k.batch, k.seq, false);
        p.value[e] = x;
        return (lp - ln) / (xp - xn);
      };
      for (std::size_t e : at) {
        const double h = kStep * std::max(1.0, std::fabs(p.value[e]));
        double err = std::fabs(central_difference(e, h) - g[e]);
        if (err > tol) {  // a second-derivative kink at the point? (above)
          const double fine_tol = std::max(kRtol * scale, 10.0 * noise);
          const double fine_err = std::fabs(central_difference(e, h / 10.0) - g[e]);
          if (fine_err <= fine_tol && 5.0 * fine_err <= err) {
            std::printf("  %s[%zu]: |fd - g| %.3g at h, %.3g at h/10 (falls with the step: a kink at the point)\n",
                        p.name.c_str(), e, err, fine_err);
            err = fine_err;
          }
        }
        max_abs = std::max(max_abs, err);
        if (!coords.empty()) coords.push_back(',');
        coords.append(std::to_string(e));
      }
      max_rel = scale > 0.0 ? max_abs / scale : max_abs;
      const bool pass = max_abs <= tol;
      total_checked += at.size();
      total_failed += !pass;
      worst = std::max(worst, max_abs / tol);
      std::printf("  %-46s %-26s %9.3g %9.2g %9.2g %9.2g %s\n", p.name.c_str(), coords.substr(0, 26).c_str(), scale,
                  max_abs, max_rel, tol, pass ? "ok" : "FAIL");
      EXPECT_TRUE(pass) << k.name << " " << p.name << ": max abs error " << max_abs << ", scale " << scale;
      EXPECT_GT(scale, 0.0) << k.name << " " << p.name << " has an all-zero gradient";
    }
    model.kernels().quant = m::SpecKernels<double>::Quant::Forward;
  }
  std::printf("%zu gradient coordinates checked, %zu tensors failed; largest error / tolerance %.3g\n",
              total_checked, total_failed, worst);
}
