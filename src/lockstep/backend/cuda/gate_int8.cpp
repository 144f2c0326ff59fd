// The int8 GEMM's gate cases (gate.hpp's int8_cases): every implementation
// of int8_gemm.hpp against ops::int8_matmul_nt, the CPU's scalar integer
// product, cell for cell, on shapes ragged in every extent (tails past each
// block tile, K off every multiple of 16 and 64, odd M, operands off 16-byte
// alignment, K = 0) and on extreme codes (±127 rows whose sums reach
// 127²·K, K = 131071 once: the largest K the units admit). C is written into
// the middle of a buffer filled with the pass's pattern (the NaN sentinel or
// the allocator's poison), and the cells before and after it must keep it.
// cuBLASLt runs only the shapes its requirements admit (K % 4 == 0, M % 4 ==
// 0, 16-byte aligned operands: int8_gemm_launch.hpp); it and the IMMA tiles
// are optional cases: a failure refuses that implementation, not the run.
// The row quantizer's cases (row_quantize_cases) are here too: int8 codes;
// and the fused RMSNorm + row quantizer's (norm_quantize_cases).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <exception>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "lockstep/ad/rng.hpp"
#include "lockstep/backend/cpu/ops.hpp"
#include "lockstep/backend/cuda/device.hpp"
#include "lockstep/backend/cuda/gate.hpp"
#include "lockstep/backend/cuda/gemm_launch.hpp"
#include "lockstep/backend/cuda/int8_gemm.hpp"
#include "lockstep/backend/cuda/pointwise_launch.hpp"
#include "lockstep/num/fp.hpp"
#include "lockstep/ops/arg_arrays.hpp"
#include "lockstep/ops/quant.hpp"

namespace lockstep::cuda::gate {
namespace {

constexpr std::uint32_t kSentinel = 0x7FC0DEADu;  // as the gate driver's: a value no product writes here
constexpr std::size_t kLead = 16, kTail = 37;     // C's guard cells (kLead keeps C 64-byte aligned)

enum class Codes { random, extreme };

struct Int8Shape {
  std::size_t N, M, K;
  Codes codes = Codes::random;
  std::size_t offset = 0;  // A and B start this many bytes past an aligned address
};

std::string label(const Int8Shape& s) {
  return fmt::format("N {} M {} K {}{}{}", s.N, s.M, s.K, s.codes == Codes::extreme ? " extreme codes" : "",
                     s.offset != 0 ? fmt::format(" A, B at +{} byte", s.offset) : "");
}

// rows × K codes. random: uniform in [-127, 127], with ±127 and 0 sprinkled;
// extreme: every code ±127, row 0 all +127 and row 1 all -127 (so A's row 0
// against B's rows 0 and 1 gives ±127²·K, the largest sums).
std::vector<std::int8_t> draw(ad::Rng& rng, std::size_t rows, std::size_t K, Codes codes) {
  std::vector<std::int8_t> q(rows * K);
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t k = 0; k < K; ++k) {
      int v;
      if (codes == Codes::extreme) {
        v = r == 0 ? 127 : r == 1 ? -127 : (rng.below(2) == 0 ? 127 : -127);
      } else {
        const std::size_t u = rng.below(16);
        v = u == 0 ? 127 : u == 1 ? -127 : u == 2 ? 0 : static_cast<int>(rng.below(255)) - 127;
      }
      q[r * K + k] = static_cast<std::int8_t>(v);
    }
  return q;
}

// "" or the first differing cell of the whole C buffer (guards included).
std::string compare(const std::vector<std::int32_t>& want, const std::vector<std::int32_t>& got, std::size_t M,
                    std::uint32_t fill) {
  const std::size_t cells = want.size();
  for (std::size_t i = 0; i < got.size(); ++i) {
    const bool inside = i >= kLead && i < kLead + cells;
    const std::int32_t w = inside ? want[i - kLead] : static_cast<std::int32_t>(fill);
    if (got[i] == w) continue;
    if (!inside)
      return fmt::format("C's guard cell {} {} C was written: 0x{:08x}, the fill 0x{:08x}",
                         i < kLead ? kLead - i : i - kLead - cells + 1, i < kLead ? "before" : "after",
                         static_cast<std::uint32_t>(got[i]), fill);
    const std::size_t c = i - kLead;
    return fmt::format("C[{}] (row {}, col {}): cpu {} vs cuda {}", c, c / M, c % M, w, got[i]);
  }
  return "";
}

std::string run_case(Int8Impl impl, const Int8Shape& s, std::uint64_t seed) {
  ad::Rng rng(seed);
  const std::vector<std::int8_t> a = draw(rng, s.N, s.K, s.codes), b = draw(rng, s.M, s.K, s.codes);
  const std::vector<std::int32_t> want = ops::int8_matmul_nt(a, b, s.N, s.M, s.K);
  DeviceBuffer<std::int8_t> da(s.offset + a.size() + 16), db(s.offset + b.size() + 16);
  if (!a.empty()) copy_to_device(da.data() + s.offset, a.data(), a.size());
  if (!b.empty()) copy_to_device(db.data() + s.offset, b.data(), b.size());
  DeviceBuffer<std::int32_t> dc(kLead + s.N * s.M + kTail);
  const std::optional<std::uint32_t> p = poison();
  const std::uint32_t fill = p ? *p : kSentinel;
  fill_words(dc.data(), fill, dc.size());
  const std::string why =
      int8_gemm_nt_with(impl, da.data() + s.offset, db.data() + s.offset, dc.data() + kLead, s.N, s.M, s.K);
  if (!why.empty()) return "not launched: " + why;
  synchronize("int8 gemm gate");
  return compare(want, dc.download(), s.M, fill);
}

std::vector<Int8Shape> own_shapes() {
  return {
      {1, 1, 1},
      {37, 65, 129},                 // every extent ragged, K odd: byte loads
      {130, 260, 96},                // past 128 rows and 256 columns; K % 64 != 0 on the 16-byte loads
      {129, 131, 144},               // odd M (its last column alone); K tail of 16
      {257, 264, 192},               // several block tiles each way
      {100, 136, 1000},              // K % 4 == 0, K % 16 != 0
      {67, 70, 256, Codes::random, 1},  // misaligned operands: byte loads
      {40, 40, 4096, Codes::extreme},
      {3, 5, ops::kMaxQuantK, Codes::extreme},  // K = 131071: sums up to 127²·131071 = 2114044159
      {2, 3, 0},                     // K = 0: C = 0
  };
}

std::vector<Int8Shape> cublaslt_shapes() {
  return {
      {4, 4, 4},
      {37, 68, 132},
      {130, 260, 96},
      {257, 264, 192},
      {100, 136, 1000},
      {40, 40, 4096, Codes::extreme},
      {3, 8, ops::kMaxQuantK - 3, Codes::extreme},  // the largest K % 4 == 0
  };
}

// --- the row quantizer (gemm_launch.hpp's row_quantize_i8) ------------------
// Against ops::quantize_rows (the CPU's), codes and steps, and the dequantized
// q·step where asked: the warp-a-row path and the CTA-a-row path of few rows
// (quant.cu: N <= 32, K <= 8192, 16-byte loads where aligned), the decode's
// widths (2560, 6912) among them. Each row's values span a different scale;
// row 1 holds -0, +inf and a NaN where it is long enough. The codes are
// written into the middle of a buffer filled with the pass's pattern, which
// the bytes before and after must keep.
struct QuantShape {
  std::size_t N, K;
  std::size_t offset = 0;  // x starts this many floats past an aligned address
};

std::string quant_label(const QuantShape& s, bool dequant) {
  return fmt::format("N {} K {}{}{}", s.N, s.K, s.offset != 0 ? fmt::format(" x at +{} float", s.offset) : "",
                     dequant ? " dequantized" : "");
}

std::string run_quant_case(const QuantShape& s, bool with_dequant, std::uint64_t seed) {
  ad::Rng rng(seed);
  std::vector<float> x(s.N * s.K);
  for (std::size_t n = 0; n < s.N; ++n) {
    const double scale = std::ldexp(1.0, static_cast<int>(n % 7) * 3 - 9);
    for (std::size_t k = 0; k < s.K; ++k) x[n * s.K + k] = static_cast<float>(rng.normal() * scale);
  }
  if (s.N > 1 && s.K > 3) {
    x[s.K] = -0.0f;
    x[s.K + 1] = std::numeric_limits<float>::infinity();
    x[s.K + 2] = std::numeric_limits<float>::quiet_NaN();
  }
  const float floor_x = static_cast<float>(ops::BitLinear::kActFloor);
  const ops::RowCodes<float> want = ops::quantize_rows(x.data(), s.N, s.K, floor_x);
  const std::optional<std::uint32_t> p = poison();
  const std::uint32_t fill = p ? *p : kSentinel;
  DeviceBuffer<float> dx(s.offset + x.size() + 1), dstep(s.N), ddeq(with_dequant ? s.N * s.K + 1 : 1);
  if (!x.empty()) copy_to_device(dx.data() + s.offset, x.data(), x.size() * sizeof(float));
  const std::size_t code_words = (4 * kLead + s.N * s.K + 4 * kTail + 3) / 4;
  DeviceBuffer<std::uint32_t> dcodes(code_words);
  fill_words(dcodes.data(), fill, code_words);
  fill_words(dstep.data(), fill, dstep.size());
  fill_words(ddeq.data(), fill, ddeq.size());
  auto* codes = reinterpret_cast<std::int8_t*>(dcodes.data()) + 4 * kLead;
  launch::row_quantize_i8(dx.data() + s.offset, s.N, s.K, floor_x, codes, dstep.data(),
                          with_dequant ? ddeq.data() : nullptr);
  synchronize("row_quantize_i8 gate");
  std::vector<std::uint32_t> got_words = dcodes.download();
  const auto* got = reinterpret_cast<const std::int8_t*>(got_words.data());
  const auto fill_byte = [fill](std::size_t i) { return static_cast<std::int8_t>((fill >> (8 * (i % 4))) & 0xFF); };
  for (std::size_t i = 0; i < 4 * code_words; ++i) {
    const bool inside = i >= 4 * kLead && i < 4 * kLead + s.N * s.K;
    const std::int8_t w = inside ? want.q[i - 4 * kLead] : fill_byte(i);
    if (got[i] == w) continue;
    if (!inside) return fmt::format("codes: the guard byte {} outside the codes was written", i);
    const std::size_t c = i - 4 * kLead;
    return fmt::format("codes[{}] (row {}, col {}): cpu {} vs cuda {}", c, c / s.K, c % s.K, int(w), int(got[i]));
  }
  std::string d = first_difference("step", want.step, dstep.download());
  if (!d.empty() || !with_dequant) return d;
  std::vector<float> deq(s.N * s.K + 1, num::float_of(fill));
  for (std::size_t n = 0; n < s.N; ++n)
    for (std::size_t k = 0; k < s.K; ++k)
      deq[n * s.K + k] = static_cast<float>(want.q[n * s.K + k]) * want.step[n];
  return first_difference("dequantized", deq, ddeq.download(), s.K);
}

std::vector<QuantShape> quant_shapes() {
  return {
      {1, 2560},  {8, 2560},  {32, 2560}, {33, 2560},   // the decode's rows; 33: the warp-a-row path
      {1, 6912},  {32, 6912}, {33, 6912},               //
      {3, 2561},  {2, 1},     {5, 97},                  // K % 4 != 0: scalar loads
      {4, 2560, 1},                                     // x off 16-byte alignment: scalar loads
      {5, 8192}, {2, 8193},                             // the CTA path's widest row, and one past it
  };
}

// --- the fused RMSNorm + row quantizer (pointwise_launch.hpp's rmsnorm_quantize_i8) ---
// Against the CPU's RMSNorm (cpu::OpKernels: y, rstd), then ops::quantize_rows of that y
// (codes, step): the fused CTA-a-row kernel (rows <= 32, dim <= 8192; 16-byte
// and scalar loads, x off alignment, y over x) and the two-launch path past
// it. x: the norm gates' rows of very different scales (ops::Seed norm_rows:
// ordinary, 1e15, 1e-20, a constant row, a large mean) with -0 cells. Every
// output is written into the middle of a buffer filled with the pass's
// pattern, which the cells before and after must keep.
struct NormQuantShape {
  std::size_t N, D;
  std::size_t offset = 0;  // x and y start this many floats past an aligned address
  bool in_place = false;   // y = x
};

std::string norm_quant_label(const NormQuantShape& s) {
  return fmt::format("rows {} dim {}{}{}", s.N, s.D, s.offset != 0 ? fmt::format(" x, y at +{} float", s.offset) : "",
                     s.in_place ? " y=x" : "");
}

// "" or the first cell of a guarded float buffer that differs: want at [kLead, kLead + n), the fill around.
std::string guarded_difference(std::string_view tensor, const std::vector<float>& want, const std::vector<float>& got,
                               std::size_t lead, std::uint32_t fill, std::size_t row_len) {
  std::vector<float> full(got.size(), num::float_of(fill));
  std::copy(want.begin(), want.end(), full.begin() + static_cast<std::ptrdiff_t>(lead));
  const std::string d = first_difference(tensor, full, got);
  if (d.empty()) return d;
  return d + fmt::format(" (the {} starts at cell {}, rows of {})", tensor, lead, row_len);
}

std::string run_norm_quant_case(const NormQuantShape& s, std::uint64_t seed) {
  ad::Rng rng(seed);
  const std::size_t n = s.N * s.D;
  std::vector<float> x(n), w(s.D);
  ops::seed_floats(ops::Seed::of(ops::Seed::Kind::norm_rows, s.D), rng, x.data(), n);
  ops::seed_floats(ops::Seed::normal(1.0), rng, w.data(), s.D);
  for (std::size_t i = 5; i < n; i += 97) x[i] = -0.0f;
  // The CPU kernel set's RMSNorm (what the CPU decode runs; = ops::RmsNorm::forward), then the spec's quantizer.
  const ops::NormConfig cfg{s.N, s.D, 1e-5};
  std::vector<float> y_want(n), rstd_want(s.N);
  cpu::OpKernels().run(cfg, ops::RmsNorm::FwdArgs<float>{x.data(), w.data(), y_want.data(), rstd_want.data()});
  const float floor_x = static_cast<float>(ops::BitLinear::kActFloor);
  const ops::RowCodes<float> codes_want = ops::quantize_rows(y_want.data(), s.N, s.D, floor_x);
  const std::optional<std::uint32_t> p = poison();
  const std::uint32_t fill = p ? *p : kSentinel;
  // x and y: the row data at lead = kLead + offset floats (kLead keeps it 64-byte aligned before the offset).
  const std::size_t lead = kLead + s.offset, cells = lead + n + kTail;
  DeviceBuffer<float> dx(cells), dy(cells), dw(s.D + 1), drstd(kLead + s.N + kTail), dstep(kLead + s.N + kTail);
  const std::size_t code_words = (4 * kLead + n + 4 * kTail + 3) / 4;
  DeviceBuffer<std::uint32_t> dcodes(code_words);
  for (auto* b : {&dx, &dy, &drstd, &dstep}) fill_words(b->data(), fill, b->size());
  fill_words(dcodes.data(), fill, code_words);
  if (n > 0) copy_to_device(dx.data() + lead, x.data(), n * sizeof(float));
  dw.upload(w);
  float* y = s.in_place ? dx.data() + lead : dy.data() + lead;
  auto* codes = reinterpret_cast<std::int8_t*>(dcodes.data()) + 4 * kLead;
  launch::rmsnorm_quantize_i8(s.N, s.D, static_cast<float>(cfg.eps), dx.data() + lead, dw.data(), y,
                              drstd.data() + kLead, floor_x, codes, dstep.data() + kLead);
  synchronize("rmsnorm_quantize_i8 gate");
  std::string d = guarded_difference("y", y_want, (s.in_place ? dx : dy).download(), lead, fill, s.D);
  if (!d.empty()) return d;
  if (!s.in_place) {  // x is read only
    d = guarded_difference("x (an input)", x, dx.download(), lead, fill, s.D);
    if (!d.empty()) return d;
  }
  d = guarded_difference("rstd", rstd_want, drstd.download(), kLead, fill, 1);
  if (!d.empty()) return d;
  d = guarded_difference("step", codes_want.step, dstep.download(), kLead, fill, 1);
  if (!d.empty()) return d;
  std::vector<std::uint32_t> got_words = dcodes.download();
  const auto* got = reinterpret_cast<const std::int8_t*>(got_words.data());
  const auto fill_byte = [fill](std::size_t i) { return static_cast<std::int8_t>((fill >> (8 * (i % 4))) & 0xFF); };
  for (std::size_t i = 0; i < 4 * code_words; ++i) {
    const bool inside = i >= 4 * kLead && i < 4 * kLead + n;
    const std::int8_t c = inside ? codes_want.q[i - 4 * kLead] : fill_byte(i);
    if (got[i] == c) continue;
    if (!inside) return fmt::format("codes: the guard byte {} outside the codes was written", i);
    const std::size_t k = i - 4 * kLead;
    return fmt::format("codes[{}] (row {}, col {}): cpu {} vs cuda {}", k, k / s.D, k % s.D, int(c), int(got[i]));
  }
  return "";
}

std::vector<NormQuantShape> norm_quant_shapes() {
  return {
      {1, 2560},  {8, 2560},  {32, 2560},        // the decode's rows at the 2B4T widths: the fused kernel, 16-byte
      {1, 6912},  {32, 6912}, {5, 8192},         // the FFN width; the widest fused row (two 4096-chunks)
      {3, 2561},  {2, 1},     {7, 97},           // D % 4 != 0: scalar loads
      {4, 2560, 1},                              // x and y off 16-byte alignment: scalar loads
      {8, 2560, 0, true}, {3, 999, 0, true},     // y over x (16-byte and scalar)
      {33, 2560}, {33, 6912}, {2, 8193},         // past the fused kernel: the two launches
  };
}

}  // namespace

std::vector<Case> norm_quantize_cases() {
  std::vector<Case> out;
  for (const NormQuantShape& s : norm_quant_shapes()) {
    Case c{"rmsnorm_quantize_i8", norm_quant_label(s), "rmsnorm_quantize_i8", 0, {}};
    c.run = [s](std::uint64_t seed) { return run_norm_quant_case(s, seed); };
    out.push_back(std::move(c));
  }
  return out;
}

std::vector<Case> row_quantize_cases() {
  std::vector<Case> out;
  for (const QuantShape& s : quant_shapes())
    for (bool dequant : {false, true}) {
      Case c{"row_quantize_i8", quant_label(s, dequant), "row_quantize_i8", 0, {}};
      c.run = [s, dequant](std::uint64_t seed) { return run_quant_case(s, dequant, seed); };
      out.push_back(std::move(c));
    }
  return out;
}

std::vector<Case> int8_cases() {
  std::vector<Case> out;
  for (const Int8Impl impl : {Int8Impl::dp4a, Int8Impl::imma_128x128, Int8Impl::imma_128x256, Int8Impl::cublaslt}) {
    const std::string kernel = fmt::format("int8_gemm_nt {}", int8_impl_name(impl));
    for (const Int8Shape& s : impl == Int8Impl::cublaslt ? cublaslt_shapes() : own_shapes()) {
      Case c{kernel, label(s), "int8_gemm", 0, {}};
      c.optional = impl != Int8Impl::dp4a;
      c.run = [impl, s, kernel](std::uint64_t seed) {
        std::string diff;
        try {
          diff = run_case(impl, s, seed);
        } catch (const std::exception& e) {
          diff = std::string("error: ") + e.what();
        }
        int8_gate_record(impl, diff, fmt::format("{} on {}{}", kernel, label(s), poison() ? " (dirty-buffer pass)" : ""));
        return diff;
      };
      out.push_back(std::move(c));
    }
  }
  return out;
}

}  // namespace lockstep::cuda::gate
