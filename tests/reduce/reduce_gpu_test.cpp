// The canonical reductions and the RNG on a CUDA device give the CPU's bits
// (label gpu: scripts/test_gpu.sh). Two device formulations of the reduction
// order: the shared single-row header run by one thread, and the warp
// shuffle-down kernel of docs/NUMERICS.md with 1, 4 and 32 warps per row.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "lockstep/num/hash.hpp"
#include "lockstep/num/reduce.hpp"
#include "lockstep/num/rng.hpp"
#include "reduce_gpu.hpp"
#include "test_data.hpp"

namespace {

namespace rd = lockstep::num::reduce;
namespace rng = lockstep::num::rng;
namespace gpu = lockstep::test::gpu;
namespace t = lockstep::test;
using lockstep::num::bits_of;

float cpu(gpu::Kind k, const float* x, const float* y, std::size_t n) {
  switch (k) {
    case gpu::Kind::sum: return rd::sum(x, n);
    case gpu::Kind::sumsq: return rd::sumsq(x, n);
    case gpu::Kind::dot: return rd::dot(x, y, n);
    case gpu::Kind::max: return rd::max(x, n);
    case gpu::Kind::min: return rd::min(x, n);
  }
  return 0.0f;
}

const char* name(gpu::Kind k) {
  constexpr const char* names[] = {"sum", "sumsq", "dot", "max", "min"};
  return names[static_cast<int>(k)];
}

TEST(ReduceGpu, RowsMatchTheCpuBitForBit) {
  if (gpu::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  struct Shape {
    std::size_t rows, n;
  };
  const Shape shapes[] = {{7, 0},    {200, 1},  {200, 31}, {64, 768},  {33, 4096},
                          {33, 4097}, {9, 50257}, {3, 1000003}, {2, 4096 * 40 + 5}};
  const gpu::Kind kinds[] = {gpu::Kind::sum, gpu::Kind::sumsq, gpu::Kind::dot, gpu::Kind::max,
                             gpu::Kind::min};
  std::size_t rows_checked = 0, mismatches = 0, differ_from_naive = 0, sum_rows = 0;
  for (const Shape& s : shapes) {
    const std::size_t ld = s.n + 1;
    std::vector<float> x(s.rows * ld), y(s.rows * ld);
    for (std::size_t r = 0; r < s.rows; ++r) {
      const auto profile = static_cast<t::Profile>(r % static_cast<std::size_t>(t::Profile::count));
      const std::vector<float> a = t::make(profile, 1000 * r + s.n, s.n);
      const std::vector<float> b = t::make(t::Profile::golden, 1000 * r + s.n + 1, s.n);
      std::copy(a.begin(), a.end(), x.begin() + static_cast<std::ptrdiff_t>(r * ld));
      std::copy(b.begin(), b.end(), y.begin() + static_cast<std::ptrdiff_t>(r * ld));
    }
    for (gpu::Kind k : kinds) {
      std::vector<std::vector<float>> results = {gpu::rows_one_thread(k, x, y, s.rows, s.n, ld)};
      for (int warps : {1, 4, 32}) results.push_back(gpu::rows_warp(k, x, y, s.rows, s.n, ld, warps));
      for (std::size_t r = 0; r < s.rows; ++r) {
        const float* xr = x.data() + r * ld;
        const float* yr = y.data() + r * ld;
        const std::uint32_t want = bits_of(cpu(k, xr, yr, s.n));
        for (std::size_t v = 0; v < results.size(); ++v) {
          ++rows_checked;
          if (bits_of(results[v][r]) != want && mismatches++ < 5)
            ADD_FAILURE() << name(k) << " n=" << s.n << " row " << r << " variant " << v
                          << ": gpu " << t::hex32(bits_of(results[v][r])) << " cpu "
                          << t::hex32(want);
        }
        if (k == gpu::Kind::sum && s.n > 1) {  // the test is not vacuous
          float naive = 0.0f;
          for (std::size_t i = 0; i < s.n; ++i) naive = naive + xr[i];
          ++sum_rows;
          differ_from_naive += bits_of(naive) != want;
        }
      }
    }
  }
  std::printf("GPU rows (one thread; warps x1/x4/x32) vs CPU: %zu results, %zu mismatches; "
              "naive sum differs on %zu of %zu sum rows\n",
              rows_checked, mismatches, differ_from_naive, sum_rows);
  EXPECT_EQ(mismatches, 0u);
}

TEST(ReduceGpu, RngMatchesTheCpuBitForBit) {
  if (gpu::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const std::size_t n = 1'000'000;
  const std::uint64_t first = (std::uint64_t{1} << 40) - 3;
  const std::vector<float> u = gpu::uniform(77, 5, first, n), z = gpu::normal(77, 6, first, n);
  std::vector<float> cu(n), cz(n);
  rng::fill_uniform(cu.data(), n, 77, 5, first, 0.0f, 1.0f, 0);
  rng::fill_normal(cz.data(), n, 77, 6, first, 0.0f, 1.0f, 0);
  std::size_t bad_u = 0, bad_z = 0;
  for (std::size_t i = 0; i < n; ++i) {
    // fill_uniform maps through to_range(u, 0, 1) = fma(1, u, 0) = u exactly.
    bad_u += bits_of(u[i]) != bits_of(cu[i]);
    // fill_normal applies fma(1, z, 0) = z exactly (-0 becomes +0: compare values for zeros).
    bad_z += bits_of(z[i]) != bits_of(cz[i]) && !(z[i] == 0.0f && cz[i] == 0.0f);
  }
  std::printf("GPU rng vs CPU: %zu uniforms, %zu differ; %zu normals, %zu differ; "
              "gpu normal hash %s\n",
              n, bad_u, n, bad_z,
              lockstep::num::hash_hex(lockstep::num::hash_bits(z.data(), n)).c_str());
  EXPECT_EQ(bad_u, 0u);
  EXPECT_EQ(bad_z, 0u);
}

}  // namespace
