#include "lockstep/tensor/storage.hpp"

#include <bit>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "lockstep/tensor/convert.hpp"

namespace lockstep::tensor {

// The byte layouts are stated little-endian; elements are copied in host order.
static_assert(std::endian::native == std::endian::little, "typed storage assumes a little-endian host");

namespace {

[[noreturn]] void invalid(const std::string& msg) { throw std::invalid_argument("typed storage: " + msg); }

template <class T>
std::vector<std::uint8_t> bytes_of(std::span<const T> v) {
  std::vector<std::uint8_t> b(v.size() * sizeof(T));
  if (!v.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

template <class T>
T load(const std::uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

void check_count(const Dims& shape, std::size_t n, std::string_view what) {
  if (n != numel_of(shape))
    invalid(fmt::format("{} {} for shape {} ({} elements)", n, what, dims_str(shape), numel_of(shape)));
}

}  // namespace

std::size_t numel_of(const Dims& shape) {
  std::size_t n = 1;
  for (std::int64_t d : shape) {
    if (d < 0) invalid("negative dimension in shape " + dims_str(shape));
    n *= static_cast<std::size_t>(d);
  }
  return n;
}

std::string dims_str(const Dims& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) s.append(",");
    s.append(std::to_string(shape[i]));
  }
  return s.append("]");
}

// --- ternary packing -------------------------------------------------------------

std::vector<std::uint8_t> pack_ternary(std::span<const std::int8_t> codes) {
  std::vector<std::uint8_t> out(storage_bytes(DType::ternary2, codes.size()), 0);
  for (std::size_t i = 0; i < codes.size(); ++i) {
    const int c = codes[i];
    if (c < -1 || c > 1) invalid(fmt::format("ternary code {} at index {} is not -1, 0 or +1", c, i));
    out[i / 4] = static_cast<std::uint8_t>(out[i / 4] | static_cast<unsigned>(c + 1) << (2 * (i % 4)));
  }
  return out;
}

std::vector<std::int8_t> unpack_ternary(std::span<const std::uint8_t> packed, std::size_t n) {
  if (packed.size() != storage_bytes(DType::ternary2, n))
    invalid(fmt::format("{} bytes of ternary codes for {} elements (expected {})", packed.size(), n,
                        storage_bytes(DType::ternary2, n)));
  std::vector<std::int8_t> codes(n);
  for (std::size_t i = 0; i < n; ++i) {
    const unsigned field = (packed[i / 4] >> (2 * (i % 4))) & 3u;
    if (field == 3) invalid(fmt::format("ternary field 3 (no code) at element {}", i));
    codes[i] = static_cast<std::int8_t>(static_cast<int>(field) - 1);
  }
  if (n % 4 != 0 && (packed.back() >> (2 * (n % 4))) != 0)
    invalid(fmt::format("the padding bits after element {} of a ternary tensor are not zero", n - 1));
  return codes;
}

// --- Storage -----------------------------------------------------------------------

std::size_t Storage::rows() const {
  if (numel_ == 0) return 0;
  if (shape_.empty()) return 1;
  return numel_ / static_cast<std::size_t>(shape_.back());
}

std::size_t Storage::bytes_held() const {
  return bytes_.capacity() + scales_.capacity() * sizeof(float) + shape_.capacity() * sizeof(std::int64_t);
}

Storage Storage::from_bytes(DType dtype, Dims shape, std::vector<std::uint8_t> bytes, std::vector<float> scales) {
  Storage s;
  s.dtype_ = dtype;
  s.numel_ = numel_of(shape);
  s.shape_ = std::move(shape);
  const std::string what = fmt::format("{} {}", dtype_name(dtype), dims_str(s.shape_));
  if (bytes.size() != storage_bytes(dtype, s.numel_))
    invalid(fmt::format("{}: {} bytes, expected {}", what, bytes.size(), storage_bytes(dtype, s.numel_)));
  std::size_t want_scales = 0;
  switch (scale_kind(dtype)) {
    case ScaleKind::none: want_scales = 0; break;
    case ScaleKind::per_tensor: want_scales = 1; break;
    case ScaleKind::per_row: want_scales = s.rows(); break;
  }
  if (scales.size() != want_scales)
    invalid(fmt::format("{}: {} scales, expected {}", what, scales.size(), want_scales));
  for (std::size_t i = 0; i < scales.size(); ++i)
    if (!std::isfinite(scales[i])) invalid(fmt::format("{}: scale {} is {}", what, i, scales[i]));
  if (dtype == DType::ternary2) (void)unpack_ternary(bytes, s.numel_);  // validates the fields and padding
  s.bytes_ = std::move(bytes);
  s.scales_ = std::move(scales);
  return s;
}

Storage Storage::f32(Dims shape, std::span<const float> values) {
  check_count(shape, values.size(), "values");
  return from_bytes(DType::f32, std::move(shape), bytes_of(values));
}

Storage Storage::bf16_rounded(Dims shape, std::span<const float> values) {
  check_count(shape, values.size(), "values");
  std::vector<std::uint16_t> h(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) h[i] = f32_to_bf16(values[i]);
  return from_bytes(DType::bf16, std::move(shape), bytes_of(std::span<const std::uint16_t>(h)));
}

Storage Storage::f16_rounded(Dims shape, std::span<const float> values) {
  check_count(shape, values.size(), "values");
  std::vector<std::uint16_t> h(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) h[i] = f32_to_f16(values[i]);
  return from_bytes(DType::f16, std::move(shape), bytes_of(std::span<const std::uint16_t>(h)));
}

Storage Storage::i32(Dims shape, std::span<const std::int32_t> values) {
  check_count(shape, values.size(), "values");
  return from_bytes(DType::i32, std::move(shape), bytes_of(values));
}

Storage Storage::int8_rows(Dims shape, std::span<const std::int8_t> codes, std::span<const float> row_steps) {
  check_count(shape, codes.size(), "codes");
  return from_bytes(DType::i8, std::move(shape), bytes_of(codes), {row_steps.begin(), row_steps.end()});
}

Storage Storage::ternary(Dims shape, std::span<const std::int8_t> codes, float scale) {
  check_count(shape, codes.size(), "codes");
  return from_bytes(DType::ternary2, std::move(shape), pack_ternary(codes), {scale});
}

// --- reading back --------------------------------------------------------------------

std::vector<float> to_f32(const Storage& s) {
  const std::size_t n = s.numel();
  const std::uint8_t* b = s.bytes().data();
  std::vector<float> out(n);
  switch (s.dtype()) {
    case DType::f32:
      for (std::size_t i = 0; i < n; ++i) out[i] = load<float>(b + 4 * i);
      break;
    case DType::bf16:
      for (std::size_t i = 0; i < n; ++i) out[i] = bf16_to_f32(load<std::uint16_t>(b + 2 * i));
      break;
    case DType::f16:
      for (std::size_t i = 0; i < n; ++i) out[i] = f16_to_f32(load<std::uint16_t>(b + 2 * i));
      break;
    case DType::i8: {
      const std::size_t cols = s.rows() ? n / s.rows() : 0;
      for (std::size_t i = 0; i < n; ++i)
        out[i] = static_cast<float>(static_cast<std::int8_t>(b[i])) * s.scales()[i / cols];
      break;
    }
    case DType::ternary2: {
      const std::vector<std::int8_t> codes = unpack_ternary(s.bytes(), n);
      const float scale = s.scales()[0];
      for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<float>(codes[i]) * scale;
      break;
    }
    case DType::i32:
      invalid(fmt::format("to_f32: an I32 tensor {} holds indices, not values", dims_str(s.shape())));
  }
  return out;
}

std::vector<std::int8_t> codes_of(const Storage& s) {
  if (s.dtype() == DType::ternary2) return unpack_ternary(s.bytes(), s.numel());
  if (s.dtype() == DType::i8) {
    std::vector<std::int8_t> c(s.numel());
    if (!c.empty()) std::memcpy(c.data(), s.bytes().data(), c.size());
    return c;
  }
  invalid(fmt::format("codes_of: a {} tensor has no integer codes", dtype_name(s.dtype())));
}

}  // namespace lockstep::tensor
