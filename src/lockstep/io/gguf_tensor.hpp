// GGUF tensor data: the bytes of the ggml types lockstep reads and writes, to
// and from f32 values, ternary codes and lockstep's typed storage
// (tensor/storage.hpp).
//
//   F32, F16, BF16  one element after the other, little-endian.
//   Q8_0            blocks of 32: an f16 step d, then 32 int8 codes;
//                   value = f32(d) * code (exact: 11 x 8 significant bits).
//                   Written as ggml's reference quantizer (and PyPI gguf's):
//                   amax = max |x|, d = amax / 127, id = d ? 1 / d : 0,
//                   code = roundf(x * id) (halves away from zero), d stored as
//                   f16 (nearest even), all in binary32.
//   I2_S            bitnet.cpp's ternary type (id 36; its llama.cpp fork's
//                   src/ggml-bitnet-mad.cpp, quantize_i2_s, x86 build): n
//                   weights (n a multiple of 128) in n/4 bytes, then a 32-byte
//                   tail whose first 4 bytes are the tensor's one f32 scale
//                   (the rest zero). Weight j of 128-weight block b sits in
//                   byte 32·b + j % 32 at bit shift 6 − 2·(j / 32); the 2-bit
//                   field is code + 1 (0: −1, 1: 0, 2: +1). value = code ·
//                   scale. (bitnet.cpp's ARM build uses blocks of 64 instead:
//                   files are not portable between the two; this is the x86
//                   layout, the one its published GGUF files use.)
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "lockstep/io/gguf.hpp"
#include "lockstep/tensor/storage.hpp"

namespace lockstep::io {

inline constexpr std::uint32_t kGgmlF32 = 0, kGgmlF16 = 1, kGgmlQ8_0 = 8, kGgmlBF16 = 30;

// The ggml type's name ("F32", ..., "I2_S") or "type N".
std::string ggml_type_label(std::uint32_t type);

// The f32 values of a F32, F16, BF16 or Q8_0 tensor of `numel` elements
// (exact). Throws std::runtime_error naming `what` for another type, a byte
// count that does not match, or (Q8_0) a step that is not finite.
std::vector<float> gguf_dequantize(std::uint32_t type, std::span<const unsigned char> data, std::uint64_t numel,
                                   std::string_view what);
// f32 values in F32, F16, BF16 (nearest even) or Q8_0 (the quantizer above).
// Throws std::invalid_argument for another type or a count Q8_0 cannot hold.
std::vector<unsigned char> gguf_quantize(std::uint32_t type, std::span<const float> values, std::string_view what);

struct TernaryTensor {
  std::vector<std::int8_t> codes;  // -1, 0, +1 in flat (row-major) order
  float scale = 0;
};
// Throws std::invalid_argument unless codes.size() % 128 == 0, every code is
// -1, 0 or 1 and the scale is finite.
std::vector<unsigned char> i2s_pack(std::span<const std::int8_t> codes, float scale);
// Throws std::runtime_error naming `what` on a wrong byte count, a field
// holding 3 or a scale that is not finite.
TernaryTensor i2s_unpack(std::span<const unsigned char> data, std::uint64_t numel, std::string_view what);

// A tensor as typed storage with lockstep's row-major shape (the GGUF dims
// reversed): F32, F16 and BF16 as themselves, Q8_0 as F32 (dequantized,
// exact), I2_S as TERNARY2 with its scale. Other types: std::runtime_error.
tensor::Storage gguf_storage(const GgufTensorInfo& info, std::span<const unsigned char> data,
                             std::string_view source);

}  // namespace lockstep::io
