// Typed storage: a tensor held as its dtype's bytes (dtype.hpp), with the f32
// scale(s) a quantized dtype needs, so a frozen base takes the memory of what
// it is (2560 x 6912 ternary codes: 4.4 MB, not the 70.8 MB of f32).
//
// Byte layouts (all little-endian, row-major over the shape):
//   F32, BF16, F16, I32  one element after the other, 4 / 2 / 2 / 4 bytes each;
//   I8                   one code per byte (any int8, -128 included; lockstep's
//                        own quantizers make -127 .. 127), and one f32 step per
//                        row (the last dimension): value = code * step[row];
//   TERNARY2             4 codes a byte: element i (flat row-major index) in
//                        byte i / 4 at bits 2*(i % 4) and 2*(i % 4) + 1 (the
//                        first element in the lowest bits), the 2-bit field
//                        holding code + 1 (0: -1, 1: 0, 2: +1; 3 is invalid);
//                        the unused fields of a part-filled last byte are 0, so
//                        equal values have equal bytes. One f32 scale for the
//                        tensor: value = code * scale (exact).
//   This is not GGUF's I2_S (blocks of 128 weights in 32 bytes, weight j of a
//   block in byte j % 32 at shift 6 - 2*(j / 32), the scale in a 32-byte
//   tail) nor Hugging Face's packed BitNet (uint8 [out/4, in], row r + i*(out/4)
//   in bits 2i..2i+1): those are codecs of their formats, to and from this one.
//
// Every constructor validates (sizes against the shape, codes in range,
// padding bits zero, scales finite) and throws std::invalid_argument saying
// what is wrong; a Storage that exists is well formed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "lockstep/tensor/dtype.hpp"

namespace lockstep::tensor {

using Dims = std::vector<std::int64_t>;

std::size_t numel_of(const Dims& shape);  // throws on a negative dimension
std::string dims_str(const Dims& shape);  // "[2560,6912]"

// Ternary codes (-1, 0, +1) to the TERNARY2 bytes above and back. pack throws
// naming the first code outside {-1, 0, 1}; unpack throws when the byte count
// is not storage_bytes(ternary2, n), on a field holding 3, or on a padding
// field that is not 0.
std::vector<std::uint8_t> pack_ternary(std::span<const std::int8_t> codes);
std::vector<std::int8_t> unpack_ternary(std::span<const std::uint8_t> packed, std::size_t n);

class Storage {
 public:
  Storage() = default;  // holds nothing: empty()

  // F32 values, copied.
  static Storage f32(Dims shape, std::span<const float> values);
  // BF16 / F16 values rounded from f32 (nearest even, convert.hpp).
  static Storage bf16_rounded(Dims shape, std::span<const float> values);
  static Storage f16_rounded(Dims shape, std::span<const float> values);
  static Storage i32(Dims shape, std::span<const std::int32_t> values);
  // int8 codes with one f32 step per row (rows = numel / shape.back()).
  static Storage int8_rows(Dims shape, std::span<const std::int8_t> codes, std::span<const float> row_steps);
  // Ternary codes in {-1, 0, 1} with the tensor's one scale (BitNet's absmean).
  static Storage ternary(Dims shape, std::span<const std::int8_t> codes, float scale);
  // Bytes already in this layout (a loader's codec output), checked as above.
  static Storage from_bytes(DType dtype, Dims shape, std::vector<std::uint8_t> bytes, std::vector<float> scales = {});

  bool empty() const { return shape_.empty() && bytes_.empty(); }
  DType dtype() const { return dtype_; }
  const Dims& shape() const { return shape_; }
  std::size_t numel() const { return numel_; }
  // Rows for per-row scales: numel / shape.back() (1 for a scalar, 0 when empty).
  std::size_t rows() const;
  std::span<const std::uint8_t> bytes() const { return bytes_; }
  std::span<const float> scales() const { return scales_; }
  // Heap bytes this storage holds (the allocations' capacities: data, scales, shape).
  std::size_t bytes_held() const;

 private:
  DType dtype_ = DType::f32;
  Dims shape_;
  std::size_t numel_ = 0;
  std::vector<std::uint8_t> bytes_;
  std::vector<float> scales_;
};

// The values as f32. F32, BF16, F16: exact. I8: f32(code) * step[row], one
// binary32 multiplication rounded to nearest even. TERNARY2: f32(code) * scale,
// exact (±scale or a zero with the scale's sign). I32 is refused (indices are
// not values to convert silently): std::invalid_argument.
std::vector<float> to_f32(const Storage& s);
// The integer codes of an I8 or TERNARY2 storage (throws for other dtypes).
std::vector<std::int8_t> codes_of(const Storage& s);

}  // namespace lockstep::tensor
