// The seed of a randomized test binary: $LOCKSTEP_SEED when set (to reproduce
// a run), else fresh from the clock (ad::seed_from_env), printed once so a
// failing run can be replayed.
#pragma once

#include <cstdint>
#include <cstdio>

#include "lockstep/ad/rng.hpp"

namespace lockstep::test {

inline std::uint64_t test_seed() {
  static const std::uint64_t s = [] {
    const std::uint64_t v = ad::seed_from_env();
    std::printf("seed %llu (LOCKSTEP_SEED=%llu reproduces)\n", static_cast<unsigned long long>(v),
                static_cast<unsigned long long>(v));
    return v;
  }();
  return s;
}

}  // namespace lockstep::test
