// `lockstep verify reduce`: the canonical reductions agree bit for bit with
// their plain reference and across thread counts; the order is not vacuous
// (a naive sum and wrong orders are told apart); hashing and Philox give
// their published known answers. A couple of seconds at effort 1.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "lockstep/num/hash.hpp"
#include "lockstep/num/reduce.hpp"
#include "lockstep/num/reduce_kinds.hpp"
#include "lockstep/num/rng.hpp"
#include "lockstep/num/suites.hpp"

namespace lockstep::num {

namespace {

namespace rd = reduce;

std::uint64_t mix64(std::uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Inputs by profile: 0 rounding-heavy (16 binades), 1 any finite exponent
// (overflow), 2 pairwise cancellation, 3 subnormals, 4 signed zeros and
// ties, 5 with ±inf and NaNs of any payload.
constexpr int kProfiles = 6;
std::vector<float> make(int profile, std::uint64_t seed, std::size_t n) {
  std::vector<float> x(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t h = mix64(seed ^ (i * 0xD1B54A32D192ED03ull));
    const std::uint32_t sign = static_cast<std::uint32_t>(h & 1) << 31;
    const std::uint32_t mant = static_cast<std::uint32_t>((h >> 8) & 0x7FFFFF);
    const std::uint32_t r = static_cast<std::uint32_t>(h >> 40);
    std::uint32_t u = 0;
    switch (profile) {
      case 0: u = sign | ((119u + ((h >> 1) & 15)) << 23) | mant; break;
      case 1: u = sign | ((1u + r % 254u) << 23) | mant; break;
      case 2: {
        const std::uint64_t g = mix64(seed + 1 + i / 2);
        u = (static_cast<std::uint32_t>(g >> 63) << 31) |
            ((100u + static_cast<std::uint32_t>(g % 50u)) << 23) |
            static_cast<std::uint32_t>((g >> 8) & 0x7FFFFF);
        if (i % 2) u = (u ^ 0x80000000u) + (r % 3u);
        break;
      }
      case 3: u = sign | (mant >> (r % 20u)); break;
      case 4: u = r % 3u == 0 ? sign : sign | ((126u + r % 3u) << 23); break;
      default: {
        const std::uint32_t k = r % 64u;
        u = k == 0   ? sign | 0x7F800000u
            : k == 1 ? sign | 0x7F800000u | mant | 1u
                     : sign | ((110u + ((h >> 1) & 31)) << 23) | mant;
      }
    }
    x[i] = float_of(u);
  }
  return x;
}

using namespace reduce::by_kind;

// A sum in a configurable (possibly wrong) order: `lanes` lanes, the tree's
// offsets in `tree`, chunks of `chunk`; lanes = 1 is the naive order.
float sum_in_order(const float* x, std::size_t n, std::size_t lanes, std::size_t chunk,
                   const std::vector<std::size_t>& tree) {
  std::vector<float> v(x, x + n);
  do {
    std::vector<float> partials;
    for (std::size_t c = 0; c == 0 || c < v.size(); c += chunk) {
      std::vector<float> lane(lanes, 0.0f);
      std::vector<bool> live(lanes, true);
      for (std::size_t i = c; i < std::min(v.size(), c + chunk); ++i)
        lane[(i - c) % lanes] = lane[(i - c) % lanes] + v[i];
      for (std::size_t off : tree)
        for (std::size_t j = 0; off < lanes && j < lanes; ++j)
          if (live[j] && (j & off) == 0) {
            lane[j] = lane[j] + lane[j + off];
            live[j + off] = false;
          }
      partials.push_back(lane[0]);
    }
    v = partials;
  } while (v.size() > 1);
  return std::isnan(v[0]) ? float_of(rd::kCanonicalNaN) : v[0];
}

struct Count {
  std::uint64_t cases = 0, mismatches = 0;
  std::string first;
  void check(bool ok, const std::string& what) {
    ++cases;
    if (!ok && mismatches++ == 0) first = what;
  }
};

void add_row(verify::Table& t, const std::string& check, const Count& c, bool pass,
             const std::string& detail = {}) {
  t.add({check, verify::fmt_count(c.cases), verify::fmt_count(c.mismatches), detail}, pass,
        c.first.empty() ? std::string() : "first: " + c.first);
}

}  // namespace

verify::Table verify_reductions(const verify::Options& opt) {
  verify::Table table{"canonical reductions, hashing, RNG (docs/NUMERICS.md)",
                      {"check", "cases", "mismatches", "detail"},
                      {}};
  const double effort = std::max(opt.effort, 0.01);
  const std::uint64_t seed = opt.seed;

  // Lengths: the edges of a lane row, a chunk and a level, plus random ones.
  std::vector<std::size_t> ns = {0, 1, 31, 32, 33, 4095, 4096, 4097, 8193, 131073};
  const int random_lengths = std::max(1, static_cast<int>(std::lround(12 * effort)));
  for (int i = 0; i < random_lengths; ++i) {
    const double u = static_cast<double>(mix64(seed + static_cast<std::uint64_t>(i)) >> 11) * 0x1p-53;
    ns.push_back(static_cast<std::size_t>(std::exp(u * std::log(3e5))));
  }

  // 1. fast == reference, per kind.
  std::array<Count, 5> vs_ref;
  Count threads, rows, nan;
  const std::array<int, 4> thread_counts = {1, 2, 7, std::max(opt.threads, 0)};
  for (std::size_t n : ns) {
    for (int p = 0; p < kProfiles; ++p) {
      const std::uint64_t s = mix64(seed ^ (n * 131 + static_cast<std::uint64_t>(p)));
      const std::vector<float> x = make(p, s, n), y = make(p, s + 1, n);
      for (Kind k : kKinds) {
        const std::uint32_t want = bits_of(reference(k, x.data(), y.data(), n));
        const std::string what = fmt::format("{} n={} profile {}", kind_name(k), n, p);
        vs_ref[static_cast<std::size_t>(k)].check(bits_of(fast(k, x.data(), y.data(), n)) == want,
                                                  what);
        for (int th : thread_counts)
          threads.check(bits_of(parallel(k, x.data(), y.data(), n, th)) == want,
                        what + fmt::format(" threads={}", th));
        if (std::isnan(float_of(want))) nan.check(want == rd::kCanonicalNaN, what);
      }
    }
  }
  for (Kind k : kKinds) {
    const Count& c = vs_ref[static_cast<std::size_t>(k)];
    add_row(table, fmt::format("{} fast == reference", kind_name(k)), c, c.mismatches == 0);
  }
  add_row(table, "all kinds, threads 1/2/7/opt == reference", threads, threads.mismatches == 0);
  add_row(table, "NaN results are the canonical NaN", nan, nan.mismatches == 0 && nan.cases > 0);

  // Conventions (docs/NUMERICS.md): identities, signed zeros, inf - inf.
  {
    Count conv;
    const float nz = float_of(0x80000000u), pz = 0.0f, inf = float_of(0x7F800000u);
    const std::vector<float> negzeros(40, nz), mixed = {nz, pz, nz}, infs = {inf, 1.0f, -inf};
    for (const auto& [what, got, want] : std::vector<std::tuple<const char*, float, std::uint32_t>>{
             {"empty sum +0", rd::sum(nullptr, 0), 0x00000000u},
             {"empty max -inf", rd::max(nullptr, 0), 0xFF800000u},
             {"empty min +inf", rd::min(nullptr, 0), 0x7F800000u},
             {"sum of -0s is +0", rd::sum(negzeros.data(), 40), 0x00000000u},
             {"max(-0,+0,-0) = +0", rd::max(mixed.data(), 3), 0x00000000u},
             {"min(-0,+0,-0) = -0", rd::min(mixed.data(), 3), 0x80000000u},
             {"reference max(-0,+0,-0) = +0", rd::ref::max(mixed.data(), 3), 0x00000000u},
             {"reference min(-0,+0,-0) = -0", rd::ref::min(mixed.data(), 3), 0x80000000u},
             {"inf + -inf = canonical NaN", rd::sum(infs.data(), 3), rd::kCanonicalNaN}})
      conv.check(bits_of(got) == want, what);
    add_row(table, "conventions (empty, signed zeros, inf - inf)", conv, conv.mismatches == 0);
  }

  // 2. Row-wise: rows spread over threads, each row its own reduction.
  for (std::size_t n : {std::size_t{1}, std::size_t{768}, std::size_t{5000}, std::size_t{70001}}) {
    const std::size_t r = std::max<std::size_t>(1, static_cast<std::size_t>(60000.0 * effort) / n),
                      ld = n + 3;
    const std::vector<float> x = make(0, seed + n, r * ld), y = make(0, seed + n + 1, r * ld),
                             z = make(5, seed + n + 2, r * ld);
    for (int th : thread_counts) {
      std::vector<float> s(r), m(r), d(r);
      rd::sum_rows(x.data(), r, n, ld, s.data(), th);
      rd::max_rows(z.data(), r, n, ld, m.data(), th);
      rd::dot_rows(x.data(), ld, y.data(), ld, r, n, d.data(), th);
      for (std::size_t i = 0; i < r; ++i) {
        const float* xi = x.data() + i * ld;
        const float* yi = y.data() + i * ld;
        const float* zi = z.data() + i * ld;
        const std::string what = fmt::format("n={} row {} threads={}", n, i, th);
        rows.check(bits_of(s[i]) == bits_of(rd::ref::sum(xi, n)), "sum_rows " + what);
        rows.check(bits_of(m[i]) == bits_of(rd::ref::max(zi, n)), "max_rows " + what);
        rows.check(bits_of(d[i]) == bits_of(rd::ref::dot(xi, yi, n)), "dot_rows " + what);
      }
    }
  }
  add_row(table, "sum/max/dot_rows, threads 1/2/7/opt == reference", rows, rows.mismatches == 0);

  // 3. The order is not vacuous: other orders give other bits on most inputs.
  struct Wrong {
    const char* name;
    std::size_t lanes, chunk;
    std::vector<std::size_t> tree;
  };
  const Wrong wrongs[] = {{"naive left-to-right sum", 1, 4096, {}},
                          {"tree levels 16/8 swapped", 32, 4096, {8, 16, 4, 2, 1}},
                          {"16 lanes", 16, 4096, {8, 4, 2, 1}},
                          {"chunk 2048", 32, 2048, {16, 8, 4, 2, 1}}};
  const int trials = std::max(40, static_cast<int>(100 * effort));
  for (const Wrong& w : wrongs) {
    Count same;  // a "mismatch" here: the wrong order happened to give the canonical bits
    for (int i = 0; i < trials; ++i) {
      const std::size_t n = 5000 + static_cast<std::size_t>(i) * 37;
      const std::vector<float> x = make(0, seed + 77 + static_cast<std::uint64_t>(i), n);
      same.check(bits_of(sum_in_order(x.data(), n, w.lanes, w.chunk, w.tree)) !=
                     bits_of(rd::sum(x.data(), n)),
                 fmt::format("n={}", n));
    }
    const double differ = 1.0 - static_cast<double>(same.mismatches) / static_cast<double>(same.cases);
    add_row(table, fmt::format("other order, other bits: {}", w.name), same, differ > 0.25,
            fmt::format("differs on {:.0f}%", 100 * differ));
  }
  {
    Count model;
    for (int i = 0; i < trials; ++i) {
      const std::size_t n = 5000 + static_cast<std::size_t>(i) * 37;
      const std::vector<float> x = make(0, seed + 77 + static_cast<std::uint64_t>(i), n);
      model.check(bits_of(sum_in_order(x.data(), n, 32, 4096, {16, 8, 4, 2, 1})) ==
                      bits_of(rd::sum(x.data(), n)),
                  fmt::format("n={}", n));
    }
    add_row(table, "order model, canonical parameters == sum", model, model.mismatches == 0);
  }

  // 4. Hash known answers (Python xxhash 4.1.0, tests/reduce/golden.py --hash).
  {
    Count kat;
    const float small[6] = {1.0f, float_of(0x80000000u), 0.0f, float_of(0x7FC00000u),
                            float_of(0xFF800000u), 3.14159f};
    const std::int64_t s23[] = {2, 3}, s32[] = {3, 2};
    kat.check(hash_bytes("", 0) == 0x2d06800538d394c2ull, "empty");
    kat.check(hash_bytes("lockstep", 8) == 0x2f270043200950ecull, "\"lockstep\"");
    kat.check(hash_bits(small, 6) == 0x281dbe944e050aafull, "small floats");
    kat.check(hash_bytes(small, sizeof small, 12345) == 0x6fe535627bf92a85ull, "seeded");
    kat.check(hash_tensor(HashDType::f32, s23, small) == 0x40d24c0aaef64f57ull, "f32 [2,3]");
    kat.check(hash_tensor(HashDType::f32, s32, small) == 0xa4173c033bad04d6ull, "f32 [3,2]");
    kat.check(hash_tensor(HashDType::i32, s23, small) == 0xcc42f11619a57431ull, "i32 [2,3]");
    add_row(table, "hash KAT (XXH3-64, tensor records)", kat, kat.mismatches == 0);

    Count flips;
    const std::vector<float> x = make(0, seed + 5, 1000);
    const std::uint64_t h0 = hash_bits(x.data(), x.size());
    std::vector<float> y = x;
    const int nflips = std::max(100, static_cast<int>(4000 * effort));
    for (int f = 0; f < nflips; ++f) {
      const std::uint64_t r = mix64(seed + 99 + static_cast<std::uint64_t>(f));
      const std::size_t i = r % x.size();
      y[i] = float_of(bits_of(x[i]) ^ (1u << ((r >> 32) % 32)));
      flips.check(hash_bits(y.data(), y.size()) != h0, fmt::format("element {}", i));
      y[i] = x[i];
    }
    add_row(table, "hash: one-bit flips change the hash", flips, flips.mismatches == 0);
  }

  // 5. Philox4x32-10 known answers (Random123 kat_vectors) and split invariance.
  {
    Count kat;
    struct Kat {
      rng::Block ctr;
      std::uint32_t k0, k1;
      rng::Block want;
    };
    const Kat kats[] = {
        {{{0, 0, 0, 0}}, 0, 0, {{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}}},
        {{{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}},
         0xffffffffu,
         0xffffffffu,
         {{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}}},
        {{{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}},
         0xa4093822u,
         0x299f31d0u,
         {{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}}},
    };
    for (const Kat& k : kats) {
      const rng::Block got = rng::philox4x32_10(k.ctr, k.k0, k.k1);
      for (int w = 0; w < 4; ++w) kat.check(got.w[w] == k.want.w[w], fmt::format("word {}", w));
    }
    add_row(table, "philox KAT (Random123 philox4x32_10)", kat, kat.mismatches == 0);

    Count split;
    const std::size_t n = std::max<std::size_t>(1000, static_cast<std::size_t>(1e6 * effort));
    std::vector<float> v(n);
    std::uint64_t first_hash = 0;
    for (int th : thread_counts) {
      rng::fill_uniform(v.data(), n, seed, 1, 0, -1.0f, 1.0f, th);
      const std::uint64_t h = hash_bits(v.data(), n);
      if (th == 1) first_hash = h;
      split.check(h == first_hash, fmt::format("uniform, threads={}", th));
      rng::fill_normal(v.data(), n / 4, seed, 2, 3, 0.0f, 1.0f, th);
      const std::uint64_t hn = hash_bits(v.data(), n / 4);
      std::vector<float> one(n / 4);
      // fill_normal's definition: fma(stddev, normal, mean) (turns a -0 into +0).
      for (std::size_t i = 0; i < n / 4; ++i)
        one[i] = fma_rn(1.0f, rng::normal(seed, 2, 3 + i), 0.0f);
      split.check(hn == hash_bits(one.data(), one.size()), fmt::format("normal, threads={}", th));
    }
    add_row(table, "rng: uniform/normal identical for threads 1/2/7/opt", split,
            split.mismatches == 0);
  }
  return table;
}

}  // namespace lockstep::num
