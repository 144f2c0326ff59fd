#include "lockstep/infer/sample.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <stdexcept>

#include <fmt/format.h>

#include "lockstep/num/rng.hpp"
#include "lockstep/ops/softmax.hpp"

namespace lockstep::infer {

void SamplingOptions::validate() const {
  if (!(std::isfinite(temperature) && temperature >= 0.0f))
    throw std::invalid_argument(fmt::format("--temperature must be >= 0 (0: greedy), got {}", temperature));
  if (top_k < 0) throw std::invalid_argument(fmt::format("--top-k must be >= 0 (0: no limit), got {}", top_k));
  if (!(top_p > 0.0f && top_p <= 1.0f))
    throw std::invalid_argument(fmt::format("--top-p must be in (0, 1], got {}", top_p));
  if (!(std::isfinite(repetition_penalty) && repetition_penalty > 0.0f))
    throw std::invalid_argument(
        fmt::format("--repetition-penalty must be > 0 (1: none), got {}", repetition_penalty));
  if (repeat_last_n < 0)
    throw std::invalid_argument(fmt::format("--repeat-last-n must be >= 0 (0: all), got {}", repeat_last_n));
}

void apply_repetition_penalty(std::span<float> logits, std::span<const std::int32_t> history, float penalty,
                              std::int32_t last_n) {
  if (penalty == 1.0f) return;
  const std::size_t n = last_n > 0 ? std::min(history.size(), static_cast<std::size_t>(last_n)) : history.size();
  std::vector<bool> done(logits.size(), false);  // each distinct id once
  for (std::size_t i = history.size() - n; i < history.size(); ++i) {
    const std::int32_t id = history[i];
    if (id < 0 || static_cast<std::size_t>(id) >= logits.size() || done[static_cast<std::size_t>(id)]) continue;
    done[static_cast<std::size_t>(id)] = true;
    float& x = logits[static_cast<std::size_t>(id)];
    x = x > 0.0f ? x / penalty : x * penalty;
  }
}

namespace {
void check_logits(std::span<const float> logits) {
  if (logits.empty()) throw std::runtime_error("sampling: no logits");
  for (std::size_t i = 0; i < logits.size(); ++i)
    if (std::isnan(logits[i]) || logits[i] == INFINITY)
      throw std::runtime_error(fmt::format("sampling: logit {} is {}", i, logits[i]));
}
}  // namespace

namespace {
// 8 floats / 8 ids in one value (GCC's and clang's vector extension: the
// compares give -1/0 lanes, which select by bit masks; x86 builds lower it to
// AVX2 or AVX-512 compares and blends, others to whatever they have). No
// function takes or returns one: without AVX that would change the ABI.
typedef float Floats8 __attribute__((vector_size(32)));
typedef std::int32_t Ints8 __attribute__((vector_size(32)));
}  // namespace

std::int32_t argmax(std::span<const float> logits) {
  // Two groups of 8 lanes (lane j sees ids j, j + 16, j + 32, ...), so the
  // compares run as vector instructions: a serial `if (x > best)` chain over a
  // 128,256-id head took ~100 us on the host, the compiler vectorizing none
  // of the scalar forms tried (17 us here; docs/perf/DECODE_CUDA.md §21). Each
  // lane keeps its first maximum (strict >), and the lanes are joined lowest
  // id first on ties, so the answer is the serial loop's: the largest logit,
  // the lowest id among equals (-0 and +0 equal; all -inf: id 0). NaN and +inf
  // are refused in the same pass (a NaN compares false: never a lane's best).
  if (logits.empty()) throw std::runtime_error("sampling: no logits");
  if (logits.size() > static_cast<std::size_t>(INT32_MAX)) throw std::runtime_error("sampling: over 2^31 logits");
  constexpr std::size_t kLanes = 16;
  const std::size_t n = logits.size(), full = n / kLanes * kLanes;
  Floats8 best[2], inf;
  Ints8 at[2], id[2], bad = {};
  for (int j = 0; j < 8; ++j) {
    best[0][j] = best[1][j] = -INFINITY;
    inf[j] = INFINITY;
    at[0][j] = id[0][j] = j;
    at[1][j] = id[1][j] = j + 8;
  }
  for (std::size_t i = 0; i < full; i += kLanes)
    for (int h = 0; h < 2; ++h) {
      Floats8 x;
      std::memcpy(&x, logits.data() + i + 8 * static_cast<std::size_t>(h), sizeof x);
      bad |= ~(x < inf);  // NaN or +inf
      const Ints8 more = x > best[h];
      best[h] = reinterpret_cast<Floats8>((reinterpret_cast<Ints8>(x) & more) |
                                          (reinterpret_cast<Ints8>(best[h]) & ~more));
      at[h] = (id[h] & more) | (at[h] & ~more);
      id[h] += kLanes;
    }
  bool any_bad = false;
  for (int j = 0; j < 8; ++j) any_bad |= bad[j] != 0;
  for (std::size_t i = full; i < n; ++i) any_bad |= !(logits[i] < INFINITY);
  if (any_bad) check_logits(logits);  // names the first bad id
  std::size_t top_id = 0;
  float top = -INFINITY;
  bool any = false;
  if (full > 0)
    for (int h = 0; h < 2; ++h)
      for (int j = 0; j < 8; ++j) {
        const auto a = static_cast<std::size_t>(at[h][j]);
        if (!any || best[h][j] > top || (best[h][j] == top && a < top_id)) {
          top = best[h][j];
          top_id = a;
          any = true;
        }
      }
  for (std::size_t i = full; i < n; ++i)  // the tail's ids follow every lane's
    if (!any || logits[i] > top) {
      top = logits[i];
      top_id = i;
      any = true;
    }
  return static_cast<std::int32_t>(top_id);
}

std::vector<Candidate> candidates(std::span<const float> logits, const SamplingOptions& opt) {
  opt.validate();
  check_logits(logits);
  const std::size_t n = logits.size();
  std::vector<float> z(n);
  const float t = opt.temperature > 0.0f ? opt.temperature : 1.0f;
  for (std::size_t i = 0; i < n; ++i) z[i] = logits[i] / t;

  std::vector<std::int32_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  const auto before = [&](std::int32_t a, std::int32_t b) {
    const float za = z[static_cast<std::size_t>(a)], zb = z[static_cast<std::size_t>(b)];
    return za > zb || (za == zb && a < b);
  };
  const std::size_t k = opt.top_k > 0 ? std::min<std::size_t>(static_cast<std::size_t>(opt.top_k), n) : n;
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(), before);
  order.resize(k);

  std::vector<float> kept(k), p(k);
  for (std::size_t i = 0; i < k; ++i) kept[i] = z[static_cast<std::size_t>(order[i])];
  ops::Softmax::row<float>(kept.data(), p.data(), k);

  std::size_t keep = k;
  if (opt.top_p < 1.0f) {
    float cum = 0.0f;
    for (std::size_t i = 0; i < k; ++i) {
      cum += p[i];
      if (cum >= opt.top_p) {
        keep = i + 1;
        break;
      }
    }
  }
  std::vector<Candidate> out(keep);
  for (std::size_t i = 0; i < keep; ++i) out[i] = {order[i], p[i]};
  return out;
}

std::int32_t sample(std::span<const float> logits, const SamplingOptions& opt, std::uint64_t index,
                    std::span<const std::int32_t> history) {
  opt.validate();
  std::vector<float> penalized;
  if (opt.repetition_penalty != 1.0f && !history.empty()) {
    penalized.assign(logits.begin(), logits.end());
    apply_repetition_penalty(penalized, history, opt.repetition_penalty, opt.repeat_last_n);
    logits = penalized;
  }
  if (opt.temperature == 0.0f) return argmax(logits);
  const std::vector<Candidate> c = candidates(logits, opt);
  float total = 0.0f;
  for (const Candidate& x : c) total += x.p;
  const float target = num::rng::uniform(opt.seed, kSampleStream, index) * total;
  float acc = 0.0f;
  for (const Candidate& x : c) {
    acc += x.p;
    if (target < acc) return x.id;
  }
  return c.back().id;
}

}  // namespace lockstep::infer
