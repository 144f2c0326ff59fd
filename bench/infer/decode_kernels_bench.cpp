// The CPU decode kernels alone, at the BitNet b1.58 2B4T shapes, against the
// machine's read bandwidth measured in the same run (docs/perf/DECODE_CPU.md).
//
//   decode_kernels_bench [--threads N] [--rows 1,8] [--reps R] [--vocab V]
//                        [--prefetch B,...] [--ternary-only]
//
// --prefetch: the ternary VNNI kernel alone at each software prefetch
// distance (bytes; 0: none), the distances interleaved call by call.
//
// For each kernel and row count: the best of R calls; GB/s = the weight bytes
// the call reads / time (the activations are a few KB), and that as a share
// of the read bandwidth (the best of R sums of a 1 GiB buffer, `threads`
// threads, integer adds: what a GEMV that reads each weight once can reach).
//   ternary  cpu::ternary::gemm on 2-bit codes (scalar, vnni, amx), the 2B4T
//            BitLinear shapes (q/o 2560x2560, k/v 640x2560, gate/up 6912x2560,
//            down 2560x6912), each over copies of 256 MB in all (from memory,
//            not the caches, as in a pass);
//   head     the tied head 128256x2560 (--vocab V rows): cpu::panel_gemm on
//            f16 and f32 panels, and cpu::gemm_packed on pack_b's layout.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "list_arg.hpp"
#include "lockstep/ad/rng.hpp"
#include "lockstep/backend/cpu/gemm.hpp"
#include "lockstep/backend/cpu/panel_gemm.hpp"
#include "lockstep/backend/cpu/ternary_gemm.hpp"
#include "lockstep/util/parallel.hpp"

namespace {

using namespace lockstep;
using Clock = std::chrono::steady_clock;

template <class F>
double best_seconds(int reps, F&& f) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = Clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return best;
}

double read_bandwidth(int threads, int reps) {
  const std::size_t n = (std::size_t{1} << 30) / sizeof(std::uint64_t);
  std::vector<std::uint64_t> a(n);
  util::parallel_for(n, threads, 1 << 20, [&](std::size_t lo, std::size_t hi) {
    for (std::size_t i = lo; i < hi; ++i) a[i] = i;
  });
  volatile std::uint64_t sink = 0;
  const double s = best_seconds(reps, [&] {
    util::parallel_for(n, threads, 1 << 20, [&](std::size_t lo, std::size_t hi) {
      std::uint64_t t = 0;
      for (std::size_t i = lo; i < hi; ++i) t += a[i];
      sink = sink + t;
    });
  });
  return static_cast<double>(n * sizeof(std::uint64_t)) / s;
}

using lockstep::bench::parse_list;

}  // namespace

int main(int argc, char** argv) {
  int threads = 0, reps = 5;
  std::string rows_list = "1,8", prefetch_list;
  bool ternary_only = false;
  std::size_t vocab = 128256;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "decode_kernels_bench: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--threads") threads = std::stoi(next());
    else if (a == "--rows") rows_list = next();
    else if (a == "--reps") reps = std::stoi(next());
    else if (a == "--vocab") vocab = std::stoul(next());
    else if (a == "--prefetch") prefetch_list = next();
    else if (a == "--ternary-only") ternary_only = true;
    else {
      std::fprintf(stderr, "decode_kernels_bench: unknown argument %s (see the comment at the top)\n", a.c_str());
      return 2;
    }
  }
  threads = util::resolve_threads(threads);
  const std::vector<std::size_t> rows = parse_list(rows_list);
  const std::size_t max_rows = *std::max_element(rows.begin(), rows.end());
  const double bw = read_bandwidth(threads, reps);
  fmt::print("decode_kernels_bench: {} threads; read bandwidth {:.2f} GB/s (1 GiB sum, best of {}); vnni {}; amx {}\n",
             threads, bw / 1e9, reps, cpu::ternary::vnni_available() ? "available" : "not available",
             cpu::ternary::amx_available() ? "available" : "not available");
  fmt::print("{:<40} {:>4} {:>12} {:>10} {:>8} {:>8}\n", "kernel", "rows", "MB read", "ms", "GB/s", "of read");
  ad::Rng rng(1);
  const std::size_t D = 2560, F = 6912, KV = 640;
  std::vector<float> x(max_rows * std::max(D, F)), y(max_rows * std::max(vocab, F));
  for (auto& v : x) v = static_cast<float>(rng.uniform(-1.0, 1.0));
  auto report = [&](const std::string& name, std::size_t n, double bytes, double s) {
    fmt::print("{:<40} {:>4} {:>12.1f} {:>10.3f} {:>8.2f} {:>7.1f}%\n", name, n, bytes / 1e6, s * 1e3, bytes / s / 1e9,
               100.0 * bytes / s / bw);
    std::fflush(stdout);
  };

  struct Shape {
    const char* name;
    std::size_t M, K;
  };
  for (const Shape& sh : {Shape{"q/o 2560x2560", D, D}, Shape{"k/v 640x2560", KV, D}, Shape{"gate/up 6912x2560", F, D},
                          Shape{"down 2560x6912", D, F}}) {
    std::vector<std::int8_t> codes(sh.M * sh.K), xq(max_rows * sh.K);
    for (auto& c : codes) c = static_cast<std::int8_t>(static_cast<int>(rng.below(3)) - 1);
    for (auto& c : xq) c = static_cast<std::int8_t>(static_cast<int>(rng.below(255)) - 127);
    std::vector<float> step(max_rows, 0.01f);
    // Copies of the matrix, 256 MB in all, called in turn: the model's 210
    // matrices do not fit in the caches either (one would: 1.6-4.4 MB).
    const cpu::TernaryMatrix t = cpu::pack_ternary(codes.data(), sh.M, sh.K, 0.05f, threads);
    const std::vector<cpu::TernaryMatrix> ts(std::max<std::size_t>(1, (std::size_t{256} << 20) / t.bytes()), t);
    if (!prefetch_list.empty() && cpu::ternary::vnni_available()) {
      // The VNNI path at each prefetch distance, the distances interleaved rep by rep (a shared
      // machine's bandwidth moves from second to second: each distance sees the same moments).
      const std::vector<std::size_t> pfs = parse_list(prefetch_list);
      for (std::size_t n : rows) {
        std::vector<double> best(pfs.size(), 1e30);
        for (int r = 0; r < reps; ++r)
          for (std::size_t i = 0; i < pfs.size(); ++i) {
            cpu::ternary::set_prefetch_bytes(pfs[i]);
            best[i] = std::min(best[i], best_seconds(1, [&] {
              for (const cpu::TernaryMatrix& c : ts)
                cpu::ternary::gemm(cpu::ternary::Path::vnni, c, xq.data(), n, step.data(), y.data(), threads);
            }));
          }
        for (std::size_t i = 0; i < pfs.size(); ++i)
          report(fmt::format("ternary vnni {} x{} prefetch {}", sh.name, ts.size(), pfs[i]), n,
                 static_cast<double>(t.bytes() * ts.size()), best[i]);
      }
      cpu::ternary::set_prefetch_bytes(cpu::ternary::kDefaultPrefetchBytes);
      continue;
    }
    for (cpu::ternary::Path p : {cpu::ternary::Path::scalar, cpu::ternary::Path::vnni, cpu::ternary::Path::avx2,
                                    cpu::ternary::Path::amx}) {
      if (!cpu::ternary::path_available(p)) continue;
      for (std::size_t n : rows) {
        const double s = best_seconds(reps, [&] {
          for (const cpu::TernaryMatrix& c : ts) cpu::ternary::gemm(p, c, xq.data(), n, step.data(), y.data(), threads);
        });
        report(fmt::format("ternary {} {} x{}", cpu::ternary::path_name(p), sh.name, ts.size()), n,
               static_cast<double>(t.bytes() * ts.size()), s);
      }
    }
  }

  if (ternary_only) return 0;
  // The head: values on the f16 grid (a tied F16 embedding).
  std::vector<float> head(vocab * D);
  util::parallel_for(head.size(), threads, 1 << 20, [&](std::size_t lo, std::size_t hi) {
    for (std::size_t i = lo; i < hi; ++i) head[i] = static_cast<float>(static_cast<int>((i * 2654435761u) % 1201) - 600) / 16384.0f;
  });
  {
    cpu::HalfPanels h;
    if (!cpu::pack_half(head.data(), vocab, D, h, threads)) {
      std::fprintf(stderr, "decode_kernels_bench: the head's values are not f16 (a bug of this bench)\n");
      return 1;
    }
    for (std::size_t n : rows)
      report("head f16 panels (panel_gemm)", n, static_cast<double>(h.bytes()),
             best_seconds(reps, [&] { cpu::panel_gemm(h, x.data(), n, y.data(), threads); }));
  }
  {
    const cpu::FloatPanels f = cpu::pack_panels(head.data(), vocab, D, threads);
    for (std::size_t n : rows)
      report("head f32 panels (panel_gemm)", n, static_cast<double>(f.bytes()),
             best_seconds(reps, [&] { cpu::panel_gemm(f, x.data(), n, y.data(), threads); }));
  }
  {
    const std::size_t ldb = cpu::packed_ld(vocab);
    std::vector<float> bp(D * ldb);
    cpu::pack_b(vocab, D, head.data(), 1, D, bp.data(), threads);
    for (std::size_t n : rows)
      report("head f32 pack_b (gemm_packed)", n, 4.0 * static_cast<double>(vocab * D),
             best_seconds(reps, [&] { cpu::gemm_packed(n, vocab, D, x.data(), D, 1, bp.data(), ldb, y.data(), vocab, threads); }));
  }
  return 0;
}
