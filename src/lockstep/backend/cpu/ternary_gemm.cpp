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

#include "lockstep/backend/cpu/amx_tiles.hpp"
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
// that their words stay in L1 while the activation rows pass over them,
// `at_once` rows at a time (group(rn, g, x, xsum, step, y) for rn of them),
// so each weight comes from memory once a call.
template <class Group>
void grouped_rows(const TernaryMatrix& w, const std::vector<std::int8_t>& xp, const std::vector<std::int32_t>& xsum,
                  std::size_t N, const float* step, float* y, std::size_t g0, std::size_t g1, std::size_t at_once,
                  Group&& group) {
  const std::size_t block = std::max<std::size_t>(1, (16 * 1024) / (w.group_words() * sizeof(std::uint32_t)));
  for (std::size_t b0 = g0; b0 < g1; b0 += block) {
    const std::size_t b1 = std::min(g1, b0 + block);
    for (std::size_t n0 = 0; n0 < N; n0 += at_once) {
      const std::size_t rn = std::min(at_once, N - n0);
      for (std::size_t g = b0; g < b1; ++g)
        group(rn, g, xp.data() + n0 * w.chunks * 256, xsum.data() + n0, step + n0, y + n0 * w.rows);
    }
  }
}

// The VNNI path's groups, up to 4 activation rows at a time.
void vnni_rows(const TernaryMatrix& w, const std::vector<std::int8_t>& xp, const std::vector<std::int32_t>& xsum,
               std::size_t N, const float* step, float* y, std::size_t g0, std::size_t g1) {
  const bool drop = g_mutant == Mutant::vnni_tail_chunk_dropped;
  grouped_rows(w, xp, xsum, N, step, y, g0, g1, 4,
               [&](std::size_t rn, std::size_t g, const std::int8_t* x, const std::int32_t* s, const float* st, float* yn) {
                 switch (rn) {
                   case 1: vnni_group<1>(w, g, x, s, st, yn, drop); break;
                   case 2: vnni_group<2>(w, g, x, s, st, yn, drop); break;
                   case 3: vnni_group<3>(w, g, x, s, st, yn, drop); break;
                   default: vnni_group<4>(w, g, x, s, st, yn, drop); break;
                 }
               });
}
// ---------------------------------------------------------------------------
// AVX2 (machines without AVX-512: AMD Zen 2/3, older Intel). The same fields
// and the same permuted activation codes, half a chunk (8 words) a ymm: the
// ymm of words 8h..8h+7 meets bytes 32h..32h+31 of each X_j. vpmaddubsw is
// u8 × s8 with pairs summed into int16 (saturating, but |field·x + field·x|
// <= 2·2·127 = 508, and the four j of a half add to <= 2032: no saturation),
// vpmaddwd against ones widens pairs into the int32 lanes. Exact, as vnni.
// ---------------------------------------------------------------------------
#define LOCKSTEP_AVX2_TARGET __attribute__((target("avx2")))

LOCKSTEP_AVX2_TARGET inline std::int32_t lane_sum_avx2(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

// RM weight rows of a group against RN permuted activation rows (vnni_block's
// contract); 4 × RN accumulators, RM words, a field and a code vector live.
template <std::size_t RM, std::size_t RN>
LOCKSTEP_AVX2_TARGET void avx2_block(const std::uint32_t* rows, const std::int8_t* xp, std::size_t chunks,
                                     const std::int32_t* xsum, const float* step, float scale, float* y,
                                     std::size_t ldy, std::size_t valid, bool drop_last) {
  const __m256i fields = _mm256_set1_epi32(0x03030303);
  const __m256i ones = _mm256_set1_epi16(1);
  constexpr std::size_t kChunkStride = kGroupRows * kChunkWords;
  const std::size_t xstride = chunks * 256;
  const std::size_t pf = prefetch_bytes();
  __m256i acc[RN][RM];
#pragma GCC unroll 8
  for (std::size_t n = 0; n < RN; ++n)
#pragma GCC unroll 8
    for (std::size_t r = 0; r < RM; ++r) acc[n][r] = _mm256_setzero_si256();
  const std::size_t count = drop_last && chunks > 0 ? chunks - 1 : chunks;  // the mutant leaves the last chunk out
  for (std::size_t c = 0; c < count; ++c) {
    const std::uint32_t* at = rows + c * kChunkStride;
    if (pf != 0)
#pragma GCC unroll 8
      for (std::size_t r = 0; r < RM; ++r) _mm_prefetch(reinterpret_cast<const char*>(at + r * kChunkWords) + pf, _MM_HINT_T0);
#pragma GCC unroll 2
    for (std::size_t h = 0; h < 2; ++h) {
      __m256i wv[RM];
#pragma GCC unroll 8
      for (std::size_t r = 0; r < RM; ++r)
        wv[r] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(at + r * kChunkWords + 8 * h));
      __m256i part[RN][RM];  // the half's int16 pair sums over its four j
#pragma GCC unroll 4
      for (unsigned j = 0; j < 4; ++j) {
#pragma GCC unroll 4
        for (std::size_t n = 0; n < RN; ++n) {
          const __m256i xv =
              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xp + n * xstride + c * 256 + j * 64 + 32 * h));
#pragma GCC unroll 8
          for (std::size_t r = 0; r < RM; ++r) {
            const __m256i f = _mm256_and_si256(_mm256_srli_epi32(wv[r], static_cast<int>(2 * j)), fields);
            const __m256i d = _mm256_maddubs_epi16(f, xv);
            part[n][r] = j == 0 ? d : _mm256_add_epi16(part[n][r], d);
          }
        }
      }
#pragma GCC unroll 4
      for (std::size_t n = 0; n < RN; ++n)
#pragma GCC unroll 8
        for (std::size_t r = 0; r < RM; ++r) acc[n][r] = _mm256_add_epi32(acc[n][r], _mm256_madd_epi16(part[n][r], ones));
    }
  }
#pragma GCC unroll 4
  for (std::size_t n = 0; n < RN; ++n)
#pragma GCC unroll 8
    for (std::size_t r = 0; r < RM; ++r)
      if (r < valid) y[n * ldy + r] = ops::BitLinear::epilogue(lane_sum_avx2(acc[n][r]) - xsum[n], step[n], scale);
}

// Group g against RN <= 2 activation rows: blocks of 4 weight rows (16 ymm).
template <std::size_t RN>
void avx2_group(const TernaryMatrix& w, std::size_t g, const std::int8_t* xp, const std::int32_t* xsum,
                const float* step, float* y, bool drop) {
  const std::size_t m = g * kGroupRows, valid = std::min(kGroupRows, w.rows - m);
  const std::uint32_t* rows = w.words.data() + g * w.group_words();
  constexpr std::size_t half = kGroupRows / 2;
  avx2_block<half, RN>(rows, xp, w.chunks, xsum, step, w.scale, y + m, w.rows, std::min(half, valid), drop);
  if (valid > half)
    avx2_block<half, RN>(rows + half * kChunkWords, xp, w.chunks, xsum, step, w.scale, y + m + half, w.rows,
                         valid - half, drop);
}

// The AVX2 path's groups, up to 2 activation rows at a time.
void avx2_rows(const TernaryMatrix& w, const std::vector<std::int8_t>& xp, const std::vector<std::int32_t>& xsum,
               std::size_t N, const float* step, float* y, std::size_t g0, std::size_t g1) {
  const bool drop = g_mutant == Mutant::avx2_tail_chunk_dropped;
  grouped_rows(w, xp, xsum, N, step, y, g0, g1, 2,
               [&](std::size_t rn, std::size_t g, const std::int8_t* x, const std::int32_t* s, const float* st, float* yn) {
                 if (rn == 1)
                   avx2_group<1>(w, g, x, s, st, yn, drop);
                 else
                   avx2_group<2>(w, g, x, s, st, yn, drop);
               });
}

// ---------------------------------------------------------------------------
// AMX. A block is 16 weight rows (groups 2b and 2b + 1) against the
// activation rows in tiles of 16. For chunk c and shift j, the A tile's row r
// is the 64 fields (words >> 2j) & 0x03030303 of weight row r — byte 4L + i
// the field of code 256c + 16L + 4j + i — and the B tile's row L holds, for
// activation row n, the codes 256c + 16L + 4j + i (i < 4) in bytes 4n + i:
// tdpbssd's Σ_L Σ_i A[r][4L + i] · B[L][4n + i] is the chunk's share of
// Σ field · x. tmm0 holds A, tmm1 B, tmm2..7 the accumulators of up to six
// activation tiles, so each block's words are unpacked once for 96 rows.
// ---------------------------------------------------------------------------
#define LOCKSTEP_TERNARY_AMX_TARGET __attribute__((target("amx-tile,amx-int8")))
constexpr std::size_t kTileRows = 16, kTileBytes = 16 * 64;
constexpr std::size_t kAccTiles = 6;

// The activation codes as B tiles, [ceil(N / 16)][chunks][4][16 L][16 n][4 i],
// from permute_codes' [N][chunks][4][64] (0 past N).
std::vector<std::int8_t> activation_tiles(const std::vector<std::int8_t>& xp, std::size_t N, std::size_t chunks) {
  const std::size_t tiles = (N + kTileRows - 1) / kTileRows;
  std::vector<std::int8_t> bt(tiles * chunks * 4 * kTileBytes, 0);
  for (std::size_t n = 0; n < N; ++n) {
    std::int8_t* dst = bt.data() + (n / kTileRows) * chunks * 4 * kTileBytes + 4 * (n % kTileRows);
    const std::int8_t* src = xp.data() + n * chunks * 256;
    for (std::size_t cj = 0; cj < chunks * 4; ++cj)
      for (std::size_t L = 0; L < 16; ++L) std::memcpy(dst + cj * kTileBytes + L * 64, src + cj * 64 + 4 * L, 4);
  }
  return bt;
}

// The four A tiles of chunk c ([4 j][16 r][64 bytes]) for the block whose
// groups start at `lo` and `hi` (nullptr: no upper group, its rows 0).
LOCKSTEP_VNNI_TARGET void unpack_chunk_vnni(const std::uint32_t* lo, const std::uint32_t* hi, std::size_t c,
                                            std::int8_t* a) {
  const __m512i fields = _mm512_set1_epi32(0x03030303);
  const auto all = static_cast<__mmask16>(0xFFFF);
  constexpr std::size_t kChunkStride = kGroupRows * kChunkWords;
  for (std::size_t r = 0; r < kTileRows; ++r) {
    const std::uint32_t* g = r < kGroupRows ? lo : hi;
    const __m512i wv = g ? _mm512_loadu_si512(g + c * kChunkStride + (r % kGroupRows) * kChunkWords)
                         : _mm512_setzero_si512();
    for (unsigned j = 0; j < 4; ++j)
      _mm512_store_si512(a + j * kTileBytes + r * 64, _mm512_and_si512(_mm512_maskz_srli_epi32(all, wv, 2 * j), fields));
  }
}

// The same in plain C++ (for the emulated tiles: no AVX-512 needed).
void unpack_chunk_scalar(const std::uint32_t* lo, const std::uint32_t* hi, std::size_t c, std::int8_t* a) {
  constexpr std::size_t kChunkStride = kGroupRows * kChunkWords;
  for (std::size_t r = 0; r < kTileRows; ++r) {
    const std::uint32_t* g = r < kGroupRows ? lo : hi;
    for (unsigned j = 0; j < 4; ++j)
      for (std::size_t L = 0; L < 16; ++L) {
        const std::uint32_t w = g ? g[c * kChunkStride + (r % kGroupRows) * kChunkWords + L] : 0u;
        for (unsigned i = 0; i < 4; ++i)
          a[j * kTileBytes + r * 64 + 4 * L + i] = static_cast<std::int8_t>((w >> (8 * i + 2 * j)) & 3u);
      }
  }
}

// The tile instructions on the hardware (the intrinsics take tile numbers as literals).
struct HwTiles {
  static constexpr bool kHardware = true;
  LOCKSTEP_TERNARY_AMX_TARGET void begin() { amx::load_uniform_tile_config(); }
  LOCKSTEP_TERNARY_AMX_TARGET void zero() {
    _tile_zero(2);
    _tile_zero(3);
    _tile_zero(4);
    _tile_zero(5);
    _tile_zero(6);
    _tile_zero(7);
  }
  LOCKSTEP_TERNARY_AMX_TARGET void load_a(const std::int8_t* a) { _tile_loadd(0, a, 64); }
  // Accumulator t += A · (the B tile at b).
  LOCKSTEP_TERNARY_AMX_TARGET void dot(std::size_t t, const std::int8_t* b) {
    _tile_loadd(1, b, 64);
    switch (t) {
      case 0: _tile_dpbssd(2, 0, 1); break;
      case 1: _tile_dpbssd(3, 0, 1); break;
      case 2: _tile_dpbssd(4, 0, 1); break;
      case 3: _tile_dpbssd(5, 0, 1); break;
      case 4: _tile_dpbssd(6, 0, 1); break;
      default: _tile_dpbssd(7, 0, 1); break;
    }
  }
  LOCKSTEP_TERNARY_AMX_TARGET void store(std::size_t t, std::int32_t* out) {  // 16 × 16 int32
    switch (t) {
      case 0: _tile_stored(2, out, 64); break;
      case 1: _tile_stored(3, out, 64); break;
      case 2: _tile_stored(4, out, 64); break;
      case 3: _tile_stored(5, out, 64); break;
      case 4: _tile_stored(6, out, 64); break;
      default: _tile_stored(7, out, 64); break;
    }
  }
  LOCKSTEP_TERNARY_AMX_TARGET void end() { _tile_release(); }
};

// TILELOADD and TDPBSSD after Intel's pseudo-code, in C++.
struct EmulatedTiles {
  static constexpr bool kHardware = false;
  std::int8_t a[kTileBytes];
  std::int32_t acc[kAccTiles][kTileRows][kTileRows];
  void begin() {}
  void zero() { std::memset(acc, 0, sizeof acc); }
  void load_a(const std::int8_t* src) { std::memcpy(a, src, sizeof a); }
  void dot(std::size_t t, const std::int8_t* b) {  // acc.row[m].dword[n] += Σ_k Σ_i a.row[m].byte[4k+i]·b.row[k].byte[4n+i]
    for (std::size_t m = 0; m < kTileRows; ++m)
      for (std::size_t n = 0; n < kTileRows; ++n) {
        std::int32_t s = acc[t][m][n];
        for (std::size_t k = 0; k < 16; ++k)
          for (std::size_t i = 0; i < 4; ++i) s += a[m * 64 + 4 * k + i] * b[k * 64 + 4 * n + i];
        acc[t][m][n] = s;
      }
  }
  void store(std::size_t t, std::int32_t* out) { std::memcpy(out, acc[t], sizeof acc[t]); }
  void end() {}
};

// Blocks [b0, b1) of 16 weight rows for all N activation rows.
template <class Tiles>
LOCKSTEP_TERNARY_AMX_TARGET void amx_rows(const TernaryMatrix& w, const std::vector<std::int8_t>& bt,
                                          const std::vector<std::int32_t>& xsum, std::size_t N, const float* step,
                                          float* y, std::size_t b0, std::size_t b1) {
  const bool drop_upper = g_mutant == Mutant::amx_upper_group_dropped;
  const std::size_t chunks = w.chunks, act_tiles = (N + kTileRows - 1) / kTileRows;
  const std::size_t tile_stride = chunks * 4 * kTileBytes;
  alignas(64) std::int8_t a[4 * kTileBytes];
  alignas(64) std::int32_t out[kTileRows * kTileRows];
  Tiles tiles;
  tiles.begin();
  for (std::size_t b = b0; b < b1; ++b) {
    const std::size_t g = 2 * b, m0 = g * kGroupRows, valid = std::min(kTileRows, w.rows - m0);
    const std::uint32_t* lo = w.words.data() + g * w.group_words();
    const std::uint32_t* hi = g + 1 < w.groups() && !drop_upper ? lo + w.group_words() : nullptr;
    for (std::size_t t0 = 0; t0 < act_tiles; t0 += kAccTiles) {
      const std::size_t count = std::min(kAccTiles, act_tiles - t0);
      tiles.zero();
      for (std::size_t c = 0; c < chunks; ++c) {
        if constexpr (Tiles::kHardware)
          unpack_chunk_vnni(lo, hi, c, a);
        else
          unpack_chunk_scalar(lo, hi, c, a);
        for (unsigned j = 0; j < 4; ++j) {
          tiles.load_a(a + j * kTileBytes);
          const std::int8_t* bj = bt.data() + t0 * tile_stride + (c * 4 + j) * kTileBytes;
          for (std::size_t t = 0; t < count; ++t) tiles.dot(t, bj + t * tile_stride);
        }
      }
      for (std::size_t t = 0; t < count; ++t) {
        tiles.store(t, out);
        const std::size_t n0 = (t0 + t) * kTileRows, rn = std::min(kTileRows, N - n0);
        for (std::size_t n = 0; n < rn; ++n)
          for (std::size_t r = 0; r < valid; ++r)
            y[(n0 + n) * w.rows + m0 + r] =
                ops::BitLinear::epilogue(out[r * kTileRows + n] - xsum[n0 + n], step[n0 + n], w.scale);
      }
    }
  }
  tiles.end();
}
constexpr bool kVnniCompiled = true;
#else
constexpr bool kVnniCompiled = false;
#endif

}  // namespace

const char* path_name(Path p) {
  switch (p) {
    case Path::scalar: return "scalar";
    case Path::vnni: return "vnni";
    case Path::avx2: return "avx2";
    case Path::amx: return "amx";
    case Path::amx_emulated: return "amx-emulated";
  }
  return "?";
}

bool vnni_available() {
  static const bool yes = kVnniCompiled && int8::probe_machine(true).vnni;
  return yes;
}

bool avx2_available() {
  static const bool yes = [] {
    if (!kVnniCompiled) return false;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") != 0;  // cpuid and the OS's ymm state
  }();
  return yes;
}

bool amx_available() {
  static const bool yes = [] {
    if (!kVnniCompiled) return false;
    const int8::Machine m = int8::probe_machine(false);  // asks the kernel for the tile permission
    return m.amx_cpu && m.amx_permitted;
  }();
  return yes;
}

bool amx_emulated_available() { return kVnniCompiled; }

bool path_available(Path p) {
  switch (p) {
    case Path::scalar: return true;
    case Path::vnni: return vnni_available();
    case Path::avx2: return avx2_available();
    case Path::amx: return amx_available();
    case Path::amx_emulated: return amx_emulated_available();
  }
  return false;
}

Path chosen_path(std::size_t rows) {
  if (rows >= kAmxMinRows && amx_available()) return Path::amx;
  if (vnni_available()) return Path::vnni;
  return avx2_available() ? Path::avx2 : Path::scalar;
}

void set_mutant(Mutant m) { g_mutant = m; }
void set_prefetch_bytes(std::size_t bytes) { g_prefetch_bytes = bytes; }

void gemm(Path path, const TernaryMatrix& w, const std::int8_t* xq, std::size_t N, const float* step, float* y,
          int threads) {
  if (w.cols > ops::kMaxQuantK)
    throw std::invalid_argument(fmt::format("ternary GEMM {}x{}x{}: K = {} exceeds {}, the bound for exact int32 sums",
                                            N, w.rows, w.cols, w.cols, ops::kMaxQuantK));
  if (!path_available(path))
    throw std::invalid_argument(fmt::format("ternary GEMM: the {} path is not available on this machine", path_name(path)));
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
  if (path == Path::amx || path == Path::amx_emulated) {
    const std::vector<std::int8_t> bt = activation_tiles(xp, N, w.chunks);
    // Threads split whole blocks of 16 rows (two groups).
    const std::size_t blocks = (w.groups() + 1) / 2;
    util::parallel_for(blocks, threads, std::max<std::size_t>(1, grain / kTileRows), [&](std::size_t lo, std::size_t hi) {
      if (path == Path::amx)
        amx_rows<HwTiles>(w, bt, xsum, N, step, y, lo, hi);
      else
        amx_rows<EmulatedTiles>(w, bt, xsum, N, step, y, lo, hi);
    });
    return;
  }
  // Threads split whole groups: each reads one run of words from start to end.
  util::parallel_for(w.groups(), threads, std::max<std::size_t>(1, grain / kGroupRows), [&](std::size_t lo, std::size_t hi) {
    if (path == Path::avx2)
      avx2_rows(w, xp, xsum, N, step, y, lo, hi);
    else
      vnni_rows(w, xp, xsum, N, step, y, lo, hi);
  });
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
  ternary::gemm(ternary::chosen_path(N), w, xq, N, step, y, threads);
}

}  // namespace lockstep::cpu
