// The int8 GEMM's dispatch (int8_gemm.hpp): the gates' verdict per
// implementation, the start-up race per shape class, and the call.
#include "lockstep/backend/cuda/int8_gemm.hpp"

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <optional>
#include <stdexcept>

#include <fmt/format.h>

#include "lockstep/backend/cuda/device.hpp"
#include "lockstep/backend/cuda/gate.hpp"
#include "lockstep/backend/cuda/mutant.hpp"
#include "lockstep/ops/quant.hpp"

namespace lockstep::cuda {
namespace {

// The gate cases call int8_gate_record while int8_selection may be running
// them: one recursive lock for both.
std::recursive_mutex g_mu;
std::array<gate::Tally, kInt8Impls> g_records;
std::optional<Int8Selection> g_selection;
int g_forced = -1;  // int8_gemm_force
// A change of mutant (mutant.hpp) starts the records again.
MutantWatch g_mutant_watch;
void forget_if_mutant_changed() {
  if (!g_mutant_watch.changed()) return;
  g_records = {};
  g_selection.reset();
}

int index_of(Int8Impl i) { return static_cast<int>(i); }
Int8Impl impl_at(int i) { return static_cast<Int8Impl>(i); }

bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

// The kernel-level bug the active mutant plants in `impl` (mutant.hpp).
int planted(Int8Impl impl) {
  const Mutant m = mutant();
  if (impl == Int8Impl::dp4a && m == Mutant::int8_dp4a_int16_accumulator) return launch::kInt8Dp4aInt16;
  if (impl == Int8Impl::imma_128x128 || impl == Int8Impl::imma_128x256) {
    if (m == Mutant::int8_imma_k_tail_dropped) return launch::kInt8ImmaKTailDropped;
    if (m == Mutant::int8_imma_last_column_skipped) return launch::kInt8ImmaLastColumn;
  }
  return launch::kInt8Clean;
}

// The race's shape for each class (Int8Class order): GPT-2-like products.
struct RaceShape {
  std::size_t N, M, K;
};
constexpr std::array<RaceShape, kInt8Classes> kRaceShapes = {{
    {256, 768, 768},     // small
    {2048, 2304, 768},   // medium
    {8192, 3072, 768},   // large
    {256, 768, 767},     // small, K % 16 != 0
    {2048, 2304, 767},   // medium, K % 16 != 0
    {8192, 3072, 767},   // large, K % 16 != 0
}};

// How many int8 gate cases each implementation has.
std::array<int, kInt8Impls> expected_cases(const std::vector<gate::Case>& cases) {
  std::array<int, kInt8Impls> n{};
  for (const gate::Case& c : cases)
    for (int i = 0; i < kInt8Impls; ++i)
      if (c.kernel == fmt::format("int8_gemm_nt {}", int8_impl_name(impl_at(i)))) ++n[i];
  return n;
}

void race(Int8Selection& s) {
  std::size_t maxA = 0, maxB = 0, maxC = 0;
  for (const RaceShape& r : kRaceShapes) {
    maxA = std::max(maxA, r.N * r.K);
    maxB = std::max(maxB, r.M * r.K);
    maxC = std::max(maxC, r.N * r.M);
  }
  DeviceBuffer<std::int8_t> a((maxA + 3) / 4 * 4), b((maxB + 3) / 4 * 4);
  DeviceBuffer<std::int32_t> c(maxC);
  // Codes of both signs up to ±127 (the timing does not depend on them much).
  fill_words(a.data(), 0x81237F05u, a.size() / 4);
  fill_words(b.data(), 0x7F8103E1u, b.size() / 4);
  for (int cl = 0; cl < kInt8Classes; ++cl) {
    const RaceShape& r = kRaceShapes[cl];
    double best = -1, best_own = -1;
    for (int i = 0; i < kInt8Impls; ++i) {
      s.tops[cl][i] = -1;
      if (!s.admitted[i]) continue;
      const double ms = launch::int8_time_ms(i, a.data(), b.data(), c.data(), r.N, r.M, r.K, 3);
      if (ms <= 0) continue;
      const double tops = 2.0 * static_cast<double>(r.N) * static_cast<double>(r.M) * static_cast<double>(r.K) /
                          (ms * 1e-3) * 1e-12;
      s.tops[cl][i] = tops;
      if (tops > best) {
        best = tops;
        s.choice[cl] = impl_at(i);
      }
      if (int8_is_own(impl_at(i)) && tops > best_own) {
        best_own = tops;
        s.own[cl] = impl_at(i);
      }
    }
  }
}

std::string report_of(const Int8Selection& s) {
  std::string line = "int8 GEMM (CUDA):";
  for (int cl = 0; cl < kInt8Classes; ++cl) {
    const int i = index_of(s.choice[cl]);
    line += fmt::format(" {} {} ({:.0f} TOPS{})", int8_class_name(static_cast<Int8Class>(cl)),
                        int8_impl_name(s.choice[cl]), s.tops[cl][i],
                        s.choice[cl] == s.own[cl] ? ""
                                                  : fmt::format("; own: {} {:.0f}", int8_impl_name(s.own[cl]),
                                                                s.tops[cl][index_of(s.own[cl])]));
    line += cl + 1 < kInt8Classes ? "," : ";";
  }
  const int lt = index_of(Int8Impl::cublaslt);
  line += s.admitted[lt] ? fmt::format(" cublasLt admitted for K % 4 == 0, M % 4 == 0, 16-byte aligned operands ({} "
                                       "gate outcomes exact)",
                                       s.cases_passed[lt])
                         : fmt::format(" cublasLt not admitted ({})", s.refused[lt]);
  std::string refused;
  for (int i = 0; i < kInt8Impls; ++i)
    if (int8_is_own(impl_at(i)) && !s.admitted[i])
      refused += fmt::format("{}{}: {}", refused.empty() ? "" : "; ", int8_impl_name(impl_at(i)), s.refused[i]);
  line += refused.empty() ? "; every own kernel gated exact" : "; refused: " + refused;
  return line;
}

void launch_own(Int8Impl impl, const std::int8_t* A, const std::int8_t* B, std::int32_t* C, std::size_t N,
                std::size_t M, std::size_t K, cudaStream_t stream) {
  if (impl == Int8Impl::dp4a) launch::int8_dp4a(A, B, C, N, M, K, stream, planted(impl));
  else launch::int8_imma(impl == Int8Impl::imma_128x128 ? 0 : 1, A, B, C, N, M, K, stream, planted(impl));
}

}  // namespace

std::string_view int8_impl_name(Int8Impl impl) {
  switch (impl) {
    case Int8Impl::dp4a: return "dp4a";
    case Int8Impl::imma_128x128: return "imma 128x128";
    case Int8Impl::imma_128x256: return "imma 128x256";
    case Int8Impl::cublaslt: return "cublasLt";
  }
  return "?";
}

bool int8_is_own(Int8Impl impl) { return impl != Int8Impl::cublaslt; }

std::string_view int8_class_name(Int8Class c) {
  switch (c) {
    case Int8Class::small: return "small";
    case Int8Class::medium: return "medium";
    case Int8Class::large: return "large";
    case Int8Class::small_ragged: return "small ragged-K";
    case Int8Class::medium_ragged: return "medium ragged-K";
    case Int8Class::large_ragged: return "large ragged-K";
  }
  return "?";
}

Int8Class int8_class_of(const void* A, const void* B, std::size_t N, std::size_t M, std::size_t K) {
  const double ops = static_cast<double>(N) * static_cast<double>(M) * static_cast<double>(K);
  const int size = ops < 0x1p28 ? 0 : ops < 0x1p33 ? 1 : 2;
  const bool ragged = K % 16 != 0 || !aligned16(A) || !aligned16(B);
  return static_cast<Int8Class>(size + (ragged ? 3 : 0));
}

void int8_check_shape(std::size_t N, std::size_t M, std::size_t K) {
  if (K > ops::kMaxQuantK)
    throw std::invalid_argument(fmt::format("int8_gemm_nt: K {} > {} for the product N {} M {} K {}: int32 sums could "
                                            "overflow",
                                            K, ops::kMaxQuantK, N, M, K));
}

std::string int8_gemm_nt_with(Int8Impl impl, const std::int8_t* A, const std::int8_t* B, std::int32_t* C,
                              std::size_t N, std::size_t M, std::size_t K, cudaStream_t stream) {
  int8_check_shape(N, M, K);
  if (impl == Int8Impl::cublaslt) return launch::int8_cublaslt(A, B, C, N, M, K, stream);
  launch_own(impl, A, B, C, N, M, K, stream);
  return "";
}

void int8_gemm_nt(const std::int8_t* A, const std::int8_t* B, std::int32_t* C, std::size_t N, std::size_t M,
                  std::size_t K, cudaStream_t stream) {
  int8_check_shape(N, M, K);
  if (N == 0 || M == 0) return;
  if (g_forced >= 0) {
    const Int8Impl f = impl_at(g_forced);
    if (f == Int8Impl::cublaslt && *launch::int8_cublaslt(A, B, C, N, M, K, stream) == '\0') return;
    launch_own(f == Int8Impl::cublaslt ? Int8Impl::dp4a : f, A, B, C, N, M, K, stream);
    return;
  }
  const Int8Selection& s = int8_selection();
  const int cl = static_cast<int>(int8_class_of(A, B, N, M, K));
  if (s.choice[cl] == Int8Impl::cublaslt && *launch::int8_cublaslt(A, B, C, N, M, K, stream) == '\0') return;
  launch_own(s.own[cl], A, B, C, N, M, K, stream);
}

void int8_gate_record(Int8Impl impl, const std::string& difference, const std::string& where) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  forget_if_mutant_changed();
  g_records[index_of(impl)].add(difference, where);
  if (!difference.empty()) g_selection.reset();  // a failure after the race: choose again without it
}

void int8_gemm_force(int impl) {
  if (impl >= kInt8Impls) throw std::invalid_argument("int8_gemm_force: no implementation " + std::to_string(impl));
  g_forced = impl;
}

void int8_selection_reset() {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  g_records = {};
  g_selection.reset();
}

const Int8Selection& int8_selection() {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  forget_if_mutant_changed();
  if (g_selection) return *g_selection;
  const std::vector<gate::Case> cases = gate::cases_of({"int8_gemm"});
  const std::array<int, kInt8Impls> expected = expected_cases(cases);
  bool complete = true;
  for (int i = 0; i < kInt8Impls; ++i)
    complete = complete && (g_records[i].failed > 0 || g_records[i].passed >= expected[i]);
  if (!complete) {
    // Start-up did not run the int8 gates (a process that uses the GEMM
    // without a model): run them now, clean and poisoned; they record here
    // (inside another gate case too: an op over the GEMM).
    g_records = {};
    gate::run_for_records(cases);
  }
  Int8Selection s;
  bool own = false;
  for (int i = 0; i < kInt8Impls; ++i) {
    const gate::Tally& r = g_records[i];
    s.cases_passed[i] = r.passed;
    s.admitted[i] = r.failed == 0 && expected[i] > 0 && r.passed >= expected[i];
    s.refused[i] = r.failed > 0 ? r.first_failure : s.admitted[i] ? "" : "no gate case ran";
    own = own || (s.admitted[i] && int8_is_own(impl_at(i)));
  }
  if (!own) {
    std::string why;
    for (int i = 0; i < kInt8Impls; ++i)
      why += fmt::format("{}{}: {}", i == 0 ? "" : "; ", int8_impl_name(impl_at(i)), s.refused[i]);
    throw std::runtime_error("int8 GEMM (CUDA): no kernel of lockstep's passed its gates: " + why);
  }
  race(s);
  s.report = report_of(s);
  g_selection = std::move(s);
  return *g_selection;
}

std::string int8_report() { return int8_selection().report; }

}  // namespace lockstep::cuda
