// A Linear's product for a few rows (a decode pass reads every weight once)
// on weights packed in column panels, f32 or — where f16 holds every weight
// exactly (a tied F16 embedding used as the LM head, an F16 file's weights) —
// f16: half the bytes; or — where every block of 32 weights along k is int8
// codes times one f16 scale, exactly (a GGUF Q8_0 file's weights, which the
// loader widened to their f32 values) — the codes and scales: 1.0625 bytes a
// weight, widened back to the same f32 values in registers.
//
//   y[n, m] = canonical_nan(chain over k ascending of fma(x[n, k], w[m, k], acc) from +0)
//
// the chain of cpu::gemm and ops::matmul (dot_seq) on the same products (an
// f16 weight widens to f32 exactly: the weight itself), so the same bits as
// cpu::gemm_packed. The weights are stored in panels of 64 output columns,
// k-major inside a panel ([panel][K][64]), so that a panel is one contiguous
// stream (cpu::pack_b's [K][ldb] rows put every k of a 64-column tile on
// another page: the hardware prefetchers stop at page boundaries); the 64
// chains of a panel run in vector lanes, one fma per lane per k (AVX-512:
// four zmm; AVX2: two passes of four ymm; elsewhere one num::fma_rn per cell). Threads split the panels
// (output columns); every chain is computed whole by one thread, so the bits
// depend neither on the thread count nor on the other rows.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace lockstep::cpu {

// E: float, or std::uint16_t holding f16 bits.
template <class E>
struct Panels {
  static constexpr std::size_t kWidth = 64;  // output columns a panel
  std::size_t rows = 0, cols = 0;            // the weight's M (outputs), K (inputs)
  std::vector<E> w;                          // [ceil(M / 64)][K][64], zero past M
  std::size_t bytes() const { return w.size() * sizeof(E); }
};
using FloatPanels = Panels<float>;
using HalfPanels = Panels<std::uint16_t>;

// Weights w[m, k] = code · scale, exactly (the f32 product, which is exact:
// 8 × 11 significant bits), one f16 scale per 32 consecutive k of a row.
struct Q8Panels {
  static constexpr std::size_t kWidth = 64;  // output columns a panel (as Panels)
  static constexpr std::size_t kBlock = 32;  // weights along k that share a scale (GGUF Q8_0's block)
  std::size_t rows = 0, cols = 0;            // M, K (K a multiple of kBlock)
  std::vector<std::int8_t> codes;            // [ceil(M / 64)][K][64], zero past M
  std::vector<std::uint16_t> scales;         // f16 bits, [ceil(M / 64)][K / 32][64], zero past M
  std::size_t bytes() const { return codes.size() + scales.size() * sizeof(std::uint16_t); }
  // The weight w[m, k] (the value the product reads).
  float at(std::size_t m, std::size_t k) const;
};

// w [M, K] (nn.Linear's layout) into panels.
FloatPanels pack_panels(const float* w, std::size_t M, std::size_t K, int threads);
// The same as f16, or false (and `out` left empty) when some weight is not an
// f16 value (its f16 round trip changes its bits).
bool pack_half(const float* w, std::size_t M, std::size_t K, HalfPanels& out, int threads);

// The same as Q8 codes and scales, or false (and `out` left empty) when K is
// not a whole number of blocks or some block of 32 weights is not codes in
// [-128, 127] times one positive f16 scale bit for bit (-0 included: a code
// times a positive scale is never -0). An all-zero block takes scale 0.
bool pack_q8(const float* w, std::size_t M, std::size_t K, Q8Panels& out, int threads);

// y [N, M] (row stride M) = the chains of x [N, K] (row stride K) against the weights.
void panel_gemm(const FloatPanels& w, const float* x, std::size_t N, float* y, int threads);
void panel_gemm(const HalfPanels& w, const float* x, std::size_t N, float* y, int threads);
void panel_gemm(const Q8Panels& w, const float* x, std::size_t N, float* y, int threads);

}  // namespace lockstep::cpu
