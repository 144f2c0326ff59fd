// The two-pass column quantizer's gate cases (gate.hpp's col_quant_cases):
// launch::col_quantize_i8_2p against the CPU's units::quantize_cols_i8 (the
// codes and steps the CPU kernel set computes for ops::quantize_cols) and
// units::bias_gradient (ops::column_sums), on shapes ragged against every
// block of the kernel (its 512-row chunks and blocks, 128-row tiles, 64-row
// warp segments, 256-row sum tiles, 32- and 8-column strips, rows off a
// multiple of 4 for the word stores, codes off word alignment), with and
// without the column sums, at both floors (1e-8: x and W; 2^-100: dy), on
// values whose column maxima sit in the last rows, and on columns with NaN
// (at chunk and segment edges, in the last row), ±inf, -0, subnormals, all
// zeros and all below the floor. Codes are compared byte for byte and steps
// bit for bit, the sums bit for bit with any NaN matching any NaN (a NaN's
// payload is not part of the numeric contract: gate_train.cpp); the cells
// around every output must keep their fill. The cases are optional: a
// failure refuses the two-pass kernel (col_quant.hpp), and the engine keeps
// the three-pass one.
#include <cstdint>
#include <exception>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "lockstep/ad/rng.hpp"
#include "lockstep/backend/cpu/units_quant.hpp"
#include "lockstep/backend/cuda/col_quant.hpp"
#include "lockstep/backend/cuda/col_quant_launch.hpp"
#include "lockstep/backend/cuda/device.hpp"
#include "lockstep/backend/cuda/gate.hpp"
#include "lockstep/num/fp.hpp"

namespace lockstep::cuda::gate {
namespace {

constexpr std::uint32_t kSentinel = 0x7FC0DEADu;   // around steps and sums: a value no kernel writes there
constexpr std::uint32_t kCodeFill = 0x80808080u;   // around the codes: -128, never a code
constexpr std::size_t kLead = 16, kTail = 37;      // guard cells (kLead keeps the outputs 16-byte aligned)

enum class Values { normal, specials };

struct ColShape {
  std::size_t rows, cols;
  bool sums;
  Values values = Values::normal;
  bool dy_floor = false;        // 2^-100 (the cotangent's) instead of 1e-8
  std::size_t code_offset = 0;  // the codes start this many bytes past an aligned address
};

std::string label(const ColShape& s) {
  return fmt::format("rows {} cols {}{}{}{}{}", s.rows, s.cols, s.sums ? " with column sums" : "",
                     s.values == Values::specials ? " NaN/inf/-0/subnormal columns" : "",
                     s.dy_floor ? " floor 2^-100" : "",
                     s.code_offset != 0 ? fmt::format(" codes at +{} byte", s.code_offset) : "");
}

// x [rows, cols]: normals whose scale varies by column over 2^-40 .. 2^20,
// each column's largest value planted among its last rows (so a join that
// loses the last chunk changes the codes); with specials, columns of NaN,
// ±inf, -0, subnormals, zeros and values below the floor, NaN on the edges of
// the kernel's chunks (rows 63, 64, 511, 512, 513) and in the last row.
std::vector<float> draw(ad::Rng& rng, const ColShape& s) {
  std::vector<float> x(s.rows * s.cols);
  for (std::size_t j = 0; j < s.cols; ++j) {
    const float scale = num::float_of(static_cast<std::uint32_t>(127 - 40 + static_cast<int>(rng.below(61))) << 23);
    for (std::size_t n = 0; n < s.rows; ++n) x[n * s.cols + j] = static_cast<float>(rng.normal()) * scale;
    if (s.rows > 0) {
      const std::size_t at = s.rows - 1 - rng.below(s.rows < 7 ? s.rows : 7);
      x[at * s.cols + j] = (rng.below(2) == 0 ? 5.5f : -5.5f) * scale;
    }
  }
  if (s.values == Values::specials && s.rows > 0) {
    const float nan = num::float_of(0x7FC00000u), inf = num::float_of(0x7F800000u);
    const float sub = num::float_of(0x00000003u);  // subnormal
    for (std::size_t j = 0; j < s.cols; ++j) {
      const auto put = [&](std::size_t n, float v) {
        if (n < s.rows) x[n * s.cols + j] = v;
      };
      switch (j % 9) {
        case 0: for (std::size_t n : {63, 64, 511, 512, 513}) put(n, nan); break;
        case 1: put(s.rows - 1, nan); break;  // the fold ends on NaN: the floor
        case 2: put(0, nan); break;
        case 3: put(rng.below(s.rows), inf); put(rng.below(s.rows), -inf); break;  // the sum: NaN
        case 4: for (std::size_t n = 0; n < s.rows; ++n) put(n, n % 2 == 0 ? -0.0f : 0.0f); break;  // floor only
        case 5: for (std::size_t n = 0; n < s.rows; ++n) put(n, n % 3 == 0 ? -sub : sub); break;
        case 6: for (std::size_t n = 0; n < s.rows; ++n) put(n, static_cast<float>(rng.normal()) * 1e-12f); break;
        case 7: put(rng.below(s.rows), -inf); break;
        default: put(rng.below(s.rows), nan); put(rng.below(s.rows), -0.0f); break;
      }
    }
  }
  return x;
}

template <class T>
std::string compare_cells(const char* what, const std::vector<T>& want, const std::vector<T>& got, std::size_t lead,
                          T fill, bool nan_matches_nan) {
  const std::size_t cells = want.size();
  for (std::size_t i = 0; i < got.size(); ++i) {
    const bool inside = i >= lead && i < lead + cells;
    const T w = inside ? want[i - lead] : fill;
    if constexpr (sizeof(T) == 4) {
      if (num::bits_of(got[i]) == num::bits_of(w) || (inside && nan_matches_nan && got[i] != got[i] && w != w)) continue;
      if (!inside) return fmt::format("{}: guard cell {} was written (0x{:08x})", what, i, num::bits_of(got[i]));
      return fmt::format("{}[{}]: cpu 0x{:08x} ({}) vs cuda 0x{:08x} ({})", what, i - lead, num::bits_of(w), w,
                         num::bits_of(got[i]), got[i]);
    } else {
      if (got[i] == w) continue;
      if (!inside) return fmt::format("{}: guard byte {} was written ({})", what, i, static_cast<int>(got[i]));
      return fmt::format("{}[{}]: cpu {} vs cuda {}", what, i - lead, static_cast<int>(w), static_cast<int>(got[i]));
    }
  }
  return "";
}

std::string run_case(const ColShape& s, std::uint64_t seed) {
  ad::Rng rng(seed);
  const std::vector<float> x = draw(rng, s);
  const float floor_x = s.dy_floor ? num::float_of(0x0D800000u) /* 2^-100 */ : 1e-8f;
  const std::size_t n = s.rows * s.cols;
  std::vector<std::int8_t> want_q(n);
  std::vector<float> want_step(s.cols), want_sums(s.cols);
  cpu::units::quantize_cols_i8(x.data(), s.rows, s.cols, floor_x, want_q.data(), want_step.data(), 1);
  if (s.sums) cpu::units::bias_gradient(x.data(), s.rows, s.cols, want_sums.data(), 1);

  DeviceBuffer<float> d_x(n > 0 ? n : 1);
  if (n > 0) d_x.upload(x);
  const std::size_t code_bytes = kLead + s.code_offset + n + kTail;
  DeviceBuffer<std::int8_t> d_q((code_bytes + 3) / 4 * 4);
  fill_words(d_q.data(), kCodeFill, d_q.size() / 4);
  DeviceBuffer<float> d_step(kLead + s.cols + kTail), d_sums(kLead + s.cols + kTail);
  fill_words(d_step.data(), kSentinel, d_step.size());
  fill_words(d_sums.data(), kSentinel, d_sums.size());
  DeviceBuffer<float> scratch(launch::col_quantize_2p_scratch(s.rows, s.cols));  // poisoned in the dirty pass
  launch::col_quantize_i8_2p(d_x.data(), s.rows, s.cols, floor_x, d_q.data() + kLead + s.code_offset,
                             d_step.data() + kLead, scratch.data(), s.sums ? d_sums.data() + kLead : nullptr,
                             col_quantize_planted());
  synchronize("column quantizer gate");

  std::vector<std::int8_t> got_q = d_q.download();
  got_q.resize(code_bytes);
  const auto fill_byte = static_cast<std::int8_t>(kCodeFill & 0xFFu);
  std::string d = compare_cells("codes", want_q, got_q, kLead + s.code_offset, fill_byte, false);
  if (!d.empty()) return d;
  d = compare_cells("step", want_step, d_step.download(), kLead, num::float_of(kSentinel), false);
  if (!d.empty()) return d;
  if (s.sums) return compare_cells("column sums", want_sums, d_sums.download(), kLead, num::float_of(kSentinel), true);
  return compare_cells("column sums (none asked)", std::vector<float>{}, d_sums.download(), 0,
                       num::float_of(kSentinel), false);
}

std::vector<ColShape> shapes() {
  std::vector<ColShape> v;
  const std::vector<std::pair<std::size_t, std::size_t>> ragged = {
      {1, 1},    {1, 37},   {37, 1},    {63, 33},    {64, 32},    {255, 9},    {256, 8},   {257, 17},
      {511, 31}, {512, 32}, {513, 65},  {1000, 70},  {1027, 129}, {2049, 257}, {4099, 40}, {16384, 24},
      {1536, 776}, {0, 17}, {3, 0},
  };
  for (const auto& [rows, cols] : ragged)
    for (const bool sums : {false, true}) v.push_back({rows, cols, sums});
  for (const auto& [rows, cols] : std::vector<std::pair<std::size_t, std::size_t>>{{600, 45}, {1027, 129}, {4099, 40}})
    for (const bool sums : {false, true}) {
      v.push_back({rows, cols, sums, Values::specials});
      v.push_back({rows, cols, sums, Values::specials, true});
    }
  v.push_back({1024, 40, false, Values::normal, false, 1});  // rows % 4 == 0, codes off word alignment
  v.push_back({2048, 33, true, Values::normal, true, 3});
  return v;
}

}  // namespace

std::vector<Case> col_quant_cases() {
  std::vector<Case> out;
  for (const ColShape& s : shapes()) {
    const std::string kernel = s.sums ? "col_quantize_i8 2-pass + column sums" : "col_quantize_i8 2-pass";
    Case c{kernel, label(s), "col_quant", 0, {}};
    c.optional = true;
    c.run = [s, kernel](std::uint64_t seed) {
      std::string diff;
      try {
        diff = run_case(s, seed);
      } catch (const std::exception& e) {
        diff = std::string("error: ") + e.what();
      }
      col_quantize_gate_record(diff, fmt::format("{} on {}{}", kernel, label(s), poison() ? " (dirty-buffer pass)" : ""));
      return diff;
    };
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace lockstep::cuda::gate
