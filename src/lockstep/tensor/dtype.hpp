// The element types lockstep can hold a tensor in (docs/ARCHITECTURE.md,
// "Typed storage"). Training computes in f32 only; the others hold what a
// frozen base or a decode buffer is: bf16/f16 weights of a checkpoint, int8
// unit codes with per-row steps, BitNet's ternary codes with their one scale,
// int32 indices.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace lockstep::tensor {

enum class DType : std::uint8_t {
  f32,       // IEEE-754 binary32
  bf16,      // bfloat16: binary32's sign and 8-bit exponent, 7 fraction bits
  f16,       // IEEE-754 binary16
  i8,        // int8 codes; quantized (int8 units): value = code * step of its row
  i32,       // int32 (token ids, positions, indices): not a real number
  ternary2,  // codes {-1, 0, +1}, 2 bits each, 4 per byte (storage.hpp states the layout);
             // value = code * the tensor's one f32 scale
};

inline constexpr DType kAllDTypes[] = {DType::f32, DType::bf16, DType::f16, DType::i8, DType::i32, DType::ternary2};

// The name used in messages and files: safetensors' and GGUF's spelling where
// the type exists there ("F32", "BF16", "F16", "I8", "I32"). "TERNARY2" is
// lockstep's own: its bit layout is not GGUF's I2_S nor TQ2_0 (those are
// codecs of the formats, added by the loaders), so it does not borrow a name.
constexpr std::string_view dtype_name(DType d) {
  switch (d) {
    case DType::f32: return "F32";
    case DType::bf16: return "BF16";
    case DType::f16: return "F16";
    case DType::i8: return "I8";
    case DType::i32: return "I32";
    case DType::ternary2: return "TERNARY2";
  }
  return "?";
}

inline std::optional<DType> dtype_from_name(std::string_view name) {
  for (DType d : kAllDTypes)
    if (dtype_name(d) == name) return d;
  return std::nullopt;
}

// Bits one element occupies (2 for ternary2: four codes share a byte).
constexpr std::size_t dtype_bits(DType d) {
  switch (d) {
    case DType::f32: return 32;
    case DType::bf16: return 16;
    case DType::f16: return 16;
    case DType::i8: return 8;
    case DType::i32: return 32;
    case DType::ternary2: return 2;
  }
  return 0;
}

// Bytes numel elements occupy: ceil(numel * bits / 8) (a packed type's last
// byte may be part-filled).
constexpr std::size_t storage_bytes(DType d, std::size_t numel) {
  const std::size_t bits = dtype_bits(d);
  if (bits >= 8) return numel * (bits / 8);
  const std::size_t per_byte = 8 / bits;
  return numel / per_byte + (numel % per_byte != 0 ? 1 : 0);
}

// How many f32 scales a tensor of this type carries besides its bytes.
//   ternary2: one per tensor (BitNet b1.58's absmean, as bitnet.cpp's I2_S holds it);
//   i8:       one per row (the int8 units' weight steps, ops/quant.hpp), a row
//             being the last dimension: rows = numel / shape.back();
//   others:   none.
enum class ScaleKind : std::uint8_t { none, per_tensor, per_row };
constexpr ScaleKind scale_kind(DType d) {
  switch (d) {
    case DType::ternary2: return ScaleKind::per_tensor;
    case DType::i8: return ScaleKind::per_row;
    default: return ScaleKind::none;
  }
}

// Whether values of this type are real numbers with an exact or one-rounding
// f32 image (all but i32).
constexpr bool is_real(DType d) { return d != DType::i32; }

}  // namespace lockstep::tensor
