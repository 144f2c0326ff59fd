// The gradient checker itself: it accepts an op defined outside the library
// (the worked example of docs/VERIFIED_AD.md), its finite differences are
// accurate far below the tolerance, it resolves a single wrong entry, it
// enforces the backward's contract, and a run is reproducible from its seed.
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "lockstep/ad/gradcheck.hpp"
#include "lockstep/ops/all.hpp"

namespace {

using namespace lockstep;

// --- the worked example: a learned per-channel gain (LayerScale) -------------
// y[n,j] = x[n,j] * s[j];  dx = dy * s;  ds_j = chain_n(dy[n,j] * x[n,j])
struct ChannelScale {
  static constexpr std::string_view name = "channel_scale";
  struct Config {
    std::size_t rows = 0, dim = 0;
  };
  template <class T>
  struct Inputs {
    Tensor<T> x;  // [N, D]
    Tensor<T> s;  // [D]
    static void fields(auto& st, auto&& f) {
      f("x", st.x, ops::Arg::diff);
      f("s", st.s, ops::Arg::diff);
    }
  };
  template <class T>
  struct Outputs {
    Tensor<T> y;  // [N, D]
    static void fields(auto& st, auto&& f) { f("y", st.y, ops::Arg::output); }
  };
  template <class T>
  static Outputs<T> forward(const Config& c, const Inputs<T>& in) {
    Outputs<T> out{Tensor<T>({c.rows, c.dim})};
    for (std::size_t n = 0; n < c.rows; ++n)
      for (std::size_t j = 0; j < c.dim; ++j) out.y[n * c.dim + j] = in.x[n * c.dim + j] * in.s[j];
    return out;
  }
  template <class T>
  static Inputs<T> backward(const Config& c, const Inputs<T>& in, const Outputs<T>&,
                            const Outputs<T>& dout) {
    Inputs<T> g{Tensor<T>({c.rows, c.dim}), Tensor<T>({c.dim})};
    for (std::size_t n = 0; n < c.rows; ++n)
      for (std::size_t j = 0; j < c.dim; ++j) g.x[n * c.dim + j] = dout.y[n * c.dim + j] * in.s[j];
    for (std::size_t j = 0; j < c.dim; ++j)
      g.s[j] = ops::Math<T>::dot_seq(dout.y.ptr() + j, static_cast<std::ptrdiff_t>(c.dim),
                                     in.x.ptr() + j, static_cast<std::ptrdiff_t>(c.dim), c.rows);
    return g;
  }
  static std::vector<Config> cases() { return {{4, 6}, {1, 3}}; }
  static Inputs<double> sample(const Config& c, ad::Rng& rng) {
    return {rng.normal({c.rows, c.dim}), rng.normal({c.dim})};
  }
};

// The same op without a backward: not a differentiable op, so it cannot join
// an OpList (a compile error, checked here without breaking the build).
struct ChannelScaleForwardOnly {
  static constexpr std::string_view name = "channel_scale_fwd";
  using Config = ChannelScale::Config;
  template <class T>
  using Inputs = ChannelScale::Inputs<T>;
  template <class T>
  using Outputs = ChannelScale::Outputs<T>;
  template <class T>
  static Outputs<T> forward(const Config& c, const Inputs<T>& in) {
    return ChannelScale::forward(c, in);
  }
  static std::vector<Config> cases() { return {{1, 1}}; }
  static Inputs<double> sample(const Config&, ad::Rng&) { return {}; }
};

static_assert(ad::VerifiedOp<ChannelScale>);
static_assert(!ad::DifferentiableOp<ChannelScaleForwardOnly>);
static_assert(!ad::VerifiedOp<ChannelScaleForwardOnly>);
static_assert(ad::HasSurrogate<ops::BitLinear> && !ad::HasSurrogate<ops::Linear>);
static_assert(ops::AllOps::size == 17);

TEST(Checker, AcceptsAnOpDefinedOutsideTheLibrary) {
  ad::RunOptions o;
  o.seed = ad::seed_from_env();
  std::printf("seed %llu\n", static_cast<unsigned long long>(o.seed));
  for (const ad::CheckResult& r : ad::run_checks<ChannelScale>(o)) {
    std::printf("%-40s cases %4llu  max rel %9.3g  %s\n", r.check.c_str(),
                static_cast<unsigned long long>(r.cases), r.max_rel, r.pass ? "PASS" : "FAIL");
    EXPECT_TRUE(r.pass) << r.check << ": " << r.note;
  }
}

// Central differences in double are accurate to ~1e-10 here: the 1e-6
// tolerance is four orders above the noise, not at its edge.
TEST(Checker, FiniteDifferencesAreFarMoreAccurateThanTheTolerance) {
  const std::uint64_t seed = ad::seed_from_env();
  ad::Rng rng(seed);
  const ops::Attention::Config c{1, 9, 2, 1, 5, 0.0, 4};
  const auto x = ops::Attention::sample(c, rng);
  const auto d = ad::random_cotangent<ops::Attention>(ops::Attention::forward(c, x), rng);
  const auto rep = ad::check_vjp<ops::Attention>(c, x, d, ad::true_backward<ops::Attention>());
  std::printf("attention: %zu entries, max rel error %.3g (tolerance 1e-6), seed %llu\n",
              rep.entries(), rep.max_rel(), static_cast<unsigned long long>(seed));
  EXPECT_TRUE(rep.pass());
  EXPECT_LT(rep.max_rel(), 1e-8);
}

// One entry wrong by 1e-4 of the gradient scale, everything else exact.
TEST(Checker, ResolvesASingleWrongEntry) {
  const std::uint64_t seed = ad::seed_from_env();
  const ops::Linear::Config c{3, 5, 4, true};
  ad::Rng rng(seed);
  const auto x = ops::Linear::sample(c, rng);
  const auto d = ad::random_cotangent<ops::Linear>(ops::Linear::forward(c, x), rng);
  for (std::size_t entry : {std::size_t{0}, std::size_t{7}, std::size_t{19}}) {
    ad::Backward<ops::Linear> nudged = [entry](const auto& cc, const auto& in, const auto& out,
                                               const auto& dd) {
      auto g = ops::Linear::backward(cc, in, out, dd);
      double scale = 0.0;
      for (double v : g.w.data) scale = std::max(scale, std::fabs(v));
      g.w[entry] += 1e-4 * scale;
      return g;
    };
    const auto rep = ad::check_vjp<ops::Linear>(c, x, d, nudged);
    std::printf("dw[%zu] off by 1e-4 of scale: max rel %.3g -> %s\n", entry, rep.max_rel(),
                rep.pass() ? "accepted" : "REJECTED");
    EXPECT_FALSE(rep.pass());
    EXPECT_NEAR(rep.max_rel(), 1e-4, 1e-5);
  }
}

TEST(Checker, EnforcesTheBackwardContract) {
  ad::Rng rng(7);
  {  // a gradient of the wrong shape
    const ops::Linear::Config c{3, 5, 4, true};
    const auto x = ops::Linear::sample(c, rng);
    const auto d = ad::random_cotangent<ops::Linear>(ops::Linear::forward(c, x), rng);
    ad::Backward<ops::Linear> bad = [](const auto& cc, const auto& in, const auto& out,
                                       const auto& dd) {
      auto g = ops::Linear::backward(cc, in, out, dd);
      g.b = Tensor<double>({cc.out + 1});
      return g;
    };
    const auto rep = ad::check_vjp<ops::Linear>(c, x, d, bad);
    ASSERT_EQ(rep.contract.size(), 1u);
    std::printf("%s\n", rep.contract[0].c_str());
    EXPECT_FALSE(rep.pass());
    EXPECT_TRUE(ad::check_vjp<ops::Linear>(c, x, d, ad::true_backward<ops::Linear>()).pass());
  }
  {  // a "gradient" for integer token ids
    const ops::Embedding::Config c{5, 4, 3};
    const auto x = ops::Embedding::sample(c, rng);
    const auto d = ad::random_cotangent<ops::Embedding>(ops::Embedding::forward(c, x), rng);
    ad::Backward<ops::Embedding> bad = [](const auto& cc, const auto& in, const auto& out,
                                          const auto& dd) {
      auto g = ops::Embedding::backward(cc, in, out, dd);
      g.ids = in.ids;
      return g;
    };
    const auto rep = ad::check_vjp<ops::Embedding>(c, x, d, bad);
    ASSERT_EQ(rep.contract.size(), 1u);
    std::printf("%s\n", rep.contract[0].c_str());
    EXPECT_FALSE(rep.pass());
  }
  {  // a missing gradient
    const ops::LayerNorm::Config c{2, 4, 1e-5};
    const auto x = ops::LayerNorm::sample(c, rng);
    const auto d = ad::random_cotangent<ops::LayerNorm>(ops::LayerNorm::forward(c, x), rng);
    ad::Backward<ops::LayerNorm> bad = [](const auto& cc, const auto& in, const auto& out,
                                          const auto& dd) {
      auto g = ops::LayerNorm::backward(cc, in, out, dd);
      g.beta = {};
      return g;
    };
    const auto rep = ad::check_vjp<ops::LayerNorm>(c, x, d, bad);
    ASSERT_EQ(rep.contract.size(), 1u);
    std::printf("%s\n", rep.contract[0].c_str());
    EXPECT_FALSE(rep.pass());
  }
}

// The same seed draws the same data and measures the same errors; another
// seed draws other data.
TEST(Checker, ReproducibleFromTheSeed) {
  ad::RunOptions a, b;
  a.seed = b.seed = 12345;
  const auto ra = ad::run_checks<ops::SwiGlu>(a), rb = ad::run_checks<ops::SwiGlu>(b);
  ASSERT_EQ(ra.size(), rb.size());
  for (std::size_t i = 0; i < ra.size(); ++i) {
    EXPECT_EQ(ra[i].check, rb[i].check);
    EXPECT_EQ(ra[i].max_abs, rb[i].max_abs) << ra[i].check;
  }
  b.seed = 54321;
  const auto rc = ad::run_checks<ops::SwiGlu>(b);
  bool any_differs = false;
  for (std::size_t i = 0; i < ra.size(); ++i) any_differs |= ra[i].max_abs != rc[i].max_abs;
  EXPECT_TRUE(any_differs);
}

}  // namespace
