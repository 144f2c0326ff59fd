// The canonical CPU GEMM (cpu::gemm) at the linear layers' shapes of a
// training step: GFLOP/s of each product (forward Y = X·Wᵀ, dX = dY·W,
// dW = dYᵀ·X), by the wall clock and per CPU-second of this process (steady
// on a shared machine), against the per-core FMA peak that the floor in
// docs/perf/TRAIN_CPU.md is computed from.
//
//   build/<dir>/bench/train/cpu_gemm_bench [--threads 2] [--reps 5] [N:M:K ...]
//
// Without shapes: gpt2-tiny's and llama-tiny's at 16 x 256 tokens (N = 4096).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <string>
#include <vector>

#include "lockstep/backend/cpu/gemm.hpp"
#include "lockstep/train/config.hpp"

namespace {

double cpu_seconds() { return static_cast<double>(std::clock()) / CLOCKS_PER_SEC; }  // this process, all threads

struct Shape {
  std::size_t n, m, k;  // rows (tokens), outputs, inputs
};

}  // namespace

int main(int argc, char** argv) {
  int threads = 2, reps = 5;
  std::vector<Shape> shapes;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc) {
      threads = static_cast<int>(lockstep::train::parse_int("--threads", argv[++i]));
    } else if (a == "--reps" && i + 1 < argc) {
      reps = static_cast<int>(lockstep::train::parse_int("--reps", argv[++i]));
    } else {
      Shape s{};
      if (std::sscanf(a.c_str(), "%zu:%zu:%zu", &s.n, &s.m, &s.k) != 3) {
        std::fprintf(stderr, "cpu_gemm_bench: a shape is N:M:K, got '%s'\n", a.c_str());
        return 2;
      }
      shapes.push_back(s);
    }
  }
  if (shapes.empty())
    shapes = {{4096, 768, 256},  {4096, 256, 256}, {4096, 1024, 256}, {4096, 256, 1024},  // gpt2-tiny
              {4096, 256, 688},  {4096, 688, 256}, {4096, 64, 256}};                      // llama-tiny's own
  std::printf("%-18s %-5s %10s %10s %12s\n", "N:M:K", "op", "ms (wall)", "GFLOP/s", "GFLOP/CPU-s");
  for (const auto& s : shapes) {
    std::vector<float> X(s.n * s.k, 0.5f), Wt(s.m * s.k, 0.25f), Y(s.n * s.m), dY(s.n * s.m, 0.125f),
        dX(s.n * s.k), dW(s.m * s.k);
    for (std::size_t i = 0; i < X.size(); ++i) X[i] = static_cast<float>(i % 17) * 0.01f;
    const double flops = 2.0 * static_cast<double>(s.n) * static_cast<double>(s.m) * static_cast<double>(s.k);
    for (int op = 0; op < 3; ++op) {
      auto run = [&] {
        if (op == 0) lockstep::cpu::gemm_xwt(s.n, s.m, s.k, X.data(), Wt.data(), Y.data(), threads);
        if (op == 1) lockstep::cpu::gemm_dyw(s.n, s.m, s.k, dY.data(), Wt.data(), dX.data(), threads);
        if (op == 2) lockstep::cpu::gemm_dytx(s.n, s.m, s.k, dY.data(), X.data(), dW.data(), threads);
      };
      run();  // warm-up
      double best = 1e30, best_cpu = 1e30;
      for (int r = 0; r < reps; ++r) {
        const double c0 = cpu_seconds();
        const auto t0 = std::chrono::steady_clock::now();
        run();
        best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        best_cpu = std::min(best_cpu, cpu_seconds() - c0);
      }
      static const char* names[] = {"xwt", "dyw", "dytx"};
      std::printf("%5zu:%5zu:%5zu  %-5s %10.2f %10.1f %12.1f\n", s.n, s.m, s.k, names[op], 1e3 * best, flops / best * 1e-9,
                  flops / std::max(best_cpu, 1e-9) * 1e-9);
    }
  }
  return 0;
}
