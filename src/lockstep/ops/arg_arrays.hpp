// Host arrays for an op's kernel args (ops/kernel_args.hpp), built from the
// args' fields without knowing the op: what the GPU gate driver
// (backend/cuda/gate_driver.cpp) and the CPU-kernel bit tests
// (tests/model/cpu_kernels_test.cpp) allocate, seed, bind and compare.
#pragma once

#include <algorithm>
#include <cstddef>
#include <stdexcept>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "lockstep/ad/rng.hpp"
#include "lockstep/ops/kernel_args.hpp"

namespace lockstep::ops {

// --- seeding (Seed) ------------------------------------------------------------

inline void seed_normal(const Seed& s, ad::Rng& rng, float* v, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    float x = static_cast<float>(s.scale * rng.normal());
    switch (rng.below(48)) {
      case 0: x = -0.0f; break;
      case 1: x = 0.0f; break;
      case 2:
        if (s.large > 0) x = s.large * static_cast<float>(rng.uniform(0.5, 1.0));
        break;
      case 3:
        if (s.large > 0) x = -s.large * static_cast<float>(rng.uniform(0.5, 1.0));
        break;
      default: break;
    }
    if (s.neg_zero_every > 0 && i % s.neg_zero_every == 0) x = -0.0f;
    v[i] = x;
  }
}

inline void seed_floats(const Seed& s, ad::Rng& rng, float* v, std::size_t n) {
  using K = Seed::Kind;
  switch (s.kind) {
    case K::normal: return seed_normal(s, rng, v, n);
    case K::uniform:
      for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<float>(rng.uniform(s.lo, s.hi));
      return;
    case K::norm_rows: {
      // Rows of very different scales: ordinary, large (1e15), tiny (1e-20),
      // a constant row (variance 0: rstd = 1/sqrt(eps)), a large mean.
      seed_normal(Seed::normal(), rng, v, n);
      const std::size_t D = std::max<std::size_t>(1, s.row);
      for (std::size_t i = 0; i < n; ++i) {
        const std::size_t kind = (i / D) % 7;
        if (kind == 2) v[i] = v[i] * 1e15f;
        if (kind == 4) v[i] = v[i] * 1e-20f;
        if (kind == 5) v[i] = 3.25f;
        if (kind == 6) v[i] = v[i] + 100.0f;
      }
      return;
    }
    case K::logit_rows: {
      // Huge logits (exp(z - m) underflows to 0 but at the max), a spread
      // over most of exp's range, and rows far below 0.
      seed_normal(Seed::normal(3.0), rng, v, n);
      const std::size_t V = std::max<std::size_t>(1, s.row);
      for (std::size_t i = 0; i < n; ++i) {
        const std::size_t kind = (i / V) % 5;
        if (kind == 1) v[i] = v[i] * 1e30f;
        if (kind == 3) v[i] = v[i] * 30.0f;
        if (kind == 4) v[i] = v[i] - 80.0f;
      }
      return;
    }
    case K::token_ids:
    case K::targets: break;
  }
  throw std::logic_error("seed: an index seed for a float argument");
}

inline void seed_ids(const Seed& s, ad::Rng& rng, Index* v, std::size_t n) {
  const std::size_t V = std::max<std::size_t>(1, s.row);
  if (s.kind == Seed::Kind::token_ids) {
    // Few distinct ids so rows repeat (long chains), the last id included.
    const std::size_t distinct = std::max<std::size_t>(1, std::min(V, n / 3 + 1));
    for (std::size_t i = 0; i < n; ++i)
      v[i] = static_cast<Index>(rng.below(2) ? rng.below(V) : V - 1 - rng.below(distinct) % V);
    return;
  }
  if (s.kind == Seed::Kind::targets) {
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t r = rng.below(8);
      v[i] = r == 0   ? -1
             : r == 1 ? static_cast<Index>(V - 1)
             : r == 2 ? 0
                      : static_cast<Index>(rng.below(V));
    }
    if (n > 2) v[1] = -100;  // the conventional ignore index
    return;
  }
  throw std::logic_error("seed: a float seed for an index argument");
}

// --- the arguments of one call ---------------------------------------------------

// One argument: its field and its host cells (lead cells first).
struct HostArray {
  Field field;
  bool index = false;
  std::vector<float> f;
  std::vector<Index> i;
  std::size_t cells() const { return field.count == 0 ? 0 : field.lead + field.count; }
};

// One array per field of `proto` (an Op::FwdArgs/BwdArgs), in field order.
template <class Array = HostArray, class Args, class Config>
std::vector<Array> arrays_of(const Config& c, Args proto) {
  std::vector<Array> v;
  for_each_arg(proto, c, [&](const Field& fd, auto& p) {
    Array a;
    a.field = fd;
    a.index = std::is_same_v<std::remove_cvref_t<decltype(*p)>, Index>;
    v.push_back(std::move(a));
  });
  return v;
}

template <class Array>
Array* find(std::vector<Array>& arrs, std::string_view name) {
  for (Array& a : arrs)
    if (a.field.name == name) return &a;
  return nullptr;
}

// Host cells: inputs seeded (in field order, from rng), every other cell
// (outputs, saved values, lead cells) `fill`.
inline void prepare(HostArray& a, ad::Rng& rng, float fill) {
  const std::size_t n = a.cells();
  if (a.index) {
    a.i.assign(n, 0);
    if (a.field.role == Role::in && n > 0) seed_ids(a.field.seed, rng, a.i.data() + a.field.lead, a.field.count);
    return;
  }
  a.f.assign(n, fill);
  if (a.field.role == Role::in && n > 0) seed_floats(a.field.seed, rng, a.f.data() + a.field.lead, a.field.count);
}

// The args with their pointers into the host arrays (null for an absent
// one); with `alias`, every output that may alias an input points into that
// input's array.
template <class Args, class Config, class Array>
Args bind_host(const Config& c, Args a, std::vector<Array>& arrs, bool alias = false) {
  std::size_t k = 0;
  for_each_arg(a, c, [&](const Field&, auto& p) {
    Array* x = &arrs[k++];
    if (x->cells() == 0) {
      p = nullptr;
      return;
    }
    if (alias && !x->field.may_alias.empty()) x = find(arrs, x->field.may_alias);
    if constexpr (std::is_same_v<std::remove_cvref_t<decltype(*p)>, Index>) p = x->i.data() + x->field.lead;
    else p = x->f.data() + x->field.lead;
  });
  return a;
}

template <class Array>
bool has_alias(const std::vector<Array>& arrs) {
  for (const Array& a : arrs)
    if (a.field.role == Role::out && !a.field.may_alias.empty()) return true;
  return false;
}

}  // namespace lockstep::ops
