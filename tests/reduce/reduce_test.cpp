// Canonical reductions (src/lockstep/num/reduce.*): the fast single-row code,
// the multithreaded versions and the row-wise versions agree bit for bit with
// the plain reference; the conventions (empty, NaN, signed zeros) hold; the
// order is not vacuous (a naive sum differs); wrong orders are caught.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "lockstep/num/reduce.hpp"
#include "lockstep/num/reduce_kinds.hpp"
#include "test_data.hpp"

namespace {

namespace rd = lockstep::num::reduce;
namespace t = lockstep::test;
using lockstep::num::bits_of;
using lockstep::num::float_of;

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitizer = true;
#else
constexpr bool kSanitizer = false;
#endif

using namespace rd::by_kind;

using Candidate = std::function<float(Kind, const float*, const float*, std::size_t)>;

// The lengths every comparison runs: edges of a lane row, a chunk, a level.
std::vector<std::size_t> lengths(bool with_random) {
  std::vector<std::size_t> ns = {0,    1,    2,    31,   32,   33,    63,     64,     65,
                                 127,  128,  129,  1000, 4095, 4096,  4097,   8191,   8192,
                                 8193, 12289, 32 * 4096 - 1, 32 * 4096, 32 * 4096 + 1,
                                 33 * 4096 + 17};
  if (with_random) {
    // Log-uniform random lengths in [1, 10^6].
    const int count = kSanitizer ? 8 : 40;
    for (int i = 0; i < count; ++i) {
      const double u = static_cast<double>(t::mix64(0x5EED0000u + static_cast<unsigned>(i)) >> 11) *
                       0x1p-53;
      ns.push_back(static_cast<std::size_t>(std::exp(u * std::log(1e6))));
    }
  }
  return ns;
}

struct Tally {
  std::size_t cases = 0, mismatches = 0;
  std::string first;
};

// Compares candidate to the reference on every length x profile x kind.
Tally compare_all(const Candidate& candidate, const std::vector<std::size_t>& ns,
                  std::uint64_t seed) {
  Tally tally;
  for (std::size_t n : ns) {
    for (int p = 0; p < static_cast<int>(t::Profile::count); ++p) {
      const auto profile = static_cast<t::Profile>(p);
      const std::uint64_t s = seed * 1000003u + n * 31u + static_cast<unsigned>(p);
      const std::vector<float> x = t::make(profile, s, n), y = t::make(profile, s + 7, n);
      for (Kind k : kKinds) {
        const std::uint32_t want = bits_of(reference(k, x.data(), y.data(), n));
        const std::uint32_t got = bits_of(candidate(k, x.data(), y.data(), n));
        ++tally.cases;
        if (want != got) {
          if (tally.mismatches++ == 0)
            tally.first = std::string(kind_name(k)) + " n=" + std::to_string(n) + " profile=" +
                          t::profile_name(profile) + ": got " + t::hex32(got) + " want " +
                          t::hex32(want);
        }
      }
    }
  }
  return tally;
}

TEST(Reduce, FastEqualsReferenceBitForBit) {
  const Tally tally = compare_all(fast, lengths(true), 1);
  std::printf("fast single-row vs reference: %zu cases (lengths x %d profiles x 5 kinds), "
              "%zu mismatches\n",
              tally.cases, static_cast<int>(t::Profile::count), tally.mismatches);
  EXPECT_EQ(tally.mismatches, 0u) << tally.first;
  EXPECT_GT(tally.cases, 1000u);
}

TEST(Reduce, NaNPayloadsGiveTheCanonicalNaN) {
  // Every kind, NaN of every sign/payload at every position class.
  std::size_t cases = 0, bad = 0;
  for (std::size_t n : {1u, 5u, 32u, 33u, 4096u, 4097u, 70000u}) {
    for (std::size_t at : {std::size_t{0}, n / 3, n - 1}) {
      for (std::uint64_t s = 0; s < 4; ++s) {
        std::vector<float> x = t::golden_data(s + 10, n), y = t::golden_data(s + 20, n);
        t::plant_nan(x, s * 977 + at, at);
        for (Kind k : kKinds) {
          for (const Candidate& c : {Candidate(fast), Candidate(reference)}) {
            ++cases;
            if (bits_of(c(k, x.data(), y.data(), n)) != rd::kCanonicalNaN) ++bad;
          }
          for (int th : {1, 2, 7}) {
            ++cases;
            if (bits_of(parallel(k, x.data(), y.data(), n, th)) != rd::kCanonicalNaN) ++bad;
          }
        }
      }
    }
  }
  std::printf("NaN inputs: %zu results, %zu not the canonical NaN 0x7fc00000\n", cases, bad);
  EXPECT_EQ(bad, 0u);
}

TEST(Reduce, ThreadCountDoesNotChangeBits) {
  std::vector<std::size_t> ns = lengths(true);
  ns.push_back(std::size_t{4096} * 4096 + 4097);  // three levels of chunks
  std::size_t cases = 0, mismatches = 0;
  std::string first;
  for (std::size_t n : ns) {
    for (t::Profile profile : {t::Profile::golden, t::Profile::wide, t::Profile::specials}) {
      const bool big = n > 2'000'000;
      if (big && profile != t::Profile::golden) continue;
      std::vector<float> x = t::make(profile, n + 3, n), y = t::make(profile, n + 4, n);
      for (Kind k : kKinds) {
        const std::uint32_t want = bits_of(big ? fast(k, x.data(), y.data(), n)
                                               : reference(k, x.data(), y.data(), n));
        for (int threads : {1, 2, 7}) {
          const std::uint32_t got = bits_of(parallel(k, x.data(), y.data(), n, threads));
          ++cases;
          if (got != want && mismatches++ == 0)
            first = std::string(kind_name(k)) + " n=" + std::to_string(n) +
                    " threads=" + std::to_string(threads);
        }
      }
    }
  }
  std::printf("threads 1/2/7 vs reference: %zu cases, %zu mismatches\n", cases, mismatches);
  EXPECT_EQ(mismatches, 0u) << first;
}

TEST(Reduce, ThreeLevelVectorMatchesReference) {
  // n > 4096^2: the chunk partials themselves need two more levels.
  const std::size_t n = std::size_t{4096} * 4096 + 4097;
  const std::vector<float> x = t::golden_data(3, n), y = t::golden_data(4, n);
  std::size_t mismatches = 0;
  for (Kind k : kKinds) {
    const std::uint32_t want = bits_of(reference(k, x.data(), y.data(), n));
    if (bits_of(fast(k, x.data(), y.data(), n)) != want) ++mismatches;
  }
  std::printf("n=%zu (3 levels): 5 kinds, %zu mismatches fast vs reference\n", n, mismatches);
  EXPECT_EQ(mismatches, 0u);
}

TEST(Reduce, RowsMatchReferenceForAnyThreadCount) {
  struct Shape {
    std::size_t rows, n, pad;
  };
  const std::vector<Shape> shapes = {{0, 5, 0},   {1, 0, 3},    {3, 1, 0},     {7, 33, 5},
                                     {64, 768, 0}, {5, 50257, 11}, {2, 300001, 1}, {1000, 17, 2},
                                     {9, 4097, 0}};
  std::size_t cases = 0, mismatches = 0;
  std::string first;
  for (const Shape& s : shapes) {
    const std::size_t ld = s.n + s.pad;
    // Padding holds NaN: a row function that reads past n would return NaN.
    std::vector<float> x(s.rows * ld, float_of(0x7FC00001u)), y(s.rows * ld, float_of(0xFFC00002u));
    for (std::size_t r = 0; r < s.rows; ++r) {
      const std::vector<float> a = t::make(r % 3 ? t::Profile::golden : t::Profile::specials,
                                           r + 100 * s.n, s.n);
      const std::vector<float> b = t::make(t::Profile::golden, r + 7 + 100 * s.n, s.n);
      std::copy(a.begin(), a.end(), x.begin() + static_cast<std::ptrdiff_t>(r * ld));
      std::copy(b.begin(), b.end(), y.begin() + static_cast<std::ptrdiff_t>(r * ld));
    }
    for (Kind k : kKinds) {
      for (int threads : {1, 2, 7}) {
        std::vector<float> out(s.rows, -1.0f);
        switch (k) {
          case Kind::sum: rd::sum_rows(x.data(), s.rows, s.n, ld, out.data(), threads); break;
          case Kind::sumsq: rd::sumsq_rows(x.data(), s.rows, s.n, ld, out.data(), threads); break;
          case Kind::max: rd::max_rows(x.data(), s.rows, s.n, ld, out.data(), threads); break;
          case Kind::min: rd::min_rows(x.data(), s.rows, s.n, ld, out.data(), threads); break;
          case Kind::dot:
            rd::dot_rows(x.data(), ld, y.data(), ld, s.rows, s.n, out.data(), threads);
            break;
        }
        for (std::size_t r = 0; r < s.rows; ++r) {
          const std::uint32_t want =
              bits_of(reference(k, x.data() + r * ld, y.data() + r * ld, s.n));
          ++cases;
          if (bits_of(out[r]) != want && mismatches++ == 0)
            first = std::string(kind_name(k)) + "_rows rows=" + std::to_string(s.rows) +
                    " n=" + std::to_string(s.n) + " row " + std::to_string(r) +
                    " threads=" + std::to_string(threads);
        }
      }
    }
  }
  std::printf("row-wise (9 shapes x 5 kinds x threads 1/2/7): %zu rows, %zu mismatches\n", cases,
              mismatches);
  EXPECT_EQ(mismatches, 0u) << first;
}

TEST(Reduce, Conventions) {
  const float pinf = float_of(0x7F800000u), ninf = float_of(0xFF800000u);
  const float pz = 0.0f, nz = float_of(0x80000000u);
  const std::uint32_t nan = rd::kCanonicalNaN;
  struct Case {
    const char* what;
    Kind kind;
    std::vector<float> x;
    std::uint32_t want;
  };
  const std::vector<Case> cases = {
      {"empty sum is +0", Kind::sum, {}, 0x00000000u},
      {"empty sumsq is +0", Kind::sumsq, {}, 0x00000000u},
      {"empty dot is +0", Kind::dot, {}, 0x00000000u},
      {"empty max is -inf", Kind::max, {}, 0xFF800000u},
      {"empty min is +inf", Kind::min, {}, 0x7F800000u},
      {"sum of one -0 is +0 (lanes start at +0)", Kind::sum, {nz}, 0x00000000u},
      {"sum of -0s is +0", Kind::sum, std::vector<float>(100, nz), 0x00000000u},
      {"max(-0, +0) is +0", Kind::max, {nz, pz}, 0x00000000u},
      {"max(+0, -0) is +0", Kind::max, {pz, nz}, 0x00000000u},
      {"min(+0, -0) is -0", Kind::min, {pz, nz}, 0x80000000u},
      {"min(-0, +0) is -0", Kind::min, {nz, pz}, 0x80000000u},
      {"max of -0s is -0", Kind::max, {nz, nz, nz}, 0x80000000u},
      {"inf + -inf is the canonical NaN", Kind::sum, {pinf, 1.0f, ninf}, nan},
      {"inf + finite is inf", Kind::sum, {pinf, -1e30f, 3.0f}, 0x7F800000u},
      {"overflow gives inf", Kind::sum, std::vector<float>(64, 3e38f), 0x7F800000u},
      {"max with a negative NaN is the canonical NaN", Kind::max, {1.0f, float_of(0xFFC01234u)},
       nan},
      {"min with a signalling NaN is the canonical NaN", Kind::min,
       {float_of(0x7F800001u), -1.0f}, nan},
      {"max of -inf only", Kind::max, {ninf, ninf}, 0xFF800000u},
      {"max of subnormals", Kind::max, {float_of(1u), float_of(3u), float_of(0x80000005u)}, 3u},
      {"sum of subnormals is exact", Kind::sum, {float_of(1u), float_of(2u), float_of(4u)}, 7u},
  };
  std::size_t bad = 0;
  for (const Case& c : cases) {
    const float* x = c.x.data();
    for (const Candidate& f : {Candidate(fast), Candidate(reference)}) {
      const std::uint32_t got = bits_of(f(c.kind, x, x, c.x.size()));
      if (got != c.want) {
        ++bad;
        ADD_FAILURE() << c.what << ": got " << t::hex32(got) << " want " << t::hex32(c.want);
      }
    }
  }
  std::printf("conventions: %zu cases x (fast, reference), %zu wrong\n", cases.size(), bad);
}

TEST(Reduce, MaxMinAreOrderFree) {
  // The total order makes max/min independent of evaluation order: rotations
  // of a tie-heavy vector (±0, equal values, NaN-free) give the same bits.
  std::size_t cases = 0, bad = 0;
  for (std::size_t n : {2u, 33u, 4097u, 9000u}) {
    std::vector<float> x = t::make(t::Profile::ties, n, n);
    const std::uint32_t mx = bits_of(rd::max(x.data(), n)), mn = bits_of(rd::min(x.data(), n));
    for (std::size_t shift = 1; shift < 40; ++shift) {
      std::rotate(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(shift % n), x.end());
      cases += 2;
      bad += bits_of(rd::ref::max(x.data(), n)) != mx;
      bad += bits_of(rd::ref::min(x.data(), n)) != mn;
    }
  }
  std::printf("max/min under rotations: %zu cases, %zu differ\n", cases, bad);
  EXPECT_EQ(bad, 0u);
}

// ---------------------------------------------------------------------------
// The order is not vacuous: a naive left-to-right sum gives other bits.
// ---------------------------------------------------------------------------
float naive_sum(const float* x, std::size_t n) {
  float acc = 0.0f;
  for (std::size_t i = 0; i < n; ++i) acc = acc + x[i];
  return acc;
}

TEST(Reduce, OrderMattersNaiveSumDiffers) {
  const int trials = 200;
  for (std::size_t n : {100u, 1000u, 10000u}) {
    int differ = 0;
    for (int i = 0; i < trials; ++i) {
      const std::vector<float> x = t::golden_data(static_cast<std::uint64_t>(i) + 500, n);
      differ += bits_of(naive_sum(x.data(), n)) != bits_of(rd::sum(x.data(), n));
    }
    std::printf("n=%zu: naive left-to-right sum differs from the canonical sum on %d of %d "
                "random vectors (%.0f%%)\n",
                n, differ, trials, 100.0 * differ / trials);
    EXPECT_GT(differ, trials / 4) << "the canonical order would be indistinguishable";
  }
}

// ---------------------------------------------------------------------------
// Mutants: a parameterized model of the order. The unmutated model must match
// the fast path everywhere; every mutation must be caught by the same
// comparison harness that passes the real implementation.
// ---------------------------------------------------------------------------
struct Model {
  std::size_t lanes = 32;
  std::size_t chunk = 4096;
  std::vector<std::size_t> tree = {16, 8, 4, 2, 1};  // offsets, in order
  bool use_fma = true;          // sumsq/dot: fma (else a rounded product, then add)
  bool canonical_nan = true;    // NaN results as 0x7FC00000
  bool negative_zero_identity = false;
  bool flat_partials = false;   // chunk partials summed left to right
  bool zero_ties = false;       // max/min: return the accumulator on -0 == +0
};

float model_fold(const Model& m, Kind k, float acc, float x, float y) {
  switch (k) {
    case Kind::sum: return acc + x;
    case Kind::sumsq: return m.use_fma ? std::fma(x, x, acc) : acc + x * x;
    case Kind::dot: return m.use_fma ? std::fma(x, y, acc) : acc + x * y;
    case Kind::max:
      if (m.zero_ties && acc == x) return acc;
      return rd::ref::max2(acc, x);
    case Kind::min:
      if (m.zero_ties && acc == x) return acc;
      return rd::ref::min2(acc, x);
  }
  return 0.0f;
}

float model(const Model& m, Kind k, const float* x, const float* y, std::size_t n) {
  const Kind later = (k == Kind::sumsq || k == Kind::dot) ? Kind::sum : k;
  const float identity = k == Kind::max   ? float_of(0xFF800000u)
                         : k == Kind::min ? float_of(0x7F800000u)
                         : m.negative_zero_identity ? float_of(0x80000000u)
                                                    : 0.0f;
  std::vector<float> v(x, x + n), w(y, y + n);
  Kind kind = k;
  do {
    std::vector<float> partials;
    for (std::size_t c = 0; c == 0 || c < v.size(); c += m.chunk) {
      std::vector<float> lane(m.lanes, identity);
      std::vector<bool> active(m.lanes, true);
      for (std::size_t i = c; i < std::min(v.size(), c + m.chunk); ++i)
        lane[(i - c) % m.lanes] =
            model_fold(m, kind, lane[(i - c) % m.lanes], v[i], w.empty() ? 0.0f : w[i]);
      for (std::size_t off : m.tree) {
        if (off >= m.lanes) continue;
        for (std::size_t j = 0; j < m.lanes; ++j)
          if (active[j] && (j & off) == 0) {
            lane[j] = model_fold(m, later, lane[j], lane[j + off], 0.0f);
            active[j + off] = false;
          }
      }
      partials.push_back(lane[0]);
    }
    if (m.flat_partials && partials.size() > 1) {
      float acc = partials[0];
      for (std::size_t i = 1; i < partials.size(); ++i)
        acc = model_fold(m, later, acc, partials[i], 0.0f);
      partials = {acc};
    }
    v = partials;
    w.clear();
    kind = later;
  } while (v.size() > 1);
  return m.canonical_nan && std::isnan(v[0]) ? float_of(rd::kCanonicalNaN) : v[0];
}

Candidate model_candidate(Model m) {
  return [m](Kind k, const float* x, const float* y, std::size_t n) { return model(m, k, x, y, n); };
}

const std::vector<std::size_t> kMutantLengths = {0, 1, 17, 31, 33, 100, 4097, 8193, 40000, 140000};

TEST(ReduceMutants, UnmutatedModelMatches) {
  const Tally tally = compare_all(model_candidate(Model{}), kMutantLengths, 2);
  std::printf("model (unmutated) vs reference: %zu cases, %zu mismatches\n", tally.cases,
              tally.mismatches);
  EXPECT_EQ(tally.mismatches, 0u) << tally.first;
}

TEST(ReduceMutants, EveryMutantIsDetected) {
  struct Mutant {
    const char* name;
    Model m;
  };
  std::vector<Mutant> mutants;
  auto add = [&](const char* name, auto edit) {
    Model m;
    edit(m);
    mutants.push_back({name, m});
  };
  add("tree levels 16 and 8 swapped", [](Model& m) { m.tree = {8, 16, 4, 2, 1}; });
  add("tree levels 2 and 1 swapped", [](Model& m) { m.tree = {16, 8, 4, 1, 2}; });
  add("16 lanes instead of 32", [](Model& m) { m.lanes = 16; });
  add("64 lanes instead of 32", [](Model& m) { m.lanes = 64, m.tree = {32, 16, 8, 4, 2, 1}; });
  add("chunk 2048 instead of 4096", [](Model& m) { m.chunk = 2048; });
  add("chunk 8192 instead of 4096", [](Model& m) { m.chunk = 8192; });
  add("one sequential lane (naive order)", [](Model& m) { m.lanes = 1; });
  add("product rounded before the add (no fma)", [](Model& m) { m.use_fma = false; });
  add("NaN payload passed through", [](Model& m) { m.canonical_nan = false; });
  add("identity -0 instead of +0", [](Model& m) { m.negative_zero_identity = true; });
  add("chunk partials summed left to right", [](Model& m) { m.flat_partials = true; });
  add("max/min treat -0 and +0 as equal", [](Model& m) { m.zero_ties = true; });
  int detected = 0;
  for (const Mutant& mu : mutants) {
    const Tally tally = compare_all(model_candidate(mu.m), kMutantLengths, 2);
    std::printf("mutant %-42s %4zu of %zu cases differ -> %s\n", mu.name, tally.mismatches,
                tally.cases, tally.mismatches ? "detected" : "MISSED");
    EXPECT_GT(tally.mismatches, 0u) << "mutant not detected: " << mu.name;
    detected += tally.mismatches > 0;
  }
  std::printf("%d of %zu mutants detected\n", detected, mutants.size());
}

// ---------------------------------------------------------------------------
// GEMM order: dot_seq is a sequential fma chain, a different order from the
// row reductions.
// ---------------------------------------------------------------------------
TEST(Reduce, DotSeqIsTheSequentialFmaChain) {
  std::size_t cases = 0, bad = 0, differs_from_canonical = 0;
  for (std::size_t k : {0u, 1u, 7u, 64u, 768u, 3072u, 5000u}) {
    // A row of A (stride 1) against a column of a row-major B with N = 3.
    const std::vector<float> a = t::golden_data(k + 1, k), b = t::golden_data(k + 2, 3 * k + 3);
    for (std::size_t col = 0; col < 3; ++col) {
      float acc = 0.0f;
      for (std::size_t i = 0; i < k; ++i) acc = std::fma(a[i], b[i * 3 + col], acc);
      const float got = rd::dot_seq(a.data(), 1, b.data() + col, 3, k);
      ++cases;
      bad += bits_of(got) != bits_of(acc);
      std::vector<float> bcol(k);
      for (std::size_t i = 0; i < k; ++i) bcol[i] = b[i * 3 + col];
      differs_from_canonical += bits_of(got) != bits_of(rd::dot(a.data(), bcol.data(), k));
    }
  }
  // NaN: canonical, like every reduction.
  const float nanv[2] = {float_of(0xFFC00123u), 1.0f};
  const float ones[2] = {1.0f, 1.0f};
  bad += bits_of(rd::dot_seq(nanv, 1, ones, 1, 2)) != rd::kCanonicalNaN;
  std::printf("dot_seq: %zu cases, %zu differ from the fma chain; %zu differ from the chunked "
              "dot (different orders, as documented)\n",
              cases, bad, differs_from_canonical);
  EXPECT_EQ(bad, 0u);
  EXPECT_GT(differs_from_canonical, 0u);
}

// ---------------------------------------------------------------------------
// Known answers computed independently in Python (tests/reduce/golden.py:
// pure-Python float32 arithmetic following docs/NUMERICS.md, no lockstep
// code). Pins the documented order; a change to it is a NUMERIC_SPEC_VERSION
// change.
// ---------------------------------------------------------------------------
struct Golden {
  std::size_t n;
  std::uint32_t sum, sumsq, dot, max, min, naive;
};
// Generated by tests/reduce/golden.py: {n, sum, sumsq, dot, max, min, naive sum}
// (float bits) for x = data(1, n), y = data(2, n).
constexpr Golden kGolden[] = {
    {0u, 0x00000000u, 0x00000000u, 0x00000000u, 0xff800000u, 0x7f800000u, 0x00000000u},
    {1u, 0x41a38201u, 0x43d0dd9fu, 0x42a0d336u, 0x41a38201u, 0x41a38201u, 0x41a38201u},
    {31u, 0xc4988b44u, 0x486d56bcu, 0xc740517du, 0x41a38201u, 0xc379e733u, 0xc4988b45u},
    {32u, 0xc4988adbu, 0x486d56bcu, 0xc740517du, 0x41a38201u, 0xc379e733u, 0xc4988adcu},
    {33u, 0xc498263eu, 0x486d5934u, 0xc740519eu, 0x41a38201u, 0xc379e733u, 0xc498263fu},
    {4095u, 0xc484d56au, 0x4b43b6a6u, 0xc7fde53eu, 0x437f9f9au, 0xc37ef9dbu, 0xc484d56au},
    {4096u, 0xc484cee6u, 0x4b43b6a6u, 0xc7fde522u, 0x437f9f9au, 0xc37ef9dbu, 0xc484cee6u},
    {4097u, 0xc4850e4au, 0x4b43b6aau, 0xc7fde1d9u, 0x437f9f9au, 0xc37ef9dbu, 0xc4850e4au},
    {65537u, 0x45682fc4u, 0x4d44f2afu, 0xc825ce2cu, 0x437fefa9u, 0xc37ff80du, 0x45683062u},
    {1000003u, 0x474c5b1cu, 0x4f3e8a61u, 0xc9a73574u, 0x437ffe9cu, 0xc37ffde0u, 0x474c5bc3u},
};
// golden.py --big: the three-level sum (sum only; the other columns are not computed there).
constexpr Golden kGoldenBig = {16781313u, 0xc6732ae0u, 0, 0, 0, 0, 0xc6733d33u};

TEST(ReduceGolden, MatchesIndependentPython) {
  std::size_t cases = 0, bad = 0;
  auto check = [&](const char* what, std::size_t n, std::uint32_t got, std::uint32_t want) {
    ++cases;
    if (got != want) {
      ++bad;
      ADD_FAILURE() << what << " n=" << n << ": got " << t::hex32(got) << " want "
                    << t::hex32(want);
    }
  };
  for (const Golden& g : kGolden) {
    const std::vector<float> x = t::golden_data(1, g.n), y = t::golden_data(2, g.n);
    const float* px = x.data();
    const float* py = y.data();
    for (int th : {1, 2, 7}) {
      check("sum", g.n, bits_of(rd::sum_parallel(px, g.n, th)), g.sum);
      check("sumsq", g.n, bits_of(rd::sumsq_parallel(px, g.n, th)), g.sumsq);
      check("dot", g.n, bits_of(rd::dot_parallel(px, py, g.n, th)), g.dot);
      check("max", g.n, bits_of(rd::max_parallel(px, g.n, th)), g.max);
      check("min", g.n, bits_of(rd::min_parallel(px, g.n, th)), g.min);
    }
    check("sum (single row)", g.n, bits_of(rd::sum(px, g.n)), g.sum);
    check("dot (single row)", g.n, bits_of(rd::dot(px, py, g.n)), g.dot);
    check("naive sum", g.n, bits_of(naive_sum(px, g.n)), g.naive);  // the harness itself
  }
  const std::vector<float> big = t::golden_data(1, kGoldenBig.n);
  check("sum 3 levels", kGoldenBig.n, bits_of(rd::sum(big.data(), kGoldenBig.n)), kGoldenBig.sum);
  check("sum 3 levels, 7 threads", kGoldenBig.n, bits_of(rd::sum_parallel(big.data(), kGoldenBig.n, 7)),
        kGoldenBig.sum);
  std::printf("golden (Python) values: %zu checks, %zu wrong\n", cases, bad);
}

}  // namespace
