// ulp_exhaustive: the error of every lockstep elementary function over ALL 2^32
// binary32 inputs (pow: over every y for fixed bases, every x for fixed
// exponents), multithreaded with OpenMP.
//
// Reference: glibc's double-precision function at the (exact) float input.
// glibc's double exp/log/sin/... are within ~1 double ulp (2^-52 relative), which
// is 2^-29 of a binary32 ulp: the measured errors are exact to ~1e-8 ulp. Two
// places where the double reference could mislead are settled with MPFR
// (160 bits) when it is built:
//   - the worst inputs: the --top inputs with the largest error (default 1000)
//     are recomputed against MPFR, and the MPFR maximum is printed beside;
//   - "correctly rounded?" is decided by rounding the double to float, which can
//     differ from rounding the exact value only when the double lies within
//     2^-29 ulp of a midpoint: every input whose double lies within 2^-20 ulp of
//     a midpoint is re-decided with MPFR.
// Also printed: monotonicity violations of the monotone functions (f(next x) on
// the wrong side of f(x)) and, for sin/cos, the closest approach of a float to a
// multiple of pi/2 seen by the Payne-Hanek reduction (significant bits kept).
//
//   ulp_exhaustive                 every function (tens of CPU-minutes in all)
//   ulp_exhaustive --fn exp log    some of them
//   ulp_exhaustive --step 4099     every 4099th input (a quick look)
//   ulp_exhaustive --gpu           also every input's bits on the GPU (CUDA builds)
// Output: one Markdown table row per function (docs/NUMERICS.md holds the table).
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "lockstep/num/elementary.hpp"
#include "lockstep/num/elementary_ref.hpp"
#if defined(ULP_HAVE_GPU)
#include "ulp_gpu.hpp"
#endif

namespace ln = lockstep::num;
namespace le = lockstep::num::elem;

namespace {

struct Worst {
  double err;
  std::uint32_t u;
};

struct Acc {
  double max_err = -1.0;
  std::uint32_t argmax = 0;
  std::uint64_t count = 0, not_cr = 0, monotone_violations = 0;
  std::vector<std::uint32_t> suspects;  // near-midpoint doubles, re-decided with MPFR
  std::vector<Worst> top;
  std::uint32_t first_violation = 0;
};

void keep_top(std::vector<Worst>& top, std::size_t k) {
  if (top.size() <= 4 * k) return;
  std::nth_element(top.begin(), top.begin() + static_cast<std::ptrdiff_t>(k), top.end(),
                   [](const Worst& a, const Worst& b) { return a.err > b.err || (a.err == b.err && a.u < b.u); });
  top.resize(k);
}

// One pass over inputs u = 0, step, 2 step, ... < 2^32, as (x, y) by mode:
// 0: (float_of(u), 0); 1: (fixed, float_of(u)) (pow over every exponent);
// 2: (float_of(u), fixed) (pow over every base).
// dir: +1 increasing, -1 decreasing, 0 not monotone (the check compares
// consecutive bit patterns of the same sign, i.e. neighbouring floats).
struct Pass {
  std::string name;
  le::Fn fn;
  int mode;
  float fixed;
  int dir;
  std::pair<float, float> input(std::uint32_t u) const {
    const float v = ln::float_of(u);
    if (mode == 1) return {fixed, v};
    if (mode == 2) return {v, fixed};
    return {v, 0.0f};
  }
};

struct Result {
  Acc acc;
  double mpfr_max = -1.0;
  std::uint32_t mpfr_argmax = 0;
  std::uint64_t suspects_flipped = 0;
  bool gpu = false;
  std::uint64_t gpu_differ = 0;
  std::uint32_t gpu_first = 0;
  double seconds = 0.0;
};

Result run_pass(const Pass& p, std::uint64_t step, std::size_t top_k, bool gpu) {
  const auto t0 = std::chrono::steady_clock::now();
  constexpr std::uint64_t kTotal = 1ull << 32;
  const std::uint64_t n = (kTotal + step - 1) / step;  // inputs: u = j * step, j < n
  constexpr std::uint64_t kBlock = 1ull << 24, kChunk = 1ull << 16;
  const int nt = omp_get_max_threads();
  std::vector<Acc> accs(static_cast<std::size_t>(nt));
  Result r;
  r.gpu = gpu;
  std::vector<float> dev(gpu ? kBlock : 0);
  std::vector<std::uint64_t> gpu_differ(static_cast<std::size_t>(nt), 0);
  std::vector<std::uint32_t> gpu_first(static_cast<std::size_t>(nt), 0xffffffffu);
  for (std::uint64_t b0 = 0; b0 < n; b0 += kBlock) {
    const std::uint64_t b1 = std::min(n, b0 + kBlock);
#if defined(ULP_HAVE_GPU)
    if (gpu)
      ulp_gpu::eval(static_cast<int>(p.fn), p.mode, p.fixed, b0 * step, step, static_cast<std::uint32_t>(b1 - b0),
                    dev.data());
#endif
    const std::int64_t nchunks = static_cast<std::int64_t>((b1 - b0 + kChunk - 1) / kChunk);
#pragma omp parallel num_threads(nt)
    {
      const std::size_t t = static_cast<std::size_t>(omp_get_thread_num());
      Acc& a = accs[t];
#pragma omp for schedule(dynamic, 1)
      for (std::int64_t c = 0; c < nchunks; ++c) {
        const std::uint64_t lo = b0 + static_cast<std::uint64_t>(c) * kChunk;
        const std::uint64_t hi = std::min(b1, lo + kChunk);
        bool have_prev = lo > 0;
        std::uint32_t prev_u = static_cast<std::uint32_t>((lo - (lo > 0)) * step);
        float prev_y = 0.0f;
        if (have_prev) {
          const auto [px, py] = p.input(prev_u);
          prev_y = le::eval(p.fn, px, py);
        }
        for (std::uint64_t j = lo; j < hi; ++j) {
          const std::uint32_t u = static_cast<std::uint32_t>(j * step);
          const auto [x, y] = p.input(u);
          const float got = le::eval(p.fn, x, y);
          if (gpu && !le::same_result(got, dev[j - b0])) {
            ++gpu_differ[t];
            gpu_first[t] = std::min(gpu_first[t], u);
          }
          const le::Exact e = le::libm_ref(p.fn, x, y);
          const double err = le::ulp_error(got, e.value);
          ++a.count;
          if (!le::same_result(got, e.rounded)) ++a.not_cr;
          if (le::near_midpoint(e.value)) a.suspects.push_back(u);
          if (err > a.max_err || (err == a.max_err && u < a.argmax)) {
            a.max_err = err;
            a.argmax = u;
          }
          if (err > 0.5) a.top.push_back({err, u}), keep_top(a.top, top_k);
          // Monotonicity between neighbouring floats of the same sign (step 1 only).
          if (p.dir != 0 && step == 1 && have_prev && (prev_u >> 31) == (u >> 31) && !std::isnan(got) &&
              !std::isnan(prev_y)) {
            // Within one sign, u+1 is the next float away from zero.
            const int away = (u >> 31) ? -1 : +1;  // direction of x as u grows
            const int want = p.dir * away;          // expected direction of f
            const bool bad = want > 0 ? got < prev_y : got > prev_y;
            if (bad) {
              if (a.monotone_violations == 0 || u < a.first_violation) a.first_violation = u;
              ++a.monotone_violations;
            }
          }
          prev_y = got;
          prev_u = u;
          have_prev = true;
        }
      }
    }
  }
  Acc& t = r.acc;
  for (std::size_t i = 0; i < accs.size(); ++i) {
    Acc& a = accs[i];
    r.gpu_differ += gpu_differ[i];
    if (gpu_differ[i]) r.gpu_first = r.gpu_differ == gpu_differ[i] ? gpu_first[i] : std::min(r.gpu_first, gpu_first[i]);
    t.count += a.count;
    t.not_cr += a.not_cr;
    t.monotone_violations += a.monotone_violations;
    if (a.monotone_violations && (t.monotone_violations == a.monotone_violations || a.first_violation < t.first_violation))
      t.first_violation = a.first_violation;
    if (a.max_err > t.max_err || (a.max_err == t.max_err && a.argmax < t.argmax)) {
      t.max_err = a.max_err;
      t.argmax = a.argmax;
    }
    t.suspects.insert(t.suspects.end(), a.suspects.begin(), a.suspects.end());
    t.top.insert(t.top.end(), a.top.begin(), a.top.end());
  }
  keep_top(t.top, top_k);
  std::sort(t.top.begin(), t.top.end(), [](const Worst& a, const Worst& b) { return a.err > b.err; });
  if (t.top.size() > top_k) t.top.resize(top_k);
  if (t.top.empty()) t.top.push_back({t.max_err, t.argmax});
  if (le::mpfr_available()) {
    for (const Worst& w : t.top) {
      const auto [x, y] = p.input(w.u);
      const double err = le::ulp_error(le::eval(p.fn, x, y), le::mpfr_ref(p.fn, x, y).value);
      if (err > r.mpfr_max) {
        r.mpfr_max = err;
        r.mpfr_argmax = w.u;
      }
    }
    // Re-decide "correctly rounded" where the double reference sits on a midpoint.
    for (std::uint32_t u : t.suspects) {
      const auto [x, y] = p.input(u);
      const float got = le::eval(p.fn, x, y);
      const bool libm_says_cr = le::same_result(got, le::libm_ref(p.fn, x, y).rounded);
      const bool mpfr_says_cr = le::same_result(got, le::mpfr_ref(p.fn, x, y).rounded);
      if (libm_says_cr != mpfr_says_cr) {
        ++r.suspects_flipped;
        if (mpfr_says_cr) --t.not_cr;
        else ++t.not_cr;
      }
    }
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

std::string arg_text(const Pass& p, std::uint32_t u) {
  const auto [x, y] = p.input(u);
  if (p.fn == le::Fn::pow) return "x=" + le::hexf(x) + " y=" + le::hexf(y);
  return le::hexf(x);
}

// sin/cos reduction: the smallest |reduced fraction| over every finite float
// above pi/4 (the closest approach to a multiple of pi/2), as the number of
// significant bits left of the 64-bit fraction.
void payne_hanek_report() {
  using W = ln::detail::V<ln::HwArith>;
  const std::uint32_t lo = ln::bits_of(0x1.921fb6p-1f) + 1, hi = 0x7f800000u;
  int worst_clz = -1;
  std::uint32_t worst_u = 0;
#pragma omp parallel
  {
    int my_clz = -1;
    std::uint32_t my_u = 0;
#pragma omp for schedule(dynamic, 65536)
    for (std::int64_t u = lo; u < hi; ++u) {
      const auto r = ln::detail::reduce_pio2(W(ln::float_of(static_cast<std::uint32_t>(u))));
      // |r| = |f| pi/2 with f = fraction; clz of f's 64-bit magnitude from |rh|:
      const double f = std::fabs(static_cast<double>(r.rh.v)) / 1.5707963267948966;
      const int clz = f > 0 ? -static_cast<int>(std::floor(std::log2(f))) - 1 : 64;
      if (clz > my_clz) {
        my_clz = clz;
        my_u = static_cast<std::uint32_t>(u);
      }
    }
#pragma omp critical
    if (my_clz > worst_clz || (my_clz == worst_clz && my_u < worst_u)) {
      worst_clz = my_clz;
      worst_u = my_u;
    }
  }
  const float x = ln::float_of(worst_u);
  const auto r = ln::detail::reduce_pio2(W(x));
  std::printf("\nPayne-Hanek closest approach to a multiple of pi/2: x = %s, |r| = %a; "
              "%d leading zero bits of the 64-bit fraction, %d significant bits kept\n",
              le::hexf(x).c_str(), std::fabs(static_cast<double>(r.rh.v)), worst_clz, 64 - worst_clz);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"exhaustive ulp error of lockstep's elementary functions"};
  std::vector<std::string> only;
  std::uint64_t step = 1;
  std::size_t top_k = 1000;
  bool reduction = false, gpu = false;
  app.add_option("--fn", only, "functions / passes to run (default: all; 'pow' for every pow pass)");
  app.add_option("--step", step, "visit every step-th input (1: exhaustive)")->check(CLI::PositiveNumber);
  app.add_option("--top", top_k, "worst inputs re-checked with MPFR")->check(CLI::PositiveNumber);
  app.add_flag("--reduction", reduction, "also report the Payne-Hanek closest approach (sin/cos)");
  app.add_flag("--gpu", gpu, "also compute every input on the GPU and count results whose bits differ from the CPU's");
  CLI11_PARSE(app, argc, argv);
#if defined(ULP_HAVE_GPU)
  std::string why;
  if (gpu && !ulp_gpu::available(&why)) {
    std::fprintf(stderr, "ulp_exhaustive: --gpu: %s\n", why.c_str());
    return 2;
  }
#else
  if (gpu) {
    std::fprintf(stderr, "ulp_exhaustive: --gpu: this build has no CUDA\n");
    return 2;
  }
#endif

  std::vector<Pass> passes;
  for (const le::FnSpec& s : le::all_fns()) {
    if (s.fn == le::Fn::pow) continue;
    const int dir = !s.monotone ? 0 : (s.fn == le::Fn::rsqrt ? -1 : 1);
    passes.push_back({s.name, s.fn, 0, 0.0f, dir});
  }
  passes.push_back({"pow(10000, y)", le::Fn::pow, 1, 10000.0f, 0});
  passes.push_back({"pow(500000, y)", le::Fn::pow, 1, 500000.0f, 0});
  passes.push_back({"pow(x, -0.75)", le::Fn::pow, 2, -0.75f, 0});
  passes.push_back({"pow(x, 3.3)", le::Fn::pow, 2, 3.3f, 0});

  std::printf("ulp_exhaustive: %s inputs per pass, %d threads, reference glibc double libm%s%s\n\n",
              step == 1 ? "all 2^32" : ("every " + std::to_string(step) + "th of 2^32").c_str(),
              omp_get_max_threads(), le::mpfr_available() ? ", worst cases and near-midpoints confirmed with MPFR" : "",
              gpu ? "; every result also computed on the GPU" : "");
  std::printf("| function | inputs | max ulp (libm) | max ulp (MPFR, top %zu) | argmax | not correctly rounded | "
              "monotonicity violations |%s seconds |\n",
              top_k, gpu ? " GPU bits differing |" : "");
  std::printf("|---|---|---|---|---|---|---|%s---|\n", gpu ? "---|" : "");
  std::fflush(stdout);
  for (const Pass& p : passes) {
    if (!only.empty() && std::find(only.begin(), only.end(), p.name) == only.end() &&
        !(p.fn == le::Fn::pow && std::find(only.begin(), only.end(), "pow") != only.end()))
      continue;
    const Result r = run_pass(p, step, top_k, gpu);
    const std::string mpfr = r.mpfr_max >= 0 ? std::to_string(r.mpfr_max).substr(0, 8) : "n/a (no MPFR)";
    const std::string mono = p.dir == 0 ? "-" : (step != 1 ? "(step > 1)" : std::to_string(r.acc.monotone_violations));
    const std::string flipped =
        r.suspects_flipped ? " [" + std::to_string(r.suspects_flipped) + " re-decided by MPFR]" : std::string();
    const std::string gpu_cell = gpu ? " " + std::to_string(r.gpu_differ) + " |" : std::string();
    std::printf("| %s | %llu | %.6f | %s | %s | %llu (%.4f%%)%s | %s |%s %.0f |\n", p.name.c_str(),
                static_cast<unsigned long long>(r.acc.count), r.acc.max_err, mpfr.c_str(),
                arg_text(p, r.acc.argmax).c_str(), static_cast<unsigned long long>(r.acc.not_cr),
                100.0 * static_cast<double>(r.acc.not_cr) / static_cast<double>(r.acc.count), flipped.c_str(),
                mono.c_str(), gpu_cell.c_str(), r.seconds);
    if (r.acc.monotone_violations)
      std::printf("  first monotonicity violation at %s\n", arg_text(p, r.acc.first_violation).c_str());
    if (r.gpu_differ) std::printf("  first GPU difference at %s\n", arg_text(p, r.gpu_first).c_str());
    std::fflush(stdout);
  }
  if (reduction) payne_hanek_report();
  return 0;
}
