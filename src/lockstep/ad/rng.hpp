// The random source of the gradient checker: test inputs and cotangents.
//
// Not the engine's RNG (that is the counter-based Philox in num/rng.hpp, for
// initialization and dropout). This one only has to be reproducible from a
// printed seed on the same build: std::mt19937_64 (fully specified by the C++
// standard) and our own uniform/normal transforms (std::normal_distribution is
// implementation-defined, so it is not used).
#pragma once

#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <string_view>

#include "lockstep/tensor/tensor.hpp"

namespace lockstep::ad {

// SplitMix64 finalizer: a bijective 64-bit mixer.
inline std::uint64_t mix64(std::uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The seed of one check: a function of the run's seed, a tag (op and check
// name) and an index, so every check draws the same data however many other
// checks run before it.
inline std::uint64_t derive_seed(std::uint64_t seed, std::string_view tag, std::uint64_t index) {
  std::uint64_t h = 0xCBF29CE484222325ull;  // FNV-1a over the tag
  for (char c : tag) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001B3ull;
  return mix64(mix64(seed ^ h) + index);
}

// The seed of a test run: $LOCKSTEP_SEED when set (to reproduce a run), else
// fresh from the clock, so every run draws new inputs. Callers print it.
inline std::uint64_t seed_from_env(const char* var = "LOCKSTEP_SEED") {
  if (const char* s = std::getenv(var); s && *s) return std::stoull(s, nullptr, 0);
  return mix64(static_cast<std::uint64_t>(
             std::chrono::steady_clock::now().time_since_epoch().count())) | 1u;
}

class Rng {
 public:
  explicit Rng(std::uint64_t seed) : g_(seed) {}

  std::uint64_t next() { return g_(); }
  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(g_() >> 11) * 0x1p-53; }
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  // Uniform integer in [0, n) (n >= 1; the modulo bias is irrelevant here).
  std::size_t below(std::size_t n) { return static_cast<std::size_t>(g_() % n); }
  // Standard normal by Box-Muller (one value per call, the cosine branch).
  double normal() {
    const double u1 = 1.0 - uniform();  // (0, 1]
    const double u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * 3.14159265358979323846 * u2);
  }

  Tensor<double> normal(Shape shape, double scale = 1.0) {
    Tensor<double> t(std::move(shape));
    for (double& v : t.data) v = scale * normal();
    return t;
  }
  Tensor<double> uniform(Shape shape, double lo, double hi) {
    Tensor<double> t(std::move(shape));
    for (double& v : t.data) v = uniform(lo, hi);
    return t;
  }

 private:
  std::mt19937_64 g_;
};

}  // namespace lockstep::ad
