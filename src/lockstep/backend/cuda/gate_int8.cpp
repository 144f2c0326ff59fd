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
#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "lockstep/ad/rng.hpp"
#include "lockstep/backend/cuda/device.hpp"
#include "lockstep/backend/cuda/gate.hpp"
#include "lockstep/backend/cuda/int8_gemm.hpp"
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

}  // namespace

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
