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
#include "lockstep/ops/scalar.hpp"

namespace lockstep::cuda::audit {
namespace {

Options g_opt;
Stats g_stats;
std::mutex g_mutex;

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
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  std::size_t cells = 0;
  ~Timer() {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::lock_guard<std::mutex> lock(g_mutex);
    ++g_stats.launches;
    g_stats.cells += cells;
    g_stats.seconds += s;
  }
};

std::uint64_t next_launch() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_stats.launches;
}

}  // namespace

void configure(const Options& opt) { g_opt = opt; }
const Options& options() { return g_opt; }
Stats stats() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_stats;
}
void reset_stats() {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_stats = {};
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
  if (!g_opt.enabled || I == 0 || J == 0) return;
  Timer timer;
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
  if (!g_opt.enabled || c.batch == 0 || c.seq == 0 || c.q_heads == 0) return;
  Timer timer;
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

}  // namespace lockstep::cuda::audit
