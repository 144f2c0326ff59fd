// Throughput of the canonical reductions (single row, one long vector across
// threads, row-wise), against the scalar reference and a naive loop; hashing
// and the RNG. Bytes/s counts the floats read.
//   build/<dir>/bench/reduce/reduce_bench --benchmark_filter=Sum
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "lockstep/num/hash.hpp"
#include "lockstep/num/reduce.hpp"
#include "lockstep/num/rng.hpp"

namespace {

namespace rd = lockstep::num::reduce;
namespace rng = lockstep::num::rng;

std::vector<float> data(std::size_t n, std::uint64_t stream) {
  std::vector<float> x(n);
  rng::fill_uniform(x.data(), n, 1, stream, 0, -1.0f, 1.0f, 0);
  return x;
}

void set_bytes(benchmark::State& st, std::size_t bytes_per_iter) {
  st.SetBytesProcessed(static_cast<std::int64_t>(st.iterations()) *
                       static_cast<std::int64_t>(bytes_per_iter));
}

void BM_Sum(benchmark::State& st) {
  const auto n = static_cast<std::size_t>(st.range(0));
  const auto x = data(n, 1);
  for (auto _ : st) benchmark::DoNotOptimize(rd::sum(x.data(), n));
  set_bytes(st, 4 * n);
}
void BM_SumReference(benchmark::State& st) {
  const auto n = static_cast<std::size_t>(st.range(0));
  const auto x = data(n, 1);
  for (auto _ : st) benchmark::DoNotOptimize(rd::ref::sum(x.data(), n));
  set_bytes(st, 4 * n);
}
void BM_SumNaive(benchmark::State& st) {  // left to right: latency bound, not canonical
  const auto n = static_cast<std::size_t>(st.range(0));
  const auto x = data(n, 1);
  for (auto _ : st) {
    float acc = 0.0f;
    for (std::size_t i = 0; i < n; ++i) acc = acc + x[i];
    benchmark::DoNotOptimize(acc);
  }
  set_bytes(st, 4 * n);
}
void BM_Dot(benchmark::State& st) {
  const auto n = static_cast<std::size_t>(st.range(0));
  const auto x = data(n, 1), y = data(n, 2);
  for (auto _ : st) benchmark::DoNotOptimize(rd::dot(x.data(), y.data(), n));
  set_bytes(st, 8 * n);
}
void BM_Max(benchmark::State& st) {
  const auto n = static_cast<std::size_t>(st.range(0));
  const auto x = data(n, 1);
  for (auto _ : st) benchmark::DoNotOptimize(rd::max(x.data(), n));
  set_bytes(st, 4 * n);
}
void BM_SumParallel(benchmark::State& st) {
  const std::size_t n = std::size_t{1} << 24;
  const auto x = data(n, 1);
  const int threads = static_cast<int>(st.range(0));
  for (auto _ : st) benchmark::DoNotOptimize(rd::sum_parallel(x.data(), n, threads));
  set_bytes(st, 4 * n);
}
void BM_SumRows(benchmark::State& st) {  // GPT-2 activations: 1024 rows of 768
  const std::size_t rows = 1024, n = 768;
  const auto x = data(rows * n, 1);
  std::vector<float> out(rows);
  const int threads = static_cast<int>(st.range(0));
  for (auto _ : st) {
    rd::sum_rows(x.data(), rows, n, n, out.data(), threads);
    benchmark::DoNotOptimize(out.data());
  }
  set_bytes(st, 4 * rows * n);
}
void BM_HashBits(benchmark::State& st) {
  const auto n = static_cast<std::size_t>(st.range(0));
  const auto x = data(n, 1);
  for (auto _ : st) benchmark::DoNotOptimize(lockstep::num::hash_bits(x.data(), n));
  set_bytes(st, 4 * n);
}
void BM_FillUniform(benchmark::State& st) {
  const std::size_t n = std::size_t{1} << 22;
  std::vector<float> x(n);
  const int threads = static_cast<int>(st.range(0));
  for (auto _ : st) {
    rng::fill_uniform(x.data(), n, 1, 2, 0, 0.0f, 1.0f, threads);
    benchmark::DoNotOptimize(x.data());
  }
  set_bytes(st, 4 * n);
}
void BM_FillNormal(benchmark::State& st) {
  const std::size_t n = std::size_t{1} << 20;
  std::vector<float> x(n);
  const int threads = static_cast<int>(st.range(0));
  for (auto _ : st) {
    rng::fill_normal(x.data(), n, 1, 2, 0, 0.0f, 0.02f, threads);
    benchmark::DoNotOptimize(x.data());
  }
  set_bytes(st, 4 * n);
}

BENCHMARK(BM_Sum)->Arg(768)->Arg(4096)->Arg(50257)->Arg(1 << 20);
BENCHMARK(BM_SumReference)->Arg(768)->Arg(1 << 20);
BENCHMARK(BM_SumNaive)->Arg(768)->Arg(1 << 20);
BENCHMARK(BM_Dot)->Arg(768)->Arg(4096)->Arg(1 << 20);
BENCHMARK(BM_Max)->Arg(768)->Arg(1 << 20);
BENCHMARK(BM_SumParallel)->Arg(1)->Arg(2)->Arg(4)->Arg(8)->Arg(16)->UseRealTime();
BENCHMARK(BM_SumRows)->Arg(1)->Arg(2)->Arg(4)->Arg(8)->Arg(16)->UseRealTime();
BENCHMARK(BM_HashBits)->Arg(1 << 20);
BENCHMARK(BM_FillUniform)->Arg(1)->Arg(2)->Arg(4)->Arg(8)->Arg(16)->UseRealTime();

BENCHMARK(BM_FillNormal)->Arg(1)->Arg(16)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
