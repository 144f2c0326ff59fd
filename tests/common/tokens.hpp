// Token ids for tests that need a batch and not a corpus: seeded, uniform
// below the vocabulary (Philox, num/rng.hpp: the same ids on every machine).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "lockstep/num/rng.hpp"

namespace lockstep::test {

inline std::vector<std::int32_t> tokens(std::size_t n, std::int64_t vocab, std::uint64_t stream) {
  std::vector<std::int32_t> t(n);
  for (std::size_t i = 0; i < n; ++i)
    t[i] = static_cast<std::int32_t>(num::rng::bits32(42, stream, i) % static_cast<std::uint32_t>(vocab));
  return t;
}

}  // namespace lockstep::test
