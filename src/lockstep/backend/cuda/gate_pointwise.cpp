// Gate cases of the pointwise kernel family (gate.hpp): every kernel of
// ops_pointwise.cpp, forward and backward, on ragged shapes — rows 1, 3, 37,
// 130 (and 600: more than one 256-row tile of the column chains); dims 1, 5,
// 33, 97, 256 and 5000 (two 4096-chunks of the canonical lane tree); vocab 1,
// 3, 300, 5003 and 50257 (13 chunks); ids repeated over 300 times; ignored targets; batch > 1; both RoPE
// layouts; repeated token ids; in-place calls where the engine makes them.
// Inputs are seeded normals with -0, +0 and large values sprinkled in (and,
// for cross-entropy, rows of huge logits). Every output and every saved value
// (mean, rstd, lse, the kept tanh/sigmoid) is compared by bit pattern with
// cpu::OpKernels. Backward cases take their saved values from the CPU's
// forward, so a backward is judged on its own.
#include <algorithm>
#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "lockstep/ad/rng.hpp"
#include "lockstep/backend/cpu/ops.hpp"
#include "lockstep/backend/cuda/gate.hpp"
#include "lockstep/backend/cuda/ops.hpp"

namespace lockstep::cuda::gate {
namespace {

using Vec = std::vector<float>;
using Ids = std::vector<ops::Index>;

// Seeded inputs: normals times `scale`, about 1 in 16 replaced by -0, +0 or
// a large value of either sign (when `large` > 0).
Vec inputs(ad::Rng& rng, std::size_t n, double scale = 1.0, float large = 0.0f) {
  Vec v(n);
  for (float& x : v) {
    x = static_cast<float>(scale * rng.normal());
    switch (rng.below(48)) {
      case 0: x = -0.0f; break;
      case 1: x = 0.0f; break;
      case 2:
        if (large > 0) x = large * static_cast<float>(rng.uniform(0.5, 1.0));
        break;
      case 3:
        if (large > 0) x = -large * static_cast<float>(rng.uniform(0.5, 1.0));
        break;
      default: break;
    }
  }
  return v;
}

template <class T>
DeviceBuffer<T> up(const std::vector<T>& h) {
  DeviceBuffer<T> d;
  d.upload(h);
  return d;
}

DeviceBuffer<float> out(std::size_t n) { return DeviceBuffer<float>(n); }

// The first difference among (name, cpu, device) triples; "" when all agree.
struct Check {
  std::string first;
  std::size_t row_len = 0;
  Check& operator()(std::string_view name, const Vec& cpu, const DeviceBuffer<float>& gpu, std::size_t row = 0) {
    if (first.empty()) first = first_difference(name, cpu, gpu.download(), row);
    return *this;
  }
  operator std::string() const { return first; }
};

std::vector<Case> g_cases;
void add(std::string kernel, std::string shape, std::function<std::string(std::uint64_t)> run) {
  g_cases.push_back({std::move(kernel), std::move(shape), std::move(run)});
}

// --- embeddings ---------------------------------------------------------------

Ids token_ids(ad::Rng& rng, std::size_t n, std::size_t vocab) {
  Ids ids(n);
  // Few distinct ids so rows repeat (long chains), the last id included.
  const std::size_t distinct = std::max<std::size_t>(1, std::min(vocab, n / 3 + 1));
  for (auto& id : ids)
    id = static_cast<ops::Index>(rng.below(2) ? rng.below(vocab) : vocab - 1 - rng.below(distinct) % vocab);
  return ids;
}

void embedding_cases() {
  for (auto [N, V, D] : std::initializer_list<std::array<std::size_t, 3>>{
           {1, 1, 1}, {3, 3, 5}, {37, 300, 33}, {130, 5003, 97}, {600, 7, 256}, {130, 300, 5000},
           {1029, 3, 33}}) {
    const ops::Embedding::Config c{N, V, D};
    const std::string shape = fmt::format("tokens {} vocab {} dim {}", N, V, D);
    add("embedding_fwd", shape, [c](std::uint64_t seed) -> std::string {
      ad::Rng rng(seed);
      const Ids ids = token_ids(rng, c.tokens, c.vocab);
      const Vec wte = inputs(rng, c.vocab * c.dim, 1.0, 1e30f);
      Vec y(c.tokens * c.dim);
      cpu::OpKernels().embedding_fwd(c, ids.data(), wte.data(), y.data());
      auto d_ids = up(ids);
      auto d_wte = up(wte);
      auto d_y = out(y.size());
      OpKernels().embedding_fwd(c, d_ids.data(), d_wte.data(), d_y.data());
      return Check()("y", y, d_y, c.dim);
    });
    add("embedding_bwd", shape, [c](std::uint64_t seed) -> std::string {
      ad::Rng rng(seed);
      const Ids ids = token_ids(rng, c.tokens, c.vocab);
      const Vec dy = inputs(rng, c.tokens * c.dim, 1.0, 1e4f);
      Vec dwte(c.vocab * c.dim);
      cpu::OpKernels().embedding_bwd(c, ids.data(), dy.data(), dwte.data());
      auto d_ids = up(ids);
      auto d_dy = up(dy);
      auto d_dwte = out(dwte.size());
      OpKernels().embedding_bwd(c, d_ids.data(), d_dy.data(), d_dwte.data());
      return Check()("dwte", dwte, d_dwte, c.dim);
    });
  }
  for (auto [B, T, D, M, off] : std::initializer_list<std::array<std::size_t, 5>>{
           {1, 1, 1, 1, 0}, {1, 5, 33, 8, 2}, {3, 37, 97, 40, 3}, {2, 130, 256, 130, 0}, {4, 3, 5000, 9, 6}}) {
    const ops::LearnedPositions::Config c{B, T, D, M, off};
    const std::string shape = fmt::format("batch {} seq {} dim {} max_seq {} offset {}", B, T, D, M, off);
    add("positions_fwd", shape, [c](std::uint64_t seed) -> std::string {
      ad::Rng rng(seed);
      const Vec x = inputs(rng, c.batch * c.seq * c.dim, 1.0, 1e30f), wpe = inputs(rng, c.max_seq * c.dim, 1.0, 1e30f);
      Vec y(x.size());
      cpu::OpKernels().positions_fwd(c, x.data(), wpe.data(), y.data());
      auto d_x = up(x);
      auto d_wpe = up(wpe);
      auto d_y = out(y.size());
      OpKernels().positions_fwd(c, d_x.data(), d_wpe.data(), d_y.data());
      return Check()("y", y, d_y, c.dim);
    });
    for (bool in_place : {false, true}) {
      add("positions_bwd", shape + (in_place ? " dx=dy" : ""), [c, in_place](std::uint64_t seed) -> std::string {
        ad::Rng rng(seed);
        const Vec dy = inputs(rng, c.batch * c.seq * c.dim, 1.0, 1e4f);
        Vec dx(dy.size()), dwpe(c.max_seq * c.dim);
        cpu::OpKernels().positions_bwd(c, dy.data(), dx.data(), dwpe.data());
        auto d_dy = up(dy);
        auto d_dx = out(dx.size());
        auto d_dwpe = out(dwpe.size());
        float* gdx = in_place ? d_dy.data() : d_dx.data();
        OpKernels().positions_bwd(c, d_dy.data(), gdx, d_dwpe.data());
        return Check()("dx", dx, in_place ? d_dy : d_dx, c.dim)("dwpe", dwpe, d_dwpe, c.dim);
      });
    }
  }
}

// --- norms ------------------------------------------------------------------------

// Rows of very different scales: ordinary, large (1e15), tiny (1e-20), and a
// constant row (variance 0: rstd = 1/sqrt(eps)).
Vec norm_inputs(ad::Rng& rng, std::size_t N, std::size_t D) {
  Vec x = inputs(rng, N * D, 1.0);
  for (std::size_t n = 0; n < N; ++n) {
    const std::size_t kind = n % 7;
    for (std::size_t j = 0; j < D; ++j) {
      float& v = x[n * D + j];
      if (kind == 2) v = v * 1e15f;
      if (kind == 4) v = v * 1e-20f;
      if (kind == 5) v = 3.25f;
      if (kind == 6) v = v + 100.0f;  // a large mean
    }
  }
  return x;
}

void norm_cases() {
  std::vector<std::pair<std::size_t, std::size_t>> shapes;
  for (std::size_t N : {1, 3, 37, 130})
    for (std::size_t D : {1, 5, 33, 97, 256}) shapes.push_back({N, D});
  shapes.push_back({3, 5000});
  shapes.push_back({37, 5000});
  shapes.push_back({600, 97});
  shapes.push_back({1029, 33});
  for (auto [N, D] : shapes) {
    for (double eps : {1e-5, 0.5}) {
      if (eps == 0.5 && N != 37) continue;
      const ops::NormConfig c{N, D, eps};
      const std::string shape = fmt::format("rows {} dim {} eps {}", N, D, eps);
      add("layernorm_fwd", shape, [c](std::uint64_t seed) -> std::string {
        ad::Rng rng(seed);
        const Vec x = norm_inputs(rng, c.rows, c.dim), g = inputs(rng, c.dim), b = inputs(rng, c.dim);
        Vec y(x.size()), mean(c.rows), rstd(c.rows);
        cpu::OpKernels().layernorm_fwd(c, x.data(), g.data(), b.data(), y.data(), mean.data(), rstd.data());
        auto d_x = up(x);
        auto d_g = up(g);
        auto d_b = up(b);
        auto d_y = out(y.size());
        auto d_mean = out(c.rows);
        auto d_rstd = out(c.rows);
        OpKernels().layernorm_fwd(c, d_x.data(), d_g.data(), d_b.data(), d_y.data(), d_mean.data(), d_rstd.data());
        return Check()("mean", mean, d_mean)("rstd", rstd, d_rstd)("y", y, d_y, c.dim);
      });
      add("layernorm_bwd", shape, [c](std::uint64_t seed) -> std::string {
        ad::Rng rng(seed);
        const Vec x = norm_inputs(rng, c.rows, c.dim), g = inputs(rng, c.dim), b = inputs(rng, c.dim);
        const Vec dy = inputs(rng, c.rows * c.dim, 1.0, 1e3f);
        cpu::OpKernels k;
        Vec y(x.size()), mean(c.rows), rstd(c.rows);
        k.layernorm_fwd(c, x.data(), g.data(), b.data(), y.data(), mean.data(), rstd.data());
        Vec dx(x.size()), dg(c.dim), db(c.dim);
        k.layernorm_bwd(c, x.data(), g.data(), mean.data(), rstd.data(), dy.data(), dx.data(), dg.data(), db.data());
        auto d_x = up(x);
        auto d_g = up(g);
        auto d_mean = up(mean);
        auto d_rstd = up(rstd);
        auto d_dy = up(dy);
        auto d_dx = out(dx.size());
        auto d_dg = out(c.dim);
        auto d_db = out(c.dim);
        OpKernels().layernorm_bwd(c, d_x.data(), d_g.data(), d_mean.data(), d_rstd.data(), d_dy.data(), d_dx.data(),
                                  d_dg.data(), d_db.data());
        return Check()("dx", dx, d_dx, c.dim)("dgamma", dg, d_dg)("dbeta", db, d_db);
      });
      add("rmsnorm_fwd", shape, [c](std::uint64_t seed) -> std::string {
        ad::Rng rng(seed);
        const Vec x = norm_inputs(rng, c.rows, c.dim), w = inputs(rng, c.dim);
        Vec y(x.size()), rstd(c.rows);
        cpu::OpKernels().rmsnorm_fwd(c, x.data(), w.data(), y.data(), rstd.data());
        auto d_x = up(x);
        auto d_w = up(w);
        auto d_y = out(y.size());
        auto d_rstd = out(c.rows);
        OpKernels().rmsnorm_fwd(c, d_x.data(), d_w.data(), d_y.data(), d_rstd.data());
        return Check()("rstd", rstd, d_rstd)("y", y, d_y, c.dim);
      });
      add("rmsnorm_bwd", shape, [c](std::uint64_t seed) -> std::string {
        ad::Rng rng(seed);
        const Vec x = norm_inputs(rng, c.rows, c.dim), w = inputs(rng, c.dim);
        const Vec dy = inputs(rng, c.rows * c.dim, 1.0, 1e3f);
        cpu::OpKernels k;
        Vec y(x.size()), rstd(c.rows);
        k.rmsnorm_fwd(c, x.data(), w.data(), y.data(), rstd.data());
        Vec dx(x.size()), dw(c.dim);
        k.rmsnorm_bwd(c, x.data(), w.data(), rstd.data(), dy.data(), dx.data(), dw.data());
        auto d_x = up(x);
        auto d_w = up(w);
        auto d_rstd = up(rstd);
        auto d_dy = up(dy);
        auto d_dx = out(dx.size());
        auto d_dw = out(c.dim);
        OpKernels().rmsnorm_bwd(c, d_x.data(), d_w.data(), d_rstd.data(), d_dy.data(), d_dx.data(), d_dw.data());
        return Check()("dx", dx, d_dx, c.dim)("dw", dw, d_dw);
      });
    }
  }
}

// --- activations, residual, add_into -------------------------------------------------

void elementwise_cases() {
  for (std::size_t n : {1, 5, 33, 97, 256, 5000, 130 * 97}) {
    const ops::ElementwiseConfig c{n};
    const std::string shape = fmt::format("n {}", n);
    // Forward inputs reach far into tanh/sigmoid saturation and overflow;
    // backward inputs stay where no inf·0 makes a NaN (whose payload differs
    // between CPU and GPU by design, not by a kernel bug).
    add("gelu_fwd", shape, [c](std::uint64_t seed) -> std::string {
      ad::Rng rng(seed);
      const Vec x = inputs(rng, c.n, 3.0, 1e30f);
      Vec y(c.n);
      cpu::Aux aux;
      cpu::OpKernels().gelu_fwd(c, x.data(), y.data(), aux);
      auto d_x = up(x);
      auto d_y = out(c.n);
      Aux gaux;
      OpKernels().gelu_fwd(c, d_x.data(), d_y.data(), gaux);
      return Check()("y", y, d_y)("aux tanh", aux.a, gaux.a);
    });
    for (bool kept : {true, false}) {
      add("gelu_bwd", shape + (kept ? " tanh kept" : " tanh recomputed"), [c, kept](std::uint64_t seed) -> std::string {
        ad::Rng rng(seed);
        const Vec x = inputs(rng, c.n, 3.0, 30.0f), dy = inputs(rng, c.n, 1.0, 1e3f);
        cpu::OpKernels k;
        cpu::Aux aux;
        Vec y(c.n), dx(c.n);
        k.gelu_fwd(c, x.data(), y.data(), aux);
        if (!kept) aux.a.clear();
        k.gelu_bwd(c, x.data(), dy.data(), dx.data(), aux);
        auto d_x = up(x);
        auto d_dy = up(dy);
        auto d_dx = out(c.n);
        Aux gaux;
        if (kept) gaux.a.upload(aux.a);
        OpKernels().gelu_bwd(c, d_x.data(), d_dy.data(), d_dx.data(), gaux);
        return Check()("dx", dx, d_dx);
      });
    }
    add("swiglu_fwd", shape, [c](std::uint64_t seed) -> std::string {
      ad::Rng rng(seed);
      const Vec g = inputs(rng, c.n, 4.0, 200.0f), u = inputs(rng, c.n, 1.0, 1e30f);
      Vec y(c.n);
      cpu::Aux aux;
      cpu::OpKernels().swiglu_fwd(c, g.data(), u.data(), y.data(), aux);
      auto d_g = up(g);
      auto d_u = up(u);
      auto d_y = out(c.n);
      Aux gaux;
      OpKernels().swiglu_fwd(c, d_g.data(), d_u.data(), d_y.data(), gaux);
      return Check()("y", y, d_y)("aux sigmoid", aux.a, gaux.a);
    });
    for (bool kept : {true, false}) {
      add("swiglu_bwd", shape + (kept ? " sigmoid kept" : " sigmoid recomputed"),
          [c, kept](std::uint64_t seed) -> std::string {
            ad::Rng rng(seed);
            const Vec g = inputs(rng, c.n, 4.0, 200.0f), u = inputs(rng, c.n, 1.0, 1e4f),
                      dy = inputs(rng, c.n, 1.0, 1e3f);
            cpu::OpKernels k;
            cpu::Aux aux;
            Vec y(c.n), dg(c.n), du(c.n);
            k.swiglu_fwd(c, g.data(), u.data(), y.data(), aux);
            if (!kept) aux.a.clear();
            k.swiglu_bwd(c, g.data(), u.data(), dy.data(), dg.data(), du.data(), aux);
            auto d_g = up(g);
            auto d_u = up(u);
            auto d_dy = up(dy);
            auto d_dg = out(c.n);
            auto d_du = out(c.n);
            Aux gaux;
            if (kept) gaux.a.upload(aux.a);
            OpKernels().swiglu_bwd(c, d_g.data(), d_u.data(), d_dy.data(), d_dg.data(), d_du.data(), gaux);
            return Check()("dgate", dg, d_dg)("dup", du, d_du);
          });
    }
    add("relu2mul_fwd", shape, [c](std::uint64_t seed) -> std::string {
      ad::Rng rng(seed);
      // r² may overflow to inf, but never meets a zero `up` as inf·0 (a NaN).
      const Vec g = inputs(rng, c.n, 2.0, 1e15f), u = inputs(rng, c.n, 1.0, 1e10f);
      Vec y(c.n);
      cpu::Aux aux;
      cpu::OpKernels().relu2mul_fwd(c, g.data(), u.data(), y.data(), aux);
      auto d_g = up(g);
      auto d_u = up(u);
      auto d_y = out(c.n);
      Aux gaux;
      OpKernels().relu2mul_fwd(c, d_g.data(), d_u.data(), d_y.data(), gaux);
      return Check()("y", y, d_y);
    });
    add("relu2mul_bwd", shape, [c](std::uint64_t seed) -> std::string {
      ad::Rng rng(seed);
      const Vec g = inputs(rng, c.n, 2.0, 1e6f), u = inputs(rng, c.n, 1.0, 1e6f), dy = inputs(rng, c.n, 1.0, 1e3f);
      cpu::Aux aux;
      Vec dg(c.n), du(c.n);
      cpu::OpKernels().relu2mul_bwd(c, g.data(), u.data(), dy.data(), dg.data(), du.data(), aux);
      auto d_g = up(g);
      auto d_u = up(u);
      auto d_dy = up(dy);
      auto d_dg = out(c.n);
      auto d_du = out(c.n);
      Aux gaux;
      OpKernels().relu2mul_bwd(c, d_g.data(), d_u.data(), d_dy.data(), d_dg.data(), d_du.data(), gaux);
      return Check()("dgate", dg, d_dg)("dup", du, d_du);
    });
    add("residual_fwd", shape, [c](std::uint64_t seed) -> std::string {
      ad::Rng rng(seed);
      Vec a = inputs(rng, c.n, 1.0, 3e38f), b = inputs(rng, c.n, 1.0, 3e38f);
      // -0 + -0 = -0: the sums a kernel that loses the sign of zero gets wrong.
      for (std::size_t i = 0; i < c.n; i += 3) a[i] = b[i] = -0.0f;
      Vec y(c.n);
      cpu::OpKernels().residual_fwd(c, a.data(), b.data(), y.data());
      auto d_a = up(a);
      auto d_b = up(b);
      auto d_y = out(c.n);
      OpKernels().residual_fwd(c, d_a.data(), d_b.data(), d_y.data());
      return Check()("y", y, d_y);
    });
    add("residual_bwd", shape, [c](std::uint64_t seed) -> std::string {
      ad::Rng rng(seed);
      const Vec dy = inputs(rng, c.n, 1.0, 1e30f);
      Vec da(c.n), db(c.n);
      cpu::OpKernels().residual_bwd(c, dy.data(), da.data(), db.data());
      auto d_dy = up(dy);
      auto d_da = out(c.n);
      auto d_db = out(c.n);
      OpKernels().residual_bwd(c, d_dy.data(), d_da.data(), d_db.data());
      // In place for one of them (the engine routes da to dy).
      auto d_db2 = out(c.n);
      OpKernels().residual_bwd(c, d_dy.data(), d_dy.data(), d_db2.data());
      return Check()("da", da, d_da)("db", db, d_db)("db (da = dy)", db, d_db2)("dy (da = dy)", dy, d_dy);
    });
    add("add_into", shape, [c](std::uint64_t seed) -> std::string {
      ad::Rng rng(seed);
      Vec acc = inputs(rng, c.n, 1.0, 3e38f);
      Vec x = inputs(rng, c.n, 1.0, 3e38f);
      for (std::size_t i = 1; i < c.n; i += 5) acc[i] = x[i] = -0.0f;
      auto d_acc = up(acc);
      auto d_x = up(x);
      cpu::OpKernels().add_into(c.n, acc.data(), x.data());
      OpKernels().add_into(c.n, d_acc.data(), d_x.data());
      return Check()("acc", acc, d_acc);
    });
  }
}

// --- RoPE ------------------------------------------------------------------------------

void rope_cases() {
  struct S {
    std::size_t B, T, H, Dh;
    double base;
    std::size_t offset;
  };
  for (const S& s : {S{1, 1, 1, 2, 10000.0, 0}, S{1, 5, 3, 6, 10000.0, 0}, S{2, 37, 3, 64, 10000.0, 0},
                     S{3, 33, 2, 10, 500000.0, 1000}, S{1, 130, 1, 128, 10000.0, 7}})
    for (auto layout : {ops::RopeLayout::rotate_half, ops::RopeLayout::interleaved})
      for (bool in_place : {false, true}) {
        const ops::Rope::Config c{s.B, s.T, s.H, s.Dh, s.base, layout, s.offset};
        const std::string shape =
            fmt::format("batch {} seq {} heads {} head_dim {} base {} offset {} {}{}", s.B, s.T, s.H, s.Dh, s.base,
                        s.offset, layout == ops::RopeLayout::interleaved ? "interleaved" : "rotate_half",
                        in_place ? " in place" : "");
        for (bool fwd : {true, false})
          add(fwd ? "rope_fwd" : "rope_bwd", shape, [c, fwd, in_place](std::uint64_t seed) -> std::string {
            ad::Rng rng(seed);
            const std::size_t n = c.batch * c.seq * c.heads * c.head_dim;
            const Vec x = inputs(rng, n, 1.0, 1e30f);
            Vec y(n);
            cpu::OpKernels k;
            if (fwd) k.rope_fwd(c, x.data(), y.data());
            else k.rope_bwd(c, x.data(), y.data());
            auto d_x = up(x);
            auto d_y = out(n);
            OpKernels g;
            float* dst = in_place ? d_x.data() : d_y.data();
            // Twice: the second call reuses the cached table.
            for (int rep = 0; rep < (in_place ? 1 : 2); ++rep) {
              if (fwd) g.rope_fwd(c, d_x.data(), dst);
              else g.rope_bwd(c, d_x.data(), dst);
            }
            return Check()("y", y, in_place ? d_x : d_y, c.head_dim);
          });
      }
}

// --- cross-entropy ------------------------------------------------------------------------

Vec logits_for(ad::Rng& rng, std::size_t N, std::size_t V) {
  Vec z = inputs(rng, N * V, 3.0);
  for (std::size_t n = 0; n < N; ++n) {
    const std::size_t kind = n % 5;
    for (std::size_t j = 0; j < V; ++j) {
      float& v = z[n * V + j];
      if (kind == 1) v = v * 1e30f;     // huge logits: exp(z - m) underflows to 0 but at the max
      if (kind == 3) v = v * 30.0f;     // a spread over most of exp's range
      if (kind == 4) v = v - 80.0f;     // all far below 0
    }
  }
  return z;
}

Ids targets_for(ad::Rng& rng, std::size_t N, std::size_t V) {
  Ids t(N);
  for (std::size_t n = 0; n < N; ++n) {
    const std::size_t r = rng.below(8);
    t[n] = r == 0 ? -1 : r == 1 ? static_cast<ops::Index>(V - 1) : r == 2 ? 0 : static_cast<ops::Index>(rng.below(V));
  }
  if (N > 2) t[1] = -100;  // the conventional ignore index
  return t;
}

void ce_cases() {
  std::vector<std::pair<std::size_t, std::size_t>> shapes;
  for (std::size_t N : {1, 3, 37, 130})
    for (std::size_t V : {1, 3, 300, 5003}) shapes.push_back({N, V});
  shapes.push_back({5, 50257});
  shapes.push_back({1, 8193});
  for (auto [N, V] : shapes) {
    const ops::CrossEntropy::Config c{N, V};
    const std::string shape = fmt::format("rows {} vocab {}", N, V);
    add("ce_fwd", shape, [c](std::uint64_t seed) -> std::string {
      ad::Rng rng(seed);
      const Vec z = logits_for(rng, c.rows, c.vocab);
      const Ids t = targets_for(rng, c.rows, c.vocab);
      Vec loss(c.rows), lse(c.rows);
      cpu::OpKernels().ce_fwd(c, z.data(), t.data(), loss.data(), lse.data());
      auto d_z = up(z);
      auto d_t = up(t);
      auto d_loss = out(c.rows);
      auto d_lse = out(c.rows);
      OpKernels().ce_fwd(c, d_z.data(), d_t.data(), d_loss.data(), d_lse.data());
      return Check()("lse", lse, d_lse)("loss", loss, d_loss);
    });
    for (bool in_place : {false, true})
      add("ce_bwd", shape + (in_place ? " dlogits=logits" : ""), [c, in_place](std::uint64_t seed) -> std::string {
        ad::Rng rng(seed);
        const Vec z = logits_for(rng, c.rows, c.vocab);
        const Ids t = targets_for(rng, c.rows, c.vocab);
        const Vec dloss = inputs(rng, c.rows, 1.0);
        cpu::OpKernels k;
        Vec loss(c.rows), lse(c.rows), dz(z.size());
        k.ce_fwd(c, z.data(), t.data(), loss.data(), lse.data());
        k.ce_bwd(c, z.data(), t.data(), lse.data(), dloss.data(), dz.data());
        auto d_z = up(z);
        auto d_t = up(t);
        auto d_lse = up(lse);
        auto d_dloss = up(dloss);
        auto d_dz = out(dz.size());
        OpKernels().ce_bwd(c, d_z.data(), d_t.data(), d_lse.data(), d_dloss.data(),
                           in_place ? d_z.data() : d_dz.data());
        return Check()("dlogits", dz, in_place ? d_z : d_dz, c.vocab);
      });
  }
}

}  // namespace

std::vector<Case> pointwise_cases() {
  g_cases.clear();
  embedding_cases();
  norm_cases();
  elementwise_cases();
  rope_cases();
  ce_cases();
  std::vector<Case> all = std::move(g_cases);
  g_cases.clear();
  return all;
}

}  // namespace lockstep::cuda::gate
