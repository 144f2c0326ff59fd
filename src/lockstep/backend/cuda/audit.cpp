// Live audits (audit.hpp): the cell choice, the copies back, the CPU
// recomputation with the spec's expressions, and the report.
#include "lockstep/backend/cuda/audit.hpp"

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

void matmul(std::string_view kernel, std::size_t I, std::size_t J, std::size_t K, const float* A, std::size_t sai,
            std::size_t sak, const float* B, std::size_t sbk, std::size_t sbj, const float* bias, const float* C,
            std::size_t ldc) {
  if (!g_opt.enabled || I == 0 || J == 0) return;
  Timer timer;
  std::vector<float> a(K), b(K);
  for (const auto& [i, j] : cells(I, J, g_opt.interior, next_launch())) {
    copy_rows_to_host(a.data(), A + i * sai, K, 1, sak);
    copy_rows_to_host(b.data(), B + j * sbj, K, 1, sbk);
    float want = ops::Math<float>::dot_seq(a.data(), 1, b.data(), 1, K);
    if (bias != nullptr) {
      float bj;
      copy_to_host(&bj, bias + j, sizeof(float));
      want = want + bj;
    }
    float got;
    copy_to_host(&got, C + i * ldc + j, sizeof(float));
    ++timer.cells;
    if (bits(want) != bits(got))
      mismatch(fmt::format("{} [{} x {}, k {}]: cell ({}, {}): cpu 0x{:08x} ({}) vs cuda 0x{:08x} ({})", kernel, I, J,
                           K, i, j, bits(want), want, bits(got), got));
  }
}

void attention_fwd(const ops::Attention::Config& c, const float* q, std::size_t ldq, const float* k, const float* v,
                   std::size_t ldkv, const float* o, const float* lse) {
  if (!g_opt.enabled || c.batch == 0 || c.seq == 0 || c.q_heads == 0) return;
  Timer timer;
  const std::size_t T = c.seq, Dh = c.head_dim, Hq = c.q_heads, rep = c.q_heads / c.kv_heads;
  // Rows (b, h, i): the last query of the last and first (batch, head), the
  // first query, then random ones.
  std::vector<std::array<std::size_t, 3>> rows = {
      {c.batch - 1, Hq - 1, T - 1}, {0, 0, T - 1}, {0, 0, 0}, {c.batch - 1, 0, T / 2}};
  const std::uint64_t launch = next_launch();
  for (std::size_t r = 0; r < g_opt.interior; ++r) {
    const std::uint32_t u = num::rng::bits32(g_opt.seed, launch, r);
    rows.push_back({(u >> 20) % c.batch, (u >> 10) % Hq, u % T});
  }
  for (const auto& [b, h, i] : rows) {
    const std::size_t g = h / rep;
    // The row's problem alone: one head pair, keys 0..i.
    ops::Attention::Config one = c;
    one.batch = 1;
    one.seq = i + 1;
    one.q_heads = one.kv_heads = 1;
    ops::Attention::Inputs<float> in{Tensor<float>({1, i + 1, 1, Dh}), Tensor<float>({1, i + 1, 1, Dh}),
                                     Tensor<float>({1, i + 1, 1, Dh})};
    copy_rows_to_host(in.q.ptr() + i * Dh, q + (b * T + i) * ldq + h * Dh, 1, Dh, ldq);
    copy_rows_to_host(in.k.ptr(), k + b * T * ldkv + g * Dh, i + 1, Dh, ldkv);
    copy_rows_to_host(in.v.ptr(), v + b * T * ldkv + g * Dh, i + 1, Dh, ldkv);
    std::vector<float> want(Dh), got(Dh);
    float want_lse = 0, got_lse = 0;
    ops::Attention::forward_row(one, in, 0, 0, i, ops::Attention::scale_of<float>(c), want.data(), want_lse);
    copy_to_host(got.data(), o + ((b * T + i) * Hq + h) * Dh, Dh * sizeof(float));
    copy_to_host(&got_lse, lse + (b * Hq + h) * T + i, sizeof(float));
    timer.cells += Dh + 1;
    for (std::size_t d = 0; d <= Dh; ++d) {
      const float w = d < Dh ? want[d] : want_lse, gv = d < Dh ? got[d] : got_lse;
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
