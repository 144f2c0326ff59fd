// int8_gemm_nt: the probe, the start-up gate, the race and the split.
#include "lockstep/backend/cpu/int8_gemm.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "lockstep/ops/quant.hpp"
#include "lockstep/util/parallel.hpp"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && defined(__linux__)
#define LOCKSTEP_INT8_PROBE 1
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace lockstep::cpu::int8 {
namespace {

void check_shape(std::size_t N, std::size_t M, std::size_t K) {
  if (K > ops::kMaxQuantK)
    throw std::invalid_argument("int8 GEMM " + std::to_string(N) + "×" + std::to_string(M) + "×" +
                                std::to_string(K) + ": K = " + std::to_string(K) + " exceeds " +
                                std::to_string(ops::kMaxQuantK) + ", the bound for exact int32 accumulation");
}

#if defined(LOCKSTEP_INT8_PROBE)
std::uint64_t xcr0() {
  std::uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<std::uint64_t>(hi) << 32) | lo;
}

// Linux's arch_prctl codes (asm/prctl.h) and the tile data's xfeature number.
constexpr long kArchGetXcompPerm = 0x1022, kArchReqXcompPerm = 0x1023;
constexpr int kXfeatureXtiledata = 18;

bool request_tile_permission() {
  if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) != 0) return false;
  unsigned long granted = 0;
  if (syscall(SYS_arch_prctl, kArchGetXcompPerm, &granted) != 0) return false;
  return (granted >> kXfeatureXtiledata) & 1u;
}
#endif

}  // namespace

Machine probe_machine(bool refuse_amx_permission) {
  Machine m;
#if defined(LOCKSTEP_INT8_PROBE)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !((c >> 27) & 1u)) return m;  // no OSXSAVE: no xgetbv
  const std::uint64_t os = xcr0();
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return m;
  const bool avx512f = (b >> 16) & 1u, avx512bw = (b >> 30) & 1u, vnni = (c >> 11) & 1u;
  const bool zmm_state = (os & 0xE6u) == 0xE6u;  // SSE, AVX, opmask, ZMM_Hi256, Hi16_ZMM
  m.vnni = avx512f && avx512bw && vnni && zmm_state;
  const bool amx_tile = (d >> 24) & 1u, amx_int8 = (d >> 25) & 1u;
  const bool tile_state = ((os >> 17) & 3u) == 3u;  // XTILECFG, XTILEDATA
  m.amx_cpu = amx_tile && amx_int8 && tile_state;
  if (m.amx_cpu && !refuse_amx_permission) m.amx_permitted = request_tile_permission();
#else
  (void)refuse_amx_permission;
#endif
  return m;
}

Candidates candidates_for(const Machine& machine) {
  Candidates c;
  c.impls.push_back(scalar_impl());
  const Impl amx = amx_impl();
  for (const Impl& vnni : {vnni_impl(), vnni_dot_impl()}) {
    if (!vnni.kernel)
      c.unavailable.push_back(std::string(vnni.name) + ": not compiled for this target");
    else if (!machine.vnni)
      c.unavailable.push_back(std::string(vnni.name) + ": cpu lacks avx512_vnni");
    else
      c.impls.push_back(vnni);
  }
  if (!amx.kernel)
    c.unavailable.push_back("amx: not compiled for this target");
  else if (!machine.amx_cpu)
    c.unavailable.push_back("amx: cpu lacks amx_int8");
  else if (!machine.amx_permitted)
    c.unavailable.push_back("amx: tile permission refused");
  else
    c.impls.push_back(amx);
  return c;
}

// ~4M and ~134M multiply-adds: a decode step's projection is small, a batch
// of 64 tokens medium, training batches large.
ShapeClass shape_class(std::size_t N, std::size_t M, std::size_t K) {
  const double work = static_cast<double>(N) * static_cast<double>(M) * static_cast<double>(K);
  if (work < 4194304.0) return ShapeClass::small;
  if (work < 134217728.0) return ShapeClass::medium;
  return ShapeClass::large;
}

const char* shape_class_name(ShapeClass c) {
  switch (c) {
    case ShapeClass::small: return "small";
    case ShapeClass::medium: return "medium";
    case ShapeClass::large: return "large";
  }
  return "?";
}

void run(Kernel kernel, const std::int8_t* A, const std::int8_t* B, std::int32_t* C, std::size_t N, std::size_t M,
         std::size_t K, int threads) {
  check_shape(N, M, K);
  if (N == 0 || M == 0) return;
  const int t = util::resolve_threads(threads);
  constexpr std::size_t kRowGrain = 32, kColBlock = 64;
  if (N >= kRowGrain * static_cast<std::size_t>(t) || N >= M) {
    // Rows: each piece packs B itself (M·K bytes, small beside its share of N·M·K).
    util::parallel_for(N, t, kRowGrain, [&](std::size_t lo, std::size_t hi) {
      kernel(A + lo * K, B, C + lo * M, hi - lo, M, K, M);
    });
  } else {
    // Few rows (a decode step): blocks of 64 columns.
    const std::size_t blocks = (M + kColBlock - 1) / kColBlock;
    util::parallel_for(blocks, t, 1, [&](std::size_t lo, std::size_t hi) {
      const std::size_t c0 = lo * kColBlock, c1 = std::min(M, hi * kColBlock);
      kernel(A, B + c0 * K, C + c0, N, c1 - c0, K, M);
    });
  }
}

// ---------------------------------------------------------------------------
// The gate: fixed cases, codes from a fixed generator (splitmix64), compared
// with the scalar reference cell by cell.
// ---------------------------------------------------------------------------
namespace {

enum class Fill { random, plus127, minus127, sign127 };
struct GateCase {
  std::size_t n, m, k;
  Fill a, b;
};
constexpr std::size_t kBound = ops::kMaxQuantK;
// Ragged: N, M of 1, 17, 63 and off every tile multiple (6 rows, 16/32/64
// columns, 32-row AMX blocks), K off 4 and 64 and on them; K = 0; extreme codes
// (all ±127: the largest |acc|, Σ(a+128)·b far beyond int32 in VNNI's offset
// form) at K = kMaxQuantK and near it.
constexpr GateCase kGateCases[] = {
    {1, 1, 1, Fill::random, Fill::random},         {1, 1, 3, Fill::random, Fill::random},
    {1, 17, 5, Fill::random, Fill::random},        {17, 1, 63, Fill::random, Fill::random},
    {2, 3, 64, Fill::random, Fill::random},        {3, 2, 65, Fill::random, Fill::random},
    {6, 64, 4, Fill::random, Fill::random},        {7, 65, 127, Fill::random, Fill::random},
    {16, 16, 128, Fill::random, Fill::random},     {17, 17, 129, Fill::random, Fill::random},
    {31, 33, 255, Fill::random, Fill::random},     {32, 32, 256, Fill::random, Fill::random},
    {33, 31, 257, Fill::random, Fill::random},     {63, 63, 67, Fill::random, Fill::random},
    {63, 17, 1000, Fill::random, Fill::random},    {1, 63, 771, Fill::random, Fill::random},
    {65, 130, 190, Fill::random, Fill::random},    {5, 7, 0, Fill::random, Fill::random},
    {17, 63, 4099, Fill::sign127, Fill::sign127},  {3, 5, 131070, Fill::sign127, Fill::plus127},
    {2, 3, kBound, Fill::plus127, Fill::plus127},  {2, 3, kBound, Fill::plus127, Fill::minus127},
    {3, 2, kBound, Fill::minus127, Fill::minus127}, {1, 17, kBound, Fill::sign127, Fill::sign127},
};

std::uint64_t splitmix(std::uint64_t& s) {
  std::uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

std::vector<std::int8_t> fill(std::size_t count, Fill f, std::uint64_t seed) {
  std::vector<std::int8_t> v(count);
  for (auto& x : v) {
    const std::uint64_t r = splitmix(seed);
    switch (f) {
      case Fill::random: x = static_cast<std::int8_t>(static_cast<int>(r % 255) - 127); break;
      case Fill::plus127: x = 127; break;
      case Fill::minus127: x = -127; break;
      case Fill::sign127: x = (r & 1u) ? 127 : -127; break;
    }
  }
  return v;
}

std::string shape_name(std::size_t n, std::size_t m, std::size_t k) {
  return std::to_string(n) + "×" + std::to_string(m) + "×" + std::to_string(k);
}

}  // namespace

std::size_t gate_case_count() { return std::size(kGateCases); }

GateResult gate(Kernel kernel, int threads) {
  GateResult g;
  std::uint64_t seed = 0x10c5'7e9'1170ull;
  for (const GateCase& c : kGateCases) {
    const auto a = fill(c.n * c.k, c.a, seed++), b = fill(c.m * c.k, c.b, seed++);
    std::vector<std::int32_t> want(c.n * c.m), got(c.n * c.m, 0x5A5A5A5A);
    scalar_impl().kernel(a.data(), b.data(), want.data(), c.n, c.m, c.k, c.m);
    ++g.cases;
    try {
      run(kernel, a.data(), b.data(), got.data(), c.n, c.m, c.k, threads);
    } catch (const std::exception& e) {
      g.failure = shape_name(c.n, c.m, c.k) + ": threw " + e.what();
      return g;
    }
    for (std::size_t i = 0; i < want.size(); ++i)
      if (got[i] != want[i]) {
        g.failure = shape_name(c.n, c.m, c.k) + ": C[" + std::to_string(i / c.m) + "," + std::to_string(i % c.m) +
                    "] = " + std::to_string(got[i]) + ", reference " + std::to_string(want[i]);
        return g;
      }
  }
  g.passed = true;
  return g;
}

// ---------------------------------------------------------------------------
// The race: one representative shape per class, each gated implementation
// timed (best of kRaceRounds rounds) on all hardware threads; ties go to the earlier
// candidate (scalar first, so a SIMD kernel must be strictly faster).
// ---------------------------------------------------------------------------
namespace {

struct RaceShape {
  std::size_t n, m, k;
};
// small: one token's projection; medium: 64 tokens; large: 256 tokens (GPT-2 124M's d = 768).
constexpr int kRaceRounds = 3;
constexpr RaceShape kRaceShapes[kShapeClasses] = {{1, 768, 768}, {64, 768, 768}, {256, 768, 768}};

double seconds_of(Kernel kernel, const std::vector<std::int8_t>& a, const std::vector<std::int8_t>& b,
                  std::vector<std::int32_t>& c, const RaceShape& s) {
  const auto t0 = std::chrono::steady_clock::now();
  run(kernel, a.data(), b.data(), c.data(), s.n, s.m, s.k, 0);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

Plan make_plan(const Candidates& candidates) {
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<Impl> gated;
  std::vector<std::string> rejected;
  for (const Impl& impl : candidates.impls) {
    const GateResult g = gate(impl.kernel);
    if (g.passed)
      gated.push_back(impl);
    else
      rejected.push_back(std::string(impl.name) + " FAILED the gate (never used): " + g.failure);
  }
  Plan plan;
  if (gated.empty())  // cannot happen unless the scalar reference itself fails
    throw std::runtime_error("int8 GEMM (CPU): no implementation passed the start-up gate");
  for (std::size_t cls = 0; cls < kShapeClasses; ++cls) {
    const RaceShape& s = kRaceShapes[cls];
    const auto a = fill(s.n * s.k, Fill::random, 11 + cls), b = fill(s.m * s.k, Fill::random, 23 + cls);
    std::vector<std::int32_t> c(s.n * s.m);
    // Rounds over all candidates, best of each kept: on a shared machine a
    // burst of load then hits every candidate, not one.
    std::vector<double> best_s(gated.size(), 1e30);
    for (int round = 0; round < kRaceRounds; ++round)
      for (std::size_t i = 0; i < gated.size(); ++i)
        best_s[i] = std::min(best_s[i], seconds_of(gated[i].kernel, a, b, c, s));
    plan.chosen[cls] = gated[static_cast<std::size_t>(std::min_element(best_s.begin(), best_s.end()) - best_s.begin())];
  }
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  // "amx for large, vnni for small, medium": classes grouped by the implementation chosen.
  std::string choice;
  for (const Impl& impl : gated) {
    std::string classes;
    for (std::size_t cls = 0; cls < kShapeClasses; ++cls)
      if (plan.chosen[cls].kernel == impl.kernel)
        classes += (classes.empty() ? "" : ", ") + std::string(shape_class_name(static_cast<ShapeClass>(cls)));
    if (!classes.empty()) choice += (choice.empty() ? "" : "; ") + std::string(impl.name) + " for " + classes;
  }
  plan.report = "int8 GEMM (CPU): " + choice + "; gated " + std::to_string(gated.size()) + "/" +
                std::to_string(candidates.impls.size()) + " on " + std::to_string(gate_case_count()) + " cases (" +
                std::to_string(static_cast<long>(ms + 0.5)) + " ms, with the race)";
  for (const std::string& r : rejected) plan.report += "; " + r;
  for (const std::string& u : candidates.unavailable) plan.report += "; " + u;
  return plan;
}

namespace {
const Plan& machine_plan() {
  static const Plan plan = make_plan(candidates_for(probe_machine()));
  return plan;
}
}  // namespace

}  // namespace lockstep::cpu::int8

namespace lockstep::cpu {

void int8_gemm_nt(const std::int8_t* A, const std::int8_t* B, std::int32_t* C, std::size_t N, std::size_t M,
                  std::size_t K, int threads) {
  int8::check_shape(N, M, K);  // before the plan: a bad shape costs no gate
  const int8::Impl& impl = int8::machine_plan().chosen[static_cast<std::size_t>(int8::shape_class(N, M, K))];
  int8::run(impl.kernel, A, B, C, N, M, K, threads);
}

void int8_gemm_nt(const std::int8_t* A, const std::int8_t* B, std::int32_t* C, std::size_t N, std::size_t M,
                  std::size_t K) {
  int8_gemm_nt(A, B, C, N, M, K, 0);
}

std::string int8_gemm_choice_report() { return int8::machine_plan().report; }

}  // namespace lockstep::cpu
