// The ternary GEMM's two paths (ternary_gemm.hpp states the contract and why
// any order of the integer sums gives the same bits).
//
// The VNNI kernel carries a target attribute instead of relying on -march (as
// int8_gemm_kernels.cpp does): the library builds, and the scalar path runs,
// on any x86-64; whether the VNNI path may run is decided from cpuid
// (int8::probe_machine).
//
// VNNI layout. A zmm load of a row's chunk c (16 words: 256 codes, 64 bytes;
// the header's grouped layout puts a group's 8 rows' chunk c side by side)
// holds word 16c + L in lane L; (v >> 2j) & 0x03030303 puts
// the field of code 256c + 16L + 4j + i in byte i of lane L. vpdpbusd adds
// Σ_i u.byte[4L + i] · s.byte[4L + i] into lane L, so the activation codes go
// in the matching order: per row and chunk four 64-byte vectors X_j with
// X_j[4L + i] = x[256c + 16L + 4j + i] (0 past K), built once a call (the
// activations are a few rows; the weights are the bytes that count). The
// words past a row's 4·units hold code 0 and meet activation codes 0: they
// add nothing.
#include "lockstep/backend/cpu/ternary_gemm.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "lockstep/backend/cpu/int8_gemm.hpp"
#include "lockstep/backend/cpu/ops.hpp"
#include "lockstep/backend/cpu/ternary_word.hpp"
#include "lockstep/ops/quant.hpp"
#include "lockstep/util/parallel.hpp"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define LOCKSTEP_TERNARY_X86 1
#include <immintrin.h>
#endif

namespace lockstep::cpu {
namespace ternary {
namespace {

Mutant g_mutant = Mutant::none;

constexpr std::size_t kChunkWords = TernaryMatrix::kChunkWords;  // one zmm of words: 256 codes
constexpr std::size_t kGroupRows = TernaryMatrix::kGroupRows;
// vnni_block's software prefetch distance along a thread's stream of words (0: none).
std::size_t g_prefetch_bytes = kDefaultPrefetchBytes;
std::size_t prefetch_bytes() { return g_prefetch_bytes; }

// Σ_k xq[n, k], exact (|Σ| <= 127·131071).
std::int32_t code_sum(const std::int8_t* x, std::size_t K) {
  std::int32_t s = 0;
  for (std::size_t k = 0; k < K; ++k) s += x[k];
  return s;
}

// Rows [m0, m1) of y for all N rows: scalar, through the header's word dot.
void scalar_rows(const TernaryMatrix& w, const std::int8_t* xq, std::size_t N, const float* step, float* y,
                 std::size_t m0, std::size_t m1) {
  const std::size_t K = w.cols, W = 4 * w.units;
  std::vector<int> xw(W * 4);  // the row's codes as ints of 4 bytes, zero past K
  for (std::size_t n = 0; n < N; ++n) {
    std::vector<std::int8_t> pad(W * 16, 0);
    std::memcpy(pad.data(), xq + n * K, K);
    std::memcpy(xw.data(), pad.data(), pad.size());
    const std::int32_t xsum = g_mutant == Mutant::scalar_no_offset_correction ? 0 : code_sum(xq + n * K, K);
    for (std::size_t m = m0; m < m1; ++m) {
      std::int32_t acc = 0;
      for (std::size_t g = 0; g < W; ++g) acc += ternary_word_dot(w.words[w.word_index(m, g)], xw.data() + 4 * g);
      y[n * w.rows + m] = ops::BitLinear::epilogue(acc - xsum, step[n], w.scale);
    }
  }
}

#if defined(LOCKSTEP_TERNARY_X86)
#define LOCKSTEP_VNNI_TARGET __attribute__((target("avx512f,avx512bw,avx512vnni")))

// The activation codes in the fields' order (the top comment), [N][chunks][4][64].
std::vector<std::int8_t> permute_codes(const std::int8_t* xq, std::size_t N, std::size_t K, std::size_t chunks) {
  std::vector<std::int8_t> p(N * chunks * 256, 0);
  for (std::size_t n = 0; n < N; ++n) {
    std::int8_t* dst = p.data() + n * chunks * 256;
    const std::int8_t* x = xq + n * K;
    for (std::size_t c = 0; c < chunks; ++c)
      for (std::size_t j = 0; j < 4; ++j)
        for (std::size_t L = 0; L < 16; ++L)
          for (std::size_t i = 0; i < 4; ++i) {
            const std::size_t k = 256 * c + 16 * L + 4 * j + i;
            if (k < K) dst[c * 256 + j * 64 + 4 * L + i] = x[k];
          }
  }
  return p;
}

// The 16 lanes' sum (exact: the lanes hold a split of an int32 sum): a tree of
// four shuffle-adds, all within zmm. The maskz forms because GCC 12's plain
// shuffles and 512 -> 256/128 casts pass through _mm512_undefined_* and trip
// -Wmaybe-uninitialized.
LOCKSTEP_VNNI_TARGET inline std::int32_t lane_sum(__m512i v) {
  const auto all = static_cast<__mmask16>(0xFFFF);
  v = _mm512_add_epi32(v, _mm512_maskz_shuffle_i32x4(all, v, v, 0x4E));  // 256-bit halves
  v = _mm512_add_epi32(v, _mm512_maskz_shuffle_i32x4(all, v, v, 0xB1));  // 128-bit quarters
  v = _mm512_add_epi32(v, _mm512_maskz_shuffle_epi32(all, v, static_cast<_MM_PERM_ENUM>(0x4E)));
  v = _mm512_add_epi32(v, _mm512_maskz_shuffle_epi32(all, v, static_cast<_MM_PERM_ENUM>(0xB1)));
  return _mm512_cvtsi512_si32(v);
}

// RM weight rows of a group (`rows`: row r's chunk c at rows + c·8·16 + r·16
// words) against RN permuted activation rows from `xp` (chunks·256 bytes
// apart): acc[n][r] = Σ field · x, then the correction and the epilogue into
// y[n·ldy + r] for the `valid` rows r that exist. Every accumulator loop is
// unrolled so that the arrays stay in registers.
template <std::size_t RM, std::size_t RN>
LOCKSTEP_VNNI_TARGET void vnni_block(const std::uint32_t* rows, const std::int8_t* xp, std::size_t chunks,
                                     const std::int32_t* xsum, const float* step, float scale, float* y,
                                     std::size_t ldy, std::size_t valid, bool drop_last) {
  const __m512i fields = _mm512_set1_epi32(0x03030303);
  // The maskz form of the shift: GCC 12's plain one trips -Wmaybe-uninitialized (_mm512_undefined_epi32).
  const auto all = static_cast<__mmask16>(0xFFFF);
  constexpr std::size_t kChunkStride = kGroupRows * kChunkWords;
  const std::size_t xstride = chunks * 256;
  const std::size_t pf = prefetch_bytes();
  __m512i acc[RN][RM];
#pragma GCC unroll 8
  for (std::size_t n = 0; n < RN; ++n)
#pragma GCC unroll 8
    for (std::size_t r = 0; r < RM; ++r) acc[n][r] = _mm512_setzero_si512();
  // The mutant leaves the last chunk out.
  const std::size_t count = drop_last && chunks > 0 ? chunks - 1 : chunks;
  for (std::size_t c = 0; c < count; ++c) {
    const std::uint32_t* at = rows + c * kChunkStride;
    __m512i wv[RM];
#pragma GCC unroll 8
    for (std::size_t r = 0; r < RM; ++r) {
      wv[r] = _mm512_loadu_si512(at + r * kChunkWords);
      // Ahead on the thread's stream; a prefetch past the matrix never faults.
      if (pf != 0) _mm_prefetch(reinterpret_cast<const char*>(at + r * kChunkWords) + pf, _MM_HINT_T0);
    }
#pragma GCC unroll 4
    for (unsigned j = 0; j < 4; ++j) {
      __m512i f[RM];
#pragma GCC unroll 8
      for (std::size_t r = 0; r < RM; ++r) f[r] = _mm512_and_si512(_mm512_maskz_srli_epi32(all, wv[r], 2 * j), fields);
#pragma GCC unroll 4
      for (std::size_t n = 0; n < RN; ++n) {
        const __m512i xv = _mm512_loadu_si512(xp + n * xstride + c * 256 + j * 64);
#pragma GCC unroll 8
        for (std::size_t r = 0; r < RM; ++r) acc[n][r] = _mm512_dpbusd_epi32(acc[n][r], f[r], xv);
      }
    }
  }
#pragma GCC unroll 4
  for (std::size_t n = 0; n < RN; ++n)
#pragma GCC unroll 8
    for (std::size_t r = 0; r < RM; ++r)
      if (r < valid) y[n * ldy + r] = ops::BitLinear::epilogue(lane_sum(acc[n][r]) - xsum[n], step[n], scale);
}

// Group g of the weights against RN activation rows: one block of all 8 rows
// for one activation row, two of 4 rows for more (the accumulators of 4
// activation rows x 8 weight rows would not fit the registers).
template <std::size_t RN>
void vnni_group(const TernaryMatrix& w, std::size_t g, const std::int8_t* xp, const std::int32_t* xsum,
                const float* step, float* y, bool drop) {
  const std::size_t m = g * kGroupRows, valid = std::min(kGroupRows, w.rows - m);
  const std::uint32_t* rows = w.words.data() + g * w.group_words();
  if constexpr (RN == 1) {
    vnni_block<kGroupRows, 1>(rows, xp, w.chunks, xsum, step, w.scale, y + m, w.rows, valid, drop);
  } else {
    constexpr std::size_t half = kGroupRows / 2;
    vnni_block<half, RN>(rows, xp, w.chunks, xsum, step, w.scale, y + m, w.rows, std::min(half, valid), drop);
    if (valid > half)
      vnni_block<half, RN>(rows + half * kChunkWords, xp, w.chunks, xsum, step, w.scale, y + m + half, w.rows,
                           valid - half, drop);
  }
}

// Groups [g0, g1) of y's rows for all N rows: blocks of groups small enough
// that their words stay in L1 while the groups of up to 4 activation rows
// pass over them, so each weight comes from memory once a call.
void vnni_rows(const TernaryMatrix& w, const std::vector<std::int8_t>& xp, const std::vector<std::int32_t>& xsum,
               std::size_t N, const float* step, float* y, std::size_t g0, std::size_t g1) {
  const bool drop = g_mutant == Mutant::vnni_tail_chunk_dropped;
  const std::size_t block = std::max<std::size_t>(1, (16 * 1024) / (w.group_words() * sizeof(std::uint32_t)));
  for (std::size_t b0 = g0; b0 < g1; b0 += block) {
    const std::size_t b1 = std::min(g1, b0 + block);
    for (std::size_t n0 = 0; n0 < N; n0 += 4) {
      const std::size_t rn = std::min<std::size_t>(4, N - n0);
      const std::int8_t* x = xp.data() + n0 * w.chunks * 256;
      const std::int32_t* s = xsum.data() + n0;
      float* yn = y + n0 * w.rows;
      for (std::size_t g = b0; g < b1; ++g) switch (rn) {
          case 1: vnni_group<1>(w, g, x, s, step + n0, yn, drop); break;
          case 2: vnni_group<2>(w, g, x, s, step + n0, yn, drop); break;
          case 3: vnni_group<3>(w, g, x, s, step + n0, yn, drop); break;
          default: vnni_group<4>(w, g, x, s, step + n0, yn, drop); break;
        }
    }
  }
}
constexpr bool kVnniCompiled = true;
#else
constexpr bool kVnniCompiled = false;
#endif

}  // namespace

const char* path_name(Path p) { return p == Path::vnni ? "vnni" : "scalar"; }

bool vnni_available() {
  static const bool yes = kVnniCompiled && int8::probe_machine(true).vnni;
  return yes;
}

Path chosen_path() { return vnni_available() ? Path::vnni : Path::scalar; }

void set_mutant(Mutant m) { g_mutant = m; }
void set_prefetch_bytes(std::size_t bytes) { g_prefetch_bytes = bytes; }

void gemm(Path path, const TernaryMatrix& w, const std::int8_t* xq, std::size_t N, const float* step, float* y,
          int threads) {
  if (w.cols > ops::kMaxQuantK)
    throw std::invalid_argument(fmt::format("ternary GEMM {}x{}x{}: K = {} exceeds {}, the bound for exact int32 sums",
                                            N, w.rows, w.cols, w.cols, ops::kMaxQuantK));
  if (path == Path::vnni && !vnni_available())
    throw std::invalid_argument("ternary GEMM: the vnni path is not available on this machine");
  if (N == 0 || w.rows == 0) return;
  // A row of y costs about K·N multiply-adds; small products stay on the calling thread.
  const std::size_t grain = std::max<std::size_t>(1, min_parallel_work() / std::max<std::size_t>(1, w.cols * N));
  if (path == Path::scalar) {
    util::parallel_for(w.rows, threads, grain,
                       [&](std::size_t lo, std::size_t hi) { scalar_rows(w, xq, N, step, y, lo, hi); });
    return;
  }
#if defined(LOCKSTEP_TERNARY_X86)
  const std::vector<std::int8_t> xp = permute_codes(xq, N, w.cols, w.chunks);
  std::vector<std::int32_t> xsum(N);
  for (std::size_t n = 0; n < N; ++n) xsum[n] = code_sum(xq + n * w.cols, w.cols);
  // Threads split whole groups: each reads one run of words from start to end.
  util::parallel_for(w.groups(), threads, std::max<std::size_t>(1, grain / kGroupRows),
                     [&](std::size_t lo, std::size_t hi) { vnni_rows(w, xp, xsum, N, step, y, lo, hi); });
#endif
}

}  // namespace ternary

TernaryMatrix pack_ternary(const std::int8_t* codes, std::size_t M, std::size_t K, float scale, int threads) {
  TernaryMatrix t;
  t.rows = M;
  t.cols = K;
  t.units = ternary_units(K);
  t.scale = scale;
  t.chunks = (4 * t.units + TernaryMatrix::kChunkWords - 1) / TernaryMatrix::kChunkWords;
  const std::size_t W = t.chunks * TernaryMatrix::kChunkWords;  // the row's words, those past 4·units code 0
  t.words.resize(t.groups() * t.group_words());
  for (std::size_t i = 0; i < M * K; ++i)
    if (codes[i] < -1 || codes[i] > 1)
      throw std::invalid_argument(fmt::format("pack_ternary: code {} at row {}, column {} is not in {{-1, 0, 1}}",
                                              static_cast<int>(codes[i]), i / K, i % K));
  const std::size_t padded = t.groups() * TernaryMatrix::kGroupRows;  // rows past M: code 0
  util::parallel_for(padded, threads, std::size_t{64}, [&](std::size_t lo, std::size_t hi) {
    for (std::size_t m = lo; m < hi; ++m)
      for (std::size_t g = 0; g < W; ++g) {
        const std::size_t k0 = 16 * g;
        const int n = m >= M || k0 >= K ? 0 : static_cast<int>(std::min<std::size_t>(16, K - k0));
        t.words[t.word_index(m, g)] = ternary_word(n > 0 ? codes + m * K + k0 : codes, n);
      }
  });
  return t;
}

void ternary_gemm(const TernaryMatrix& w, const std::int8_t* xq, std::size_t N, const float* step, float* y,
                  int threads) {
  ternary::gemm(ternary::chosen_path(), w, xq, N, step, y, threads);
}

}  // namespace lockstep::cpu
