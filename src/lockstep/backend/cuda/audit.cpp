// Live audits (audit.hpp): the cell choice, the copies back, the CPU
// recomputation with the spec's expressions, and the report.
#include "lockstep/backend/cuda/audit.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "lockstep/backend/cuda/device.hpp"
#include "lockstep/backend/cuda/gather_launch.hpp"
#include "lockstep/num/rng.hpp"
#include "lockstep/ops/quant.hpp"
#include "lockstep/ops/scalar.hpp"
#include "lockstep/ops/units.hpp"
#include "lockstep/util/parallel.hpp"

namespace lockstep::cuda::audit {
namespace {

Options g_opt;
Stats g_stats;
std::mutex g_mutex;

// What the budget is kept per: each kind gets budget × elapsed of its own, so
// an expensive kind (the attention backward's CPU rows) cannot starve the
// cheap ones of their audits.
enum class Kind : std::size_t { product, attention_fwd, attention_bwd, quantized, count };
struct KindSpend {
  double seconds = 0;
  std::size_t launches = 0;
};
std::array<KindSpend, static_cast<std::size_t>(Kind::count)> g_spend{};
std::chrono::steady_clock::time_point g_configured = std::chrono::steady_clock::now();

// Whether this launch of `kind` is audited (false: counted as skipped).
bool admit(Kind kind) {
  std::lock_guard<std::mutex> lock(g_mutex);
  const KindSpend& k = g_spend[static_cast<std::size_t>(kind)];
  if (g_opt.budget >= 1.0 || k.launches < kMinLaunchesPerKind) return true;
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - g_configured).count();
  if (k.seconds <= g_opt.budget * elapsed) return true;
  ++g_stats.skipped;
  return false;
}

std::uint32_t bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// The fixed cells of an I×J output, then `interior` random ones.
std::vector<std::pair<std::size_t, std::size_t>> cells(std::size_t I, std::size_t J, std::size_t interior,
                                                       std::uint64_t launch) {
  std::vector<std::pair<std::size_t, std::size_t>> c = {
      {0, 0}, {0, J - 1}, {I - 1, 0}, {I - 1, J - 1}, {I - 1, J / 2}, {I / 2, J - 1}};
  for (std::size_t r = 0; r < interior; ++r) {
    const std::uint32_t a = num::rng::bits32(g_opt.seed, launch, 2 * r);
    const std::uint32_t b = num::rng::bits32(g_opt.seed, launch, 2 * r + 1);
    c.emplace_back(static_cast<std::size_t>(a % I), static_cast<std::size_t>(b % J));
  }
  return c;
}

void mismatch(const std::string& report) {
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    ++g_stats.mismatches;
    if (g_stats.first_report.empty()) g_stats.first_report = report;
  }
  if (g_opt.on_mismatch == OnMismatch::stop) throw std::runtime_error("audit: " + report);
  std::fprintf(stderr, "lockstep: audit warning: %s\n", report.c_str());
}

struct Timer {
  explicit Timer(Kind k) : kind(k) {}
  Kind kind;
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  std::size_t cells = 0;
  ~Timer() {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::lock_guard<std::mutex> lock(g_mutex);
    ++g_stats.launches;
    g_stats.cells += cells;
    g_stats.seconds += s;
    KindSpend& k = g_spend[static_cast<std::size_t>(kind)];
    ++k.launches;
    k.seconds += s;
  }
};

std::uint64_t next_launch() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_stats.launches;
}

}  // namespace

void configure(const Options& opt) {
  if (!(opt.budget > 0.0 && opt.budget <= 1.0))
    throw std::invalid_argument(fmt::format("audit budget must be in (0, 1], got {}", opt.budget));
  std::lock_guard<std::mutex> lock(g_mutex);
  g_opt = opt;
  g_spend = {};
  g_configured = std::chrono::steady_clock::now();
}
const Options& options() { return g_opt; }
Stats stats() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_stats;
}
void reset_stats() {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_stats = {};
  g_spend = {};
  g_configured = std::chrono::steady_clock::now();
}

namespace {

// The operands of all audited cells of a launch, packed by one gather kernel
// and copied back in one transfer (the launch's one host synchronization).
class Staging {
 public:
  std::size_t add(const float* src, std::size_t rows, std::size_t row_elems, std::size_t row_stride,
                  std::size_t elem_stride = 1) {
    if (list_.n == launch::kMaxGatherSegments) flush();
    const std::size_t at = total_;
    list_.seg[list_.n++] = {src, rows, row_elems, row_stride, elem_stride, at - base_};
    total_ += rows * row_elems;
    return at;
  }
  // Everything added so far, on the host, indexed by add()'s return values.
  const std::vector<float>& fetch() {
    flush();
    return host_;
  }

 private:
  void flush() {
    if (list_.n == 0) return;
    const std::size_t n = total_ - base_;
    if (g_opt.host_pointers) {  // tests without a GPU: the same segments, read on the CPU
      host_.resize(total_);
      for (int s = 0; s < list_.n; ++s) {
        const launch::GatherSegment& g = list_.seg[s];
        for (std::size_t r = 0; r < g.rows; ++r)
          for (std::size_t e = 0; e < g.row_elems; ++e)
            host_[base_ + g.dst_offset + r * g.row_elems + e] = g.src[r * g.row_stride + e * g.elem_stride];
      }
      base_ = total_;
      list_.n = 0;
      return;
    }
    DeviceBuffer<float>& dev = device_staging();
    dev.resize(n);
    launch::gather(list_, dev.data());
    host_.resize(total_);
    copy_to_host(host_.data() + base_, dev.data(), n * sizeof(float));
    base_ = total_;
    list_.n = 0;
  }
  launch::GatherList list_;
  std::size_t total_ = 0, base_ = 0;
  std::vector<float> host_;
  // Grows once, reused by every audit; never destroyed (no device call at exit).
  static DeviceBuffer<float>& device_staging() {
    static auto* b = new DeviceBuffer<float>();
    return *b;
  }
};

}  // namespace

void matmul(std::string_view kernel, std::size_t I, std::size_t J, std::size_t K, const float* A, std::size_t sai,
            std::size_t sak, const float* B, std::size_t sbk, std::size_t sbj, const float* bias, const float* C,
            std::size_t ldc) {
  if (!g_opt.enabled || I == 0 || J == 0 || !admit(Kind::product)) return;
  Timer timer(Kind::product);
  struct At {
    std::size_t i, j, a, b, bias, c;
  };
  Staging st;
  std::vector<At> at;
  for (const auto& [i, j] : cells(I, J, g_opt.interior, next_launch())) {
    At x{i, j, 0, 0, 0, 0};
    x.a = st.add(A + i * sai, K, 1, sak);
    x.b = st.add(B + j * sbj, K, 1, sbk);
    if (bias != nullptr) x.bias = st.add(bias + j, 1, 1, 1);
    x.c = st.add(C + i * ldc + j, 1, 1, 1);
    at.push_back(x);
  }
  const std::vector<float>& h = st.fetch();
  for (const At& x : at) {
    float want = ops::Math<float>::dot_seq(h.data() + x.a, 1, h.data() + x.b, 1, K);
    if (bias != nullptr) want = want + h[x.bias];
    const float got = h[x.c];
    ++timer.cells;
    if (bits(want) != bits(got))
      mismatch(fmt::format("{} [{} x {}, k {}]: cell ({}, {}): cpu 0x{:08x} ({}) vs cuda 0x{:08x} ({})", kernel, I, J,
                           K, x.i, x.j, bits(want), want, bits(got), got));
  }
}

void attention_fwd(const ops::Attention::Config& c, const float* q, std::size_t ldq, const float* k, const float* v,
                   std::size_t ldkv, const float* o, const float* lse) {
  if (!g_opt.enabled || c.batch == 0 || c.seq == 0 || c.q_heads == 0 || !admit(Kind::attention_fwd)) return;
  Timer timer(Kind::attention_fwd);
  const std::size_t T = c.seq, Dh = c.head_dim, Hq = c.q_heads, rep = c.q_heads / c.kv_heads;
  // Rows (b, h, i): the last query of the last and first (batch, head), the
  // first query, a middle one, then random ones.
  std::vector<std::array<std::size_t, 3>> rows = {
      {c.batch - 1, Hq - 1, T - 1}, {0, 0, T - 1}, {0, 0, 0}, {c.batch - 1, 0, T / 2}};
  const std::uint64_t launch = next_launch();
  for (std::size_t r = 0; r < g_opt.interior; ++r) {
    const std::uint32_t u = num::rng::bits32(g_opt.seed, launch, r);
    rows.push_back({(u >> 20) % c.batch, (u >> 10) % Hq, u % T});
  }
  struct At {
    std::size_t q, k, v, o, lse;
  };
  Staging st;
  std::vector<At> at;
  for (const auto& [b, h, i] : rows) {
    const std::size_t g = h / rep;
    At x{};
    x.q = st.add(q + (b * T + i) * ldq + h * Dh, 1, Dh, ldq);
    x.k = st.add(k + b * T * ldkv + g * Dh, i + 1, Dh, ldkv);
    x.v = st.add(v + b * T * ldkv + g * Dh, i + 1, Dh, ldkv);
    x.o = st.add(o + ((b * T + i) * Hq + h) * Dh, 1, Dh, Dh);
    x.lse = st.add(lse + (b * Hq + h) * T + i, 1, 1, 1);
    at.push_back(x);
  }
  const std::vector<float>& hs = st.fetch();
  for (std::size_t r = 0; r < rows.size(); ++r) {
    const auto& [b, h, i] = rows[r];
    const At& x = at[r];
    // The row's problem alone: one head pair, keys 0..i.
    ops::Attention::Config one = c;
    one.batch = 1;
    one.seq = i + 1;
    one.q_heads = one.kv_heads = 1;
    ops::Attention::Inputs<float> in{Tensor<float>({1, i + 1, 1, Dh}), Tensor<float>({1, i + 1, 1, Dh}),
                                     Tensor<float>({1, i + 1, 1, Dh})};
    std::copy(hs.begin() + static_cast<std::ptrdiff_t>(x.q), hs.begin() + static_cast<std::ptrdiff_t>(x.q + Dh),
              in.q.ptr() + i * Dh);
    std::copy(hs.begin() + static_cast<std::ptrdiff_t>(x.k),
              hs.begin() + static_cast<std::ptrdiff_t>(x.k + (i + 1) * Dh), in.k.ptr());
    std::copy(hs.begin() + static_cast<std::ptrdiff_t>(x.v),
              hs.begin() + static_cast<std::ptrdiff_t>(x.v + (i + 1) * Dh), in.v.ptr());
    std::vector<float> want(Dh);
    float want_lse = 0;
    ops::Attention::forward_row(one, in, 0, 0, i, ops::Attention::scale_of<float>(c), want.data(), want_lse);
    timer.cells += Dh + 1;
    for (std::size_t d = 0; d <= Dh; ++d) {
      const float w = d < Dh ? want[d] : want_lse, gv = d < Dh ? hs[x.o + d] : hs[x.lse];
      if (bits(w) != bits(gv)) {
        mismatch(fmt::format("attention_fwd [B {} T {} Hq {} Hkv {} Dh {}]: {} of (b {}, h {}, i {}){}: cpu 0x{:08x} "
                             "({}) vs cuda 0x{:08x} ({})",
                             c.batch, T, Hq, c.kv_heads, Dh, d < Dh ? "o" : "lse", b, h, i,
                             d < Dh ? fmt::format(" d {}", d) : "", bits(w), w, bits(gv), gv));
        break;
      }
    }
  }
}

namespace {

// hs[at, at + n) as a tensor of the given shape, zero beyond n.
Tensor<float> staged(const std::vector<float>& hs, std::size_t at, std::size_t n, Shape shape,
                     std::size_t dst = 0) {
  Tensor<float> t(std::move(shape));
  std::copy(hs.begin() + static_cast<std::ptrdiff_t>(at), hs.begin() + static_cast<std::ptrdiff_t>(at + n),
            t.ptr() + dst);
  return t;
}

}  // namespace

void attention_bwd(const ops::Attention::Config& c, const float* q, std::size_t ldq, const float* k, const float* v,
                   std::size_t ldkv, const float* o, const float* lse, const float* dout, const float* dq,
                   const float* dk, const float* dv) {
  if (!g_opt.enabled || c.batch == 0 || c.seq == 0 || c.q_heads == 0 || c.head_dim == 0 ||
      !admit(Kind::attention_bwd))
    return;
  Timer timer(Kind::attention_bwd);
  using A = ops::Attention;
  const std::size_t B = c.batch, T = c.seq, Dh = c.head_dim, Hq = c.q_heads, Hkv = c.kv_heads, rep = Hq / Hkv;
  const std::size_t ldo = Hq * Dh;  // o, dout: [B, T, Hq, Dh]
  const float scale = A::scale_of<float>(c);
  // Query rows (b, h, i) and key rows (b, kv head g, j).
  struct Row {
    bool key;
    std::size_t b, h, i;
  };
  std::vector<Row> rows = {{false, B - 1, Hq - 1, T - 1}, {false, 0, 0, 0},           {false, B - 1, 0, T / 2},
                           {true, B - 1, Hkv - 1, 0},     {true, B - 1, Hkv - 1, T - 1}};
  const std::uint64_t launch = next_launch();
  for (std::size_t r = 0; r < g_opt.interior; ++r) {
    const std::uint32_t u = num::rng::bits32(g_opt.seed, launch, r);
    const bool key = r % 2 == 1;
    rows.push_back({key, (u >> 20) % B, (u >> 10) % (key ? Hkv : Hq), u % T});
  }
  struct At {
    std::size_t q, o, dout, lse, k, v, dq, dk, dv;
  };
  Staging st;
  std::vector<At> at;
  for (const Row& w : rows) {
    At x{};
    const std::size_t b = w.b, i = w.i;
    if (!w.key) {  // query row i of head h: its q, o, dO, lse and keys/values 0..i
      const std::size_t h = w.h, g = h / rep;
      x.q = st.add(q + (b * T + i) * ldq + h * Dh, 1, Dh, ldq);
      x.o = st.add(o + ((b * T + i) * Hq + h) * Dh, 1, Dh, ldo);
      x.dout = st.add(dout + ((b * T + i) * Hq + h) * Dh, 1, Dh, ldo);
      x.lse = st.add(lse + (b * Hq + h) * T + i, 1, 1, 1);
      x.k = st.add(k + b * T * ldkv + g * Dh, i + 1, Dh, ldkv);
      x.v = st.add(v + b * T * ldkv + g * Dh, i + 1, Dh, ldkv);
      x.dq = st.add(dq + (b * T + i) * ldq + h * Dh, 1, Dh, ldq);
    } else {  // key row j = i of kv head g: queries j..T-1 of the group's heads, k_j, v_j
      const std::size_t g = w.h, n = T - i, h0 = g * rep;
      x.q = st.add(q + (b * T + i) * ldq + h0 * Dh, n, rep * Dh, ldq);
      x.o = st.add(o + ((b * T + i) * Hq + h0) * Dh, n, rep * Dh, ldo);
      x.dout = st.add(dout + ((b * T + i) * Hq + h0) * Dh, n, rep * Dh, ldo);
      x.lse = st.add(lse + (b * Hq + h0) * T + i, rep, n, T);
      x.k = st.add(k + (b * T + i) * ldkv + g * Dh, 1, Dh, ldkv);
      x.v = st.add(v + (b * T + i) * ldkv + g * Dh, 1, Dh, ldkv);
      x.dk = st.add(dk + (b * T + i) * ldkv + g * Dh, 1, Dh, ldkv);
      x.dv = st.add(dv + (b * T + i) * ldkv + g * Dh, 1, Dh, ldkv);
    }
    at.push_back(x);
  }
  const std::vector<float>& hs = st.fetch();
  auto compare = [&](const char* tensor, const Row& w, const float* want, std::size_t got_at) {
    for (std::size_t d = 0; d < Dh; ++d) {
      const float wv = want[d], gv = hs[got_at + d];
      if (bits(wv) != bits(gv)) {
        mismatch(fmt::format("attention_bwd [B {} T {} Hq {} Hkv {} Dh {}]: {} of (b {}, {} {}, {} {}) d {}: cpu "
                             "0x{:08x} ({}) vs cuda 0x{:08x} ({})",
                             B, T, Hq, Hkv, Dh, tensor, w.b, w.key ? "kv head" : "h", w.h, w.key ? "j" : "i", w.i, d,
                             bits(wv), wv, bits(gv), gv));
        return;
      }
    }
  };
  // The rows are recomputed on CPU threads (each row alone, the spec's
  // sequential chains: the bits do not depend on the split), then compared in
  // row order.
  std::vector<std::vector<float>> wants(rows.size());
  util::parallel_for(rows.size(), util::resolve_threads(g_opt.threads), 1, [&](std::size_t lo, std::size_t hi) {
    for (std::size_t r = lo; r < hi; ++r) {
      const Row& w = rows[r];
      const At& x = at[r];
      const std::size_t i = w.i;
      A::Config one = c;  // the row's problem alone, one batch entry
      one.batch = 1;
      one.kv_heads = 1;
      std::vector<float>& want = wants[r];
      if (!w.key) {
        // One head pair, queries/keys 0..i; only query row i is filled.
        one.seq = i + 1;
        one.q_heads = 1;
        const Shape sh{1, i + 1, 1, Dh};
        const A::Inputs<float> in{staged(hs, x.q, Dh, sh, i * Dh), staged(hs, x.k, (i + 1) * Dh, sh),
                                  staged(hs, x.v, (i + 1) * Dh, sh)};
        const A::Outputs<float> out{staged(hs, x.o, Dh, sh, i * Dh), staged(hs, x.lse, 1, {1, 1, i + 1}, i)};
        const A::Outputs<float> dout_{staged(hs, x.dout, Dh, sh, i * Dh), Tensor<float>()};
        std::vector<float> P(i + 1), dS(i + 1);
        want.resize(Dh);
        A::backward_q_row(one, in, out, dout_, 0, 0, i, scale, P.data(), dS.data(), want.data());
      } else {
        // The group's rep heads, queries j..T-1 renumbered 0..n-1; key j is
        // key 0 (the only key/value row these functions read: k and v hold it alone).
        const std::size_t n = T - i;
        one.seq = n;
        one.q_heads = rep;
        const Shape sq{1, n, rep, Dh}, skv{1, 1, 1, Dh};
        const A::Inputs<float> in{staged(hs, x.q, n * rep * Dh, sq), staged(hs, x.k, Dh, skv),
                                  staged(hs, x.v, Dh, skv)};
        const A::Outputs<float> out{staged(hs, x.o, n * rep * Dh, sq), staged(hs, x.lse, rep * n, {1, rep, n})};
        const A::Outputs<float> dout_{staged(hs, x.dout, n * rep * Dh, sq), Tensor<float>()};
        std::vector<float> P(rep * n), dS(rep * n);
        for (std::size_t h = 0; h < rep; ++h)
          for (std::size_t t = 0; t < n; ++t) {
            const float Di = A::backward_D(one, out, dout_, 0, h, t);
            const auto pds =
                A::backward_pds(one, in, dout_, 0, h, t, 0, Di, out.lse[A::lse_at(one, 0, h, t)], scale);
            P[h * n + t] = pds.p;
            dS[h * n + t] = pds.ds;
          }
        want.resize(2 * Dh);  // dk | dv
        A::backward_kv_row(one, in, dout_, 0, 0, 0, scale, P.data(), dS.data(), n, 1, want.data(),
                           want.data() + Dh);
      }
    }
  });
  for (std::size_t r = 0; r < rows.size(); ++r) {
    const Row& w = rows[r];
    const At& x = at[r];
    timer.cells += wants[r].size();
    if (!w.key) {
      compare("dq", w, wants[r].data(), x.dq);
    } else {
      compare("dk", w, wants[r].data(), x.dk);
      compare("dv", w, wants[r].data() + Dh, x.dv);
    }
  }
}

namespace {

// A quantized linear's forward y [N, M] from rows x_n and w_m [K] (and b_m):
// the cells of matmul's choice, each gathered and recomputed by
// want(x_n, w_m, &b_m or null), compared by bit pattern.
template <class Want>
void quantized_rows_audit(const char* op, std::size_t N, std::size_t K, std::size_t M, const float* x, const float* w,
                          const float* b, const float* y, Want&& want) {
  if (!g_opt.enabled || N == 0 || M == 0 || !admit(Kind::quantized)) return;
  Timer timer(Kind::quantized);
  struct At {
    std::size_t n, m, x, w, b, y;
  };
  Staging st;
  std::vector<At> at;
  for (const auto& [n, m] : cells(N, M, g_opt.interior, next_launch())) {
    At a{n, m, 0, 0, 0, 0};
    a.x = st.add(x + n * K, 1, K, K);
    a.w = st.add(w + m * K, 1, K, K);
    if (b != nullptr) a.b = st.add(b + m, 1, 1, 1);
    a.y = st.add(y + n * M + m, 1, 1, 1);
    at.push_back(a);
  }
  const std::vector<float>& h = st.fetch();
  for (const At& a : at) {
    const float expect = want(h.data() + a.x, h.data() + a.w, b != nullptr ? h.data() + a.b : nullptr);
    const float got = h[a.y];
    ++timer.cells;
    if (bits(expect) != bits(got))
      mismatch(fmt::format("{} [{} x {}, k {}]: cell ({}, {}): cpu 0x{:08x} ({}) vs cuda 0x{:08x} ({})", op, N, M, K,
                           a.n, a.m, bits(expect), expect, bits(got), got));
  }
}

}  // namespace

void bitlinear_fwd(std::size_t N, std::size_t K, std::size_t M, const float* x, const float* w, float scale,
                   const float* y) {
  const float inv = 1.0f / scale;  // ops::quantize_ternary's inv
  quantized_rows_audit("bitlinear_fwd", N, K, M, x, w, nullptr, y, [&](const float* xr, const float* wr, const float*) {
    const ops::RowCodes<float> cx = ops::quantize_rows(xr, 1, K, static_cast<float>(ops::BitLinear::kActFloor));
    std::int32_t acc = 0;
    for (std::size_t kk = 0; kk < K; ++kk)
      acc += static_cast<std::int32_t>(cx.q[kk]) * static_cast<std::int32_t>(ops::ternary_code(wr[kk], inv));
    return ops::BitLinear::epilogue(acc, cx.step[0], scale);
  });
}

void int8_linear_fwd(std::size_t N, std::size_t K, std::size_t M, const float* x, const float* w, const float* b,
                     const float* y) {
  const auto floor_v = static_cast<float>(ops::Int8Linear::kFloor);
  quantized_rows_audit("int8_linear_fwd", N, K, M, x, w, b, y, [&](const float* xr, const float* wr, const float* br) {
    const ops::RowCodes<float> cx = ops::quantize_rows(xr, 1, K, floor_v);
    const ops::RowCodes<float> cw = ops::quantize_rows(wr, 1, K, floor_v);
    std::int32_t acc = 0;
    for (std::size_t kk = 0; kk < K; ++kk)
      acc += static_cast<std::int32_t>(cx.q[kk]) * static_cast<std::int32_t>(cw.q[kk]);
    const float v = ops::unit_epilogue(acc, cx.step[0], cw.step[0]);
    return br != nullptr ? v + *br : v;
  });
}

}  // namespace lockstep::cuda::audit
