// The int8 GEMM implementations: scalar, AVX-512 VNNI, AMX-INT8.
//
// The SIMD kernels carry target attributes instead of relying on -march, so
// the library builds (and the scalar path runs) with LOCKSTEP_NATIVE=OFF on
// any x86-64; whether a kernel may run is decided at run time from cpuid
// (int8_gemm.cpp), never from the compile flags.
//
// Exactness. Every product of two codes in [-127, 127] is at most 16129 < 2^14
// in magnitude, so every partial sum of at most kMaxQuantK = 131071 of them is
// inside int32: integer addition is associative, and the order in which a
// kernel adds its products cannot change the result.
//
// VNNI: vpdpbusd multiplies UNSIGNED bytes by signed bytes (4 products summed
// into each int32 lane, no saturation). We feed it u = b + 128 (b ^ 0x80 as a
// byte, in [1, 255]) and A as it is, and subtract the correction:
//   Σ_k a_k b_k = Σ_k a_k u_k − 128 · Σ_k a_k.
// Σ a·u can reach 127·255·131071 ≈ 4.2e9 and leave int32, but vpdpbusd wraps
// (mod 2^32) and so does the correction's subtraction (vpsubd): the result is
// exact mod 2^32, and the true value lies in int32, so it is the true value.
// (The saturating vpdpbusds would NOT be exact: the gate's ±127 cases at K
// near the bound catch it.) We chose this over vpdpwssd on codes widened to
// int16, which needs no offset, because vpdpbusd does 64 multiply-adds per
// instruction against vpdpwssd's 32 and needs no widening shuffles; the
// correction is one vector subtraction per output vector, and Σ_k a_k is
// computed once per row.
// Why the offset goes on B: the unsigned operand of vpdpbusd must be a
// register, the signed one may be a memory broadcast. B's packed vectors are
// reused by every row of a tile (registers, offset once while packing); A's
// quads are broadcast straight from A, which needs no pass of its own. (The
// first version put the offset on A: an extra pass over A, and GCC folded the
// B loads into every vpdpbusd; 300-590 against 680-800 GOPS per core.)
//
// AMX: tdpbssd multiplies signed bytes by signed bytes, accumulating in int32
// tiles (16 rows × 16 int32); no offset. The B tile wants the same layout as
// the VNNI kernel's packed B (k in quads, 16 columns × 4 bytes per row), so
// one packing routine serves both.
#include <algorithm>
#include <cstring>
#include <vector>

#include "lockstep/backend/cpu/amx_tiles.hpp"
#include "lockstep/backend/cpu/int8_gemm.hpp"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define LOCKSTEP_INT8_X86 1
#include <immintrin.h>
#endif

namespace lockstep::cpu::int8 {
namespace {

void scalar_kernel(const std::int8_t* A, const std::int8_t* B, std::int32_t* C, std::size_t N, std::size_t M,
                   std::size_t K, std::size_t ldc) {
  for (std::size_t n = 0; n < N; ++n) {
    const std::int8_t* a = A + n * K;
    for (std::size_t m = 0; m < M; ++m) {
      const std::int8_t* b = B + m * K;
      std::int32_t s = 0;
      for (std::size_t k = 0; k < K; ++k) s += static_cast<std::int32_t>(a[k]) * static_cast<std::int32_t>(b[k]);
      C[n * ldc + m] = s;
    }
  }
}

#if defined(LOCKSTEP_INT8_X86)
constexpr std::size_t kPanel = 16;  // columns per packed panel (one zmm of int32, one AMX B tile)

// B [M, K] packed into panels of 16 columns, k in quads:
//   Bp[((p * quads + q) * 16 + j) * 4 + t] = B[(p*16 + j) * K + 4q + t]  (0 outside B)
// `panels` may exceed ceil(M / 16) (zero panels round the count up to a
// multiple of a kernel's register block); `quads` >= ceil(K / 4).
// offset: add 128 to every byte of B (b ^ 0x80: VNNI's unsigned operand); the
// padding stays 0 either way, so it adds nothing to a product.
std::vector<std::int8_t> pack_b(const std::int8_t* B, std::size_t M, std::size_t K, std::size_t panels,
                                std::size_t quads, bool offset = false) {
  std::vector<std::int8_t> bp(panels * quads * kPanel * 4, 0);
  const std::uint32_t flip = offset ? 0x80808080u : 0u;
  const std::size_t whole = K / 4, rest = K % 4;
  for (std::size_t p = 0; p * kPanel < M; ++p) {
    const std::size_t cols = std::min(kPanel, M - p * kPanel);
    std::int8_t* dst = bp.data() + p * quads * kPanel * 4;
    // Writes run contiguously; each quad is one 4-byte copy from one of 16 rows.
    for (std::size_t q = 0; q < whole; ++q)
      for (std::size_t j = 0; j < cols; ++j) {
        std::uint32_t quad;
        std::memcpy(&quad, B + (p * kPanel + j) * K + 4 * q, 4);
        quad ^= flip;
        std::memcpy(dst + (q * kPanel + j) * 4, &quad, 4);
      }
    if (rest != 0)
      for (std::size_t j = 0; j < cols; ++j)
        for (std::size_t t = 0; t < rest; ++t)
          dst[(whole * kPanel + j) * 4 + t] =
              static_cast<std::int8_t>(static_cast<std::uint8_t>(B[(p * kPanel + j) * K + 4 * whole + t]) ^ (flip & 0xFFu));
  }
  return bp;
}

// The offset's correction per row of A: 128·Σ_k A[n, k]; its magnitude is at
// most 128·127·131071 = 2130690176 < 2^31.
std::vector<std::int32_t> offset_corrections(const std::int8_t* A, std::size_t N, std::size_t K) {
  std::vector<std::int32_t> corr(N);
  for (std::size_t n = 0; n < N; ++n) {
    std::int32_t s = 0;
    for (std::size_t k = 0; k < K; ++k) s += A[n * K + k];
    corr[n] = 128 * s;
  }
  return corr;
}

// ---------------------------------------------------------------------------
// AVX-512 VNNI: a register tile of R rows × NV panels (R·NV zmm accumulators),
// B offset by +128 while it is packed, A read in place (copied with zero
// padding only when K is not a multiple of 4, so no quad reads past a row).
// ---------------------------------------------------------------------------
#define LOCKSTEP_VNNI_TARGET __attribute__((target("avx512f,avx512bw,avx512vnni")))
constexpr std::size_t kVnniRows = 6, kVnniPanels = 4;  // 24 accumulators, 4 B vectors, 1 broadcast: 29 of 32 zmm

// k runs in blocks of kQuadBlock quads (256 k): a group's block of packed B
// (4 panels × 64 quads × 64 bytes = 16 KiB) stays in L1 while every row tile
// uses it. Between blocks the raw partial sums Σ a·u park in C; the last
// block subtracts the correction.
constexpr std::size_t kQuadBlock = 64;

template <std::size_t R>
LOCKSTEP_VNNI_TARGET void vnni_tile(const std::int8_t* A, std::size_t lda, const std::int8_t* Bp,
                                    std::size_t quads, std::size_t q0, std::size_t q1, bool first, bool last,
                                    const std::int32_t* corr_rows, std::size_t mn, std::int32_t* C,
                                    std::size_t ldc) {
  // Every loop over the accumulators is unrolled: an index the compiler
  // cannot resolve makes the array addressable and spills it every k.
  __m512i acc[R][kVnniPanels];
  __mmask16 mask[kVnniPanels];
#pragma GCC unroll 8
  for (std::size_t v = 0; v < kVnniPanels; ++v) {
    const std::size_t c0 = v * kPanel;
    const std::size_t cols = c0 < mn ? std::min(kPanel, mn - c0) : 0;
    mask[v] = static_cast<__mmask16>((1u << cols) - 1u);
  }
#pragma GCC unroll 8
  for (std::size_t r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (std::size_t v = 0; v < kVnniPanels; ++v)
      acc[r][v] = first ? _mm512_setzero_si512() : _mm512_maskz_loadu_epi32(mask[v], C + r * ldc + v * kPanel);
  const std::size_t panel_stride = quads * kPanel * 4;
  for (std::size_t q = q0; q < q1; ++q) {
    __m512i bv[kVnniPanels];
#pragma GCC unroll 8
    for (std::size_t v = 0; v < kVnniPanels; ++v) bv[v] = _mm512_loadu_si512(Bp + v * panel_stride + q * kPanel * 4);
#pragma GCC unroll 8
    for (std::size_t r = 0; r < R; ++r) {
      std::int32_t quad;
      std::memcpy(&quad, A + r * lda + q * 4, 4);
      const __m512i a = _mm512_set1_epi32(quad);
#pragma GCC unroll 8
      for (std::size_t v = 0; v < kVnniPanels; ++v) acc[r][v] = _mm512_dpbusd_epi32(acc[r][v], bv[v], a);
    }
  }
  // C = Σ a·u − 128·Σ a, both wrapping (see the top of the file).
#pragma GCC unroll 8
  for (std::size_t r = 0; r < R; ++r) {
    const __m512i corr = _mm512_set1_epi32(last ? corr_rows[r] : 0);
#pragma GCC unroll 8
    for (std::size_t v = 0; v < kVnniPanels; ++v)
      _mm512_mask_storeu_epi32(C + r * ldc + v * kPanel, mask[v], _mm512_sub_epi32(acc[r][v], corr));
  }
}

void vnni_kernel(const std::int8_t* A, const std::int8_t* B, std::int32_t* C, std::size_t N, std::size_t M,
                  std::size_t K, std::size_t ldc) {
  if (N == 0 || M == 0) return;
  const std::size_t quads = (K + 3) / 4;
  const std::size_t groups = (M + kPanel * kVnniPanels - 1) / (kPanel * kVnniPanels);
  const std::vector<std::int8_t> bp = pack_b(B, M, K, groups * kVnniPanels, quads, true);
  const std::vector<std::int32_t> corr = offset_corrections(A, N, K);
  // A in place; with K off a multiple of 4 the last quad of a row would read
  // past it, so then a copy padded with zeros (which meet B's zero padding).
  std::vector<std::int8_t> ap;
  const std::int8_t* a = A;
  std::size_t lda = K;
  if (K % 4 != 0) {
    lda = quads * 4;
    ap.assign(N * lda, 0);
    for (std::size_t n = 0; n < N; ++n) std::memcpy(ap.data() + n * lda, A + n * K, K);
    a = ap.data();
  }
  const std::size_t panel_stride = quads * kPanel * 4;
  for (std::size_t g = 0; g < groups; ++g) {
    const std::size_t m0 = g * kPanel * kVnniPanels, mn = std::min(kPanel * kVnniPanels, M - m0);
    const std::int8_t* bg = bp.data() + g * kVnniPanels * panel_stride;
    for (std::size_t q0 = 0; q0 < quads || q0 == 0; q0 += kQuadBlock) {
      const std::size_t q1 = std::min(quads, q0 + kQuadBlock);
      const bool first = q0 == 0, last = q1 == quads;
      std::size_t n = 0;
      for (; n + kVnniRows <= N; n += kVnniRows)
        vnni_tile<kVnniRows>(a + n * lda, lda, bg, quads, q0, q1, first, last, corr.data() + n, mn, C + n * ldc + m0, ldc);
      for (; n < N; ++n)
        vnni_tile<1>(a + n * lda, lda, bg, quads, q0, q1, first, last, corr.data() + n, mn, C + n * ldc + m0, ldc);
      if (quads == 0) break;
    }
  }
}

// ---------------------------------------------------------------------------
// AVX-512 VNNI for few rows (a decode step), without packing: each cell is a
// dot product over K in 64-byte chunks, with the same offset (u = b ^ 0x80,
// here applied to each chunk as it is loaded; 128·Σ_k a[n, k] per row), and up
// to kDotRows rows share each chunk of B.
// ---------------------------------------------------------------------------
constexpr std::size_t kDotRows = 4;

LOCKSTEP_VNNI_TARGET std::uint32_t lane_sum(__m512i v) {  // wrapping, like the lanes
  // Through memory: GCC 12's 512->256 extract intrinsics trip -Wmaybe-uninitialized.
  alignas(64) std::uint32_t lanes[16];
  _mm512_store_si512(lanes, v);
  std::uint32_t s = 0;
  for (std::uint32_t x : lanes) s += x;
  return s;
}

template <std::size_t R>
LOCKSTEP_VNNI_TARGET void vnni_dot_rows(const std::int8_t* A, const std::int8_t* B, std::int32_t* C, std::size_t M,
                                        std::size_t K, std::size_t ldc, const std::int32_t* corr128) {
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  const std::size_t whole = K / 64, rest = K % 64;
  // Bytes past K load as 0: B's become u = 128, A's stay 0, their product 0.
  const __mmask64 tail = rest != 0 ? (~0ull >> (64 - rest)) : 0;
  for (std::size_t m = 0; m < M; ++m) {
    const std::int8_t* b = B + m * K;
    __m512i acc[R];
#pragma GCC unroll 8
    for (std::size_t r = 0; r < R; ++r) acc[r] = _mm512_setzero_si512();
    for (std::size_t c = 0; c < whole; ++c) {
      const __m512i bu = _mm512_xor_si512(_mm512_loadu_si512(b + 64 * c), flip);
#pragma GCC unroll 8
      for (std::size_t r = 0; r < R; ++r)
        acc[r] = _mm512_dpbusd_epi32(acc[r], bu, _mm512_loadu_si512(A + r * K + 64 * c));
    }
    if (rest != 0) {
      const __m512i bu = _mm512_xor_si512(_mm512_maskz_loadu_epi8(tail, b + 64 * whole), flip);
#pragma GCC unroll 8
      for (std::size_t r = 0; r < R; ++r)
        acc[r] = _mm512_dpbusd_epi32(acc[r], bu, _mm512_maskz_loadu_epi8(tail, A + r * K + 64 * whole));
    }
#pragma GCC unroll 8
    for (std::size_t r = 0; r < R; ++r)
      C[r * ldc + m] = static_cast<std::int32_t>(lane_sum(acc[r]) - static_cast<std::uint32_t>(corr128[r]));
  }
}

void vnni_dot_kernel(const std::int8_t* A, const std::int8_t* B, std::int32_t* C, std::size_t N, std::size_t M,
                     std::size_t K, std::size_t ldc) {
  const std::vector<std::int32_t> corr128 = offset_corrections(A, N, K);
  std::size_t n = 0;
  for (; n + kDotRows <= N; n += kDotRows)
    vnni_dot_rows<kDotRows>(A + n * K, B, C + n * ldc, M, K, ldc, corr128.data() + n);
  switch (N - n) {
    case 3: vnni_dot_rows<3>(A + n * K, B, C + n * ldc, M, K, ldc, corr128.data() + n); break;
    case 2: vnni_dot_rows<2>(A + n * K, B, C + n * ldc, M, K, ldc, corr128.data() + n); break;
    case 1: vnni_dot_rows<1>(A + n * K, B, C + n * ldc, M, K, ldc, corr128.data() + n); break;
    default: break;
  }
}

// ---------------------------------------------------------------------------
// AMX-INT8 tiles (tdpbssd: s8 × s8, int32 accumulators).
// ---------------------------------------------------------------------------
#define LOCKSTEP_AMX_TARGET __attribute__((target("amx-tile,amx-int8")))
constexpr std::size_t kTile = 16, kTileK = 64;

// The tile instructions the kernel uses, on the hardware. (The intrinsics
// take tile numbers as literals: each tile is named in the code.)
struct HwTiles {
  // C: 16 int32; A: 64 bytes of k; B: 16 columns × 4 bytes; 16 rows (B: k-quads) each.
  LOCKSTEP_AMX_TARGET void begin() { amx::load_uniform_tile_config(); }
  LOCKSTEP_AMX_TARGET void zero() {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
  }
  // C[i][j] += A_i · B_j for the two A tiles (rows a0, a1; stride lda) and
  // the two B tiles (b0, b1; stride 64).
  LOCKSTEP_AMX_TARGET void step(const std::int8_t* a0, const std::int8_t* a1, std::size_t lda, const std::int8_t* b0,
                                const std::int8_t* b1) {
    _tile_loadd(4, a0, lda);
    _tile_loadd(5, a1, lda);
    _tile_loadd(6, b0, 64);
    _tile_loadd(7, b1, 64);
    _tile_dpbssd(0, 4, 6);
    _tile_dpbssd(1, 4, 7);
    _tile_dpbssd(2, 5, 6);
    _tile_dpbssd(3, 5, 7);
  }
  LOCKSTEP_AMX_TARGET void store(int t, std::int32_t* out) {  // C tile t (0..3: row-major 2 × 2) to 16 × 16
    switch (t) {
      case 0: _tile_stored(0, out, 64); break;
      case 1: _tile_stored(1, out, 64); break;
      case 2: _tile_stored(2, out, 64); break;
      default: _tile_stored(3, out, 64); break;
    }
  }
  LOCKSTEP_AMX_TARGET void end() { _tile_release(); }
};

// The same instructions in C++, after Intel's pseudo-code for TILELOADD and
// TDPBSSD: the AMX kernel's packing, padding, blocking and stores run (and
// are gated) on machines without AMX. Only the instruction mapping above is
// left to a machine that has the tiles.
struct EmulatedTiles {
  std::int32_t c[4][kTile][kTile];
  void begin() {}
  void zero() { std::memset(c, 0, sizeof c); }
  void step(const std::int8_t* a0, const std::int8_t* a1, std::size_t lda, const std::int8_t* b0,
            const std::int8_t* b1) {
    const std::int8_t* a[2] = {a0, a1};
    const std::int8_t* b[2] = {b0, b1};
    for (int t = 0; t < 4; ++t)  // tdpbssd: c.row[m].dword[n] += Σ_{k<16} Σ_{i<4} a.row[m].byte[4k+i]·b.row[k].byte[4n+i]
      for (std::size_t m = 0; m < kTile; ++m)
        for (std::size_t n = 0; n < kTile; ++n) {
          std::int32_t s = c[t][m][n];
          for (std::size_t k = 0; k < kTile; ++k)
            for (std::size_t i = 0; i < 4; ++i)
              s += a[t / 2][m * lda + 4 * k + i] * b[t % 2][k * 64 + 4 * n + i];
          c[t][m][n] = s;
        }
  }
  void store(int t, std::int32_t* out) { std::memcpy(out, c[t], sizeof c[t]); }
  void end() {}
};

// AMX-INT8: a 32 × 32 block of C in four accumulator tiles (tmm0..3), two A
// tiles (tmm4, 5: 16 rows × 64 k) and two B tiles (tmm6, 7: 16 k-quads × 16
// columns × 4). A is packed with zeros to rows in 32s and K in 64s, B to
// panels in pairs and k-quads in 16s.
template <class Tiles>
LOCKSTEP_AMX_TARGET void amx_blocks(Tiles& tiles, const std::int8_t* ap, std::size_t lda, const std::int8_t* bp,
                                    std::size_t quads, std::size_t N, std::size_t M, std::int32_t* C, std::size_t ldc) {
  tiles.begin();
  alignas(64) std::int32_t out[kTile * kTile];
  const std::size_t panel_stride = quads * kPanel * 4;
  for (std::size_t n0 = 0; n0 < N; n0 += 2 * kTile) {
    for (std::size_t m0 = 0; m0 < M; m0 += 2 * kTile) {
      tiles.zero();
      const std::int8_t* a0 = ap + n0 * lda;
      const std::int8_t* b0 = bp + (m0 / kPanel) * panel_stride;
      for (std::size_t k0 = 0; k0 < lda; k0 += kTileK)
        tiles.step(a0 + k0, a0 + kTile * lda + k0, lda, b0 + k0 * kPanel, b0 + panel_stride + k0 * kPanel);
      // Each tile through a small buffer: only the cells inside C are written.
      for (int t = 0; t < 4; ++t) {
        const std::size_t r0 = n0 + static_cast<std::size_t>(t / 2) * kTile;
        const std::size_t c0 = m0 + static_cast<std::size_t>(t % 2) * kTile;
        if (r0 >= N || c0 >= M) continue;
        tiles.store(t, out);
        const std::size_t rn = std::min(kTile, N - r0), cn = std::min(kTile, M - c0);
        for (std::size_t r = 0; r < rn; ++r) std::memcpy(C + (r0 + r) * ldc + c0, out + r * kTile, cn * 4);
      }
    }
  }
  tiles.end();
}

template <class Tiles>
void amx_kernel(const std::int8_t* A, const std::int8_t* B, std::int32_t* C, std::size_t N, std::size_t M,
                std::size_t K, std::size_t ldc) {
  if (N == 0 || M == 0) return;
  const std::size_t lda = (K + kTileK - 1) / kTileK * kTileK, quads = lda / 4;
  const std::size_t rows = (N + 2 * kTile - 1) / (2 * kTile) * (2 * kTile);
  const std::size_t panels = (M + 2 * kPanel - 1) / (2 * kPanel) * 2;
  const std::vector<std::int8_t> bp = pack_b(B, M, K, panels, quads);
  std::vector<std::int8_t> ap(rows * lda, 0);
  if (K != 0)
    for (std::size_t n = 0; n < N; ++n) std::memcpy(ap.data() + n * lda, A + n * K, K);
  Tiles tiles;
  amx_blocks(tiles, ap.data(), lda, bp.data(), quads, N, M, C, ldc);
}
#endif  // LOCKSTEP_INT8_X86

}  // namespace

Impl scalar_impl() { return {"scalar", scalar_kernel}; }

#if defined(LOCKSTEP_INT8_X86)
Impl vnni_impl() { return {"vnni", vnni_kernel}; }
Impl vnni_dot_impl() { return {"vnni-dot", vnni_dot_kernel}; }
Impl amx_impl() { return {"amx", amx_kernel<HwTiles>}; }
Impl amx_emulated_impl() { return {"amx-emulated", amx_kernel<EmulatedTiles>}; }
#else
Impl vnni_impl() { return {"vnni", nullptr}; }
Impl vnni_dot_impl() { return {"vnni-dot", nullptr}; }
Impl amx_impl() { return {"amx", nullptr}; }
Impl amx_emulated_impl() { return {"amx-emulated", nullptr}; }
#endif

}  // namespace lockstep::cpu::int8
