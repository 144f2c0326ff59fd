// int8 GEMM (int32 out) per implementation against the canonical float GEMM
// (cpu::gemm_xwt, the float linear's Y = X·Wᵀ) at GPT-2 124M's shapes and 1024³.
// GOPS counts 2·N·M·K operations (a multiply and an add) per product, per
// wall-clock second; GOPS_core per second of process CPU time (all threads):
// what one busy core does, which on a shared machine is the steadier number
// (run with OMP_WAIT_POLICY=passive so waiting threads burn no CPU).
//   build/<dir>/bench/units/int8_gemm_bench --benchmark_counters_tabular=true
// Threads: the bench's --threads=T (default 2, this machine's cores) via LOCKSTEP_BENCH_THREADS.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <ctime>
#include <random>
#include <string>
#include <vector>

#include "lockstep/backend/cpu/gemm.hpp"
#include "lockstep/backend/cpu/int8_gemm.hpp"

namespace {

namespace int8 = lockstep::cpu::int8;

int bench_threads() {
  const char* t = std::getenv("LOCKSTEP_BENCH_THREADS");
  return t && *t ? std::atoi(t) : 2;
}

struct Shape {
  std::int64_t n, m, k;
};
// GPT-2 124M with 1024 tokens per step: qkv (768 -> 2304), attention out and
// mlp down (-> 768), mlp up (768 -> 3072), mlp down (3072 -> 768); then 1024³
// and a decode step (one token, qkv).
const Shape kShapes[] = {{1024, 2304, 768}, {1024, 768, 768}, {1024, 3072, 768},
                         {1024, 768, 3072}, {1024, 1024, 1024}, {1, 2304, 768}};

double process_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

void set_ops(benchmark::State& st, const Shape& s, double cpu_seconds) {
  const double ops = 2.0 * static_cast<double>(s.n * s.m * s.k);
  st.counters["GOPS_core"] = ops * static_cast<double>(st.iterations()) / cpu_seconds / 1e9;
  st.counters["GOPS"] = benchmark::Counter(ops / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_Int8(benchmark::State& st, int8::Kernel kernel, Shape s) {
  std::mt19937_64 rng(1);
  std::uniform_int_distribution<int> d(-127, 127);
  std::vector<std::int8_t> a(static_cast<std::size_t>(s.n * s.k)), b(static_cast<std::size_t>(s.m * s.k));
  for (auto& x : a) x = static_cast<std::int8_t>(d(rng));
  for (auto& x : b) x = static_cast<std::int8_t>(d(rng));
  std::vector<std::int32_t> c(static_cast<std::size_t>(s.n * s.m));
  const int t = bench_threads();
  const double cpu0 = process_cpu_seconds();
  for (auto _ : st) {
    if (kernel)
      int8::run(kernel, a.data(), b.data(), c.data(), static_cast<std::size_t>(s.n), static_cast<std::size_t>(s.m),
                static_cast<std::size_t>(s.k), t);
    else  // the dispatcher, with the race's choice
      lockstep::cpu::int8_gemm_nt(a.data(), b.data(), c.data(), static_cast<std::size_t>(s.n),
                                  static_cast<std::size_t>(s.m), static_cast<std::size_t>(s.k), t);
    benchmark::DoNotOptimize(c.data());
  }
  set_ops(st, s, process_cpu_seconds() - cpu0);
}

void BM_Float(benchmark::State& st, Shape s) {
  std::mt19937_64 rng(1);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> x(static_cast<std::size_t>(s.n * s.k)), w(static_cast<std::size_t>(s.m * s.k));
  for (auto& v : x) v = d(rng);
  for (auto& v : w) v = d(rng);
  std::vector<float> y(static_cast<std::size_t>(s.n * s.m));
  const int t = bench_threads();
  const double cpu0 = process_cpu_seconds();
  for (auto _ : st) {
    lockstep::cpu::gemm_xwt(static_cast<std::size_t>(s.n), static_cast<std::size_t>(s.m),
                            static_cast<std::size_t>(s.k), x.data(), w.data(), y.data(), t);
    benchmark::DoNotOptimize(y.data());
  }
  set_ops(st, s, process_cpu_seconds() - cpu0);
}

std::string name(const char* what, const Shape& s) {
  return std::string(what) + "/" + std::to_string(s.n) + "x" + std::to_string(s.m) + "x" + std::to_string(s.k);
}

const bool registered = [] {
  const int8::Candidates c = int8::candidates_for(int8::probe_machine());
  for (const Shape& s : kShapes) {
    benchmark::RegisterBenchmark(name("float_fma", s).c_str(), BM_Float, s)->Unit(benchmark::kMillisecond)->UseRealTime();
    for (const int8::Impl& impl : c.impls)
      benchmark::RegisterBenchmark(name((std::string("int8_") + impl.name).c_str(), s).c_str(), BM_Int8, impl.kernel, s)
          ->Unit(benchmark::kMillisecond)->UseRealTime();
    benchmark::RegisterBenchmark(name("int8_chosen", s).c_str(), BM_Int8, nullptr, s)
        ->Unit(benchmark::kMillisecond)->UseRealTime();
  }
  return true;
}();

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  std::printf("%s\n", lockstep::cpu::int8_gemm_choice_report().c_str());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
