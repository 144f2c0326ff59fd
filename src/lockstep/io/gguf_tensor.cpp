#include "lockstep/io/gguf_tensor.hpp"

#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "lockstep/tensor/convert.hpp"

namespace lockstep::io {

namespace {

constexpr std::size_t kQ8Block = 32, kQ8Bytes = 34, kI2Block = 128;

[[noreturn]] void bad(std::string_view what, const std::string& msg) {
  throw std::runtime_error(escape_bytes(what) + ": " + msg);
}

std::uint16_t u16_at(const unsigned char* p) { return static_cast<std::uint16_t>(p[0] | (p[1] << 8)); }

}  // namespace

std::string ggml_type_label(std::uint32_t type) {
  if (type == kGgmlTypeI2S) return "I2_S";
  if (const auto ts = ggml_type_size(type)) return std::string(ts->name);
  return "type " + std::to_string(type);
}

std::vector<float> gguf_dequantize(std::uint32_t type, std::span<const unsigned char> data, std::uint64_t numel,
                                   std::string_view what) {
  const auto want = ggml_tensor_nbytes(type, numel);
  if (type != kGgmlF32 && type != kGgmlF16 && type != kGgmlBF16 && type != kGgmlQ8_0)
    bad(what, ggml_type_label(type) + " is not a float type lockstep decodes (F32, F16, BF16, Q8_0)");
  if (!want || *want != data.size())
    bad(what, std::to_string(data.size()) + " bytes for " + std::to_string(numel) + " " + ggml_type_label(type) + " elements");
  std::vector<float> out(static_cast<std::size_t>(numel));
  const unsigned char* p = data.data();
  switch (type) {
    case kGgmlF32:
      if (numel) std::memcpy(out.data(), p, out.size() * 4);  // little-endian host
      break;
    case kGgmlF16:
      for (std::size_t i = 0; i < out.size(); ++i) out[i] = tensor::f16_to_f32(u16_at(p + 2 * i));
      break;
    case kGgmlBF16:
      for (std::size_t i = 0; i < out.size(); ++i) out[i] = tensor::bf16_to_f32(u16_at(p + 2 * i));
      break;
    default:  // Q8_0
      for (std::size_t b = 0; b < out.size() / kQ8Block; ++b) {
        const unsigned char* blk = p + b * kQ8Bytes;
        const float d = tensor::f16_to_f32(u16_at(blk));
        if (!std::isfinite(d)) bad(what, "Q8_0 block " + std::to_string(b) + " has a step that is not finite");
        for (std::size_t j = 0; j < kQ8Block; ++j)
          out[b * kQ8Block + j] = d * static_cast<float>(static_cast<std::int8_t>(blk[2 + j]));
      }
  }
  return out;
}

std::vector<unsigned char> gguf_quantize(std::uint32_t type, std::span<const float> values, std::string_view what) {
  const std::size_t n = values.size();
  std::vector<unsigned char> out;
  const auto put16 = [&](std::uint16_t h) {
    out.push_back(static_cast<unsigned char>(h));
    out.push_back(static_cast<unsigned char>(h >> 8));
  };
  switch (type) {
    case kGgmlF32:
      out.resize(n * 4);
      if (n) std::memcpy(out.data(), values.data(), out.size());
      return out;
    case kGgmlF16:
      out.reserve(2 * n);
      for (float v : values) put16(tensor::f32_to_f16(v));
      return out;
    case kGgmlBF16:
      out.reserve(2 * n);
      for (float v : values) put16(tensor::f32_to_bf16(v));
      return out;
    case kGgmlQ8_0: {
      if (n % kQ8Block != 0)
        throw std::invalid_argument(escape_bytes(what) + ": Q8_0 needs a multiple of 32 elements, has " + std::to_string(n));
      out.reserve(n / kQ8Block * kQ8Bytes);
      for (std::size_t b = 0; b < n / kQ8Block; ++b) {
        const float* x = values.data() + b * kQ8Block;
        float amax = 0;
        for (std::size_t j = 0; j < kQ8Block; ++j) amax = std::max(amax, std::fabs(x[j]));
        if (!std::isfinite(amax)) throw std::invalid_argument(escape_bytes(what) + ": a value is not finite");
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        put16(tensor::f32_to_f16(d));
        for (std::size_t j = 0; j < kQ8Block; ++j)
          out.push_back(static_cast<unsigned char>(static_cast<std::int8_t>(std::round(x[j] * id))));
      }
      return out;
    }
    default:
      throw std::invalid_argument(escape_bytes(what) + ": lockstep does not encode " + ggml_type_label(type) +
                                  " from floats (F32, F16, BF16, Q8_0; I2_S from ternary codes)");
  }
}

std::vector<unsigned char> i2s_pack(std::span<const std::int8_t> codes, float scale) {
  const std::size_t n = codes.size();
  if (n % kI2Block != 0) throw std::invalid_argument("I2_S: " + std::to_string(n) + " weights, not a multiple of 128");
  if (!std::isfinite(scale)) throw std::invalid_argument("I2_S: the scale is not finite");
  std::vector<unsigned char> out(n / 4 + 32, 0);
  for (std::size_t i = 0; i < n; ++i) {
    const int c = codes[i];
    if (c < -1 || c > 1) throw std::invalid_argument("I2_S: code " + std::to_string(c) + " at " + std::to_string(i) + " is not -1, 0 or 1");
    const std::size_t block = i / kI2Block, j = i % kI2Block;
    out[block * 32 + j % 32] |= static_cast<unsigned char>((c + 1) << (6 - 2 * (j / 32)));
  }
  std::memcpy(out.data() + n / 4, &scale, 4);
  return out;
}

TernaryTensor i2s_unpack(std::span<const unsigned char> data, std::uint64_t numel, std::string_view what) {
  if (numel % kI2Block != 0) bad(what, "I2_S needs a multiple of 128 weights, has " + std::to_string(numel));
  if (data.size() != numel / 4 + 32)
    bad(what, std::to_string(data.size()) + " bytes for " + std::to_string(numel) + " I2_S weights (needs n/4 + 32)");
  TernaryTensor t;
  t.codes.resize(static_cast<std::size_t>(numel));
  for (std::size_t i = 0; i < t.codes.size(); ++i) {
    const std::size_t block = i / kI2Block, j = i % kI2Block;
    const int field = (data[block * 32 + j % 32] >> (6 - 2 * (j / 32))) & 3;
    if (field == 3) bad(what, "I2_S weight " + std::to_string(i) + " holds the invalid code field 3");
    t.codes[i] = static_cast<std::int8_t>(field - 1);
  }
  std::memcpy(&t.scale, data.data() + numel / 4, 4);
  if (!std::isfinite(t.scale)) bad(what, "the I2_S scale is not finite");
  return t;
}

tensor::Storage gguf_storage(const GgufTensorInfo& info, std::span<const unsigned char> data, std::string_view source) {
  const std::string what = std::string(source) + ": tensor " + info.name;
  tensor::Dims shape(info.dims.rbegin(), info.dims.rend());
  std::uint64_t n = 1;
  for (auto d : info.dims) n *= d;
  try {
    switch (info.type) {
      case kGgmlF32: case kGgmlQ8_0:
        return tensor::Storage::f32(std::move(shape), gguf_dequantize(info.type, data, n, what));
      case kGgmlF16: case kGgmlBF16: {
        if (!ggml_tensor_nbytes(info.type, n) || *ggml_tensor_nbytes(info.type, n) != data.size())
          bad(what, std::to_string(data.size()) + " bytes for " + std::to_string(n) + " elements");
        return tensor::Storage::from_bytes(info.type == kGgmlF16 ? tensor::DType::f16 : tensor::DType::bf16,
                                           std::move(shape), std::vector<std::uint8_t>(data.begin(), data.end()));
      }
      case kGgmlTypeI2S: {
        TernaryTensor t = i2s_unpack(data, n, what);
        return tensor::Storage::ternary(std::move(shape), t.codes, t.scale);
      }
      default:
        bad(what, "has ggml type " + ggml_type_label(info.type) + "; lockstep reads F32, F16, BF16, Q8_0 and I2_S");
    }
  } catch (const std::invalid_argument& e) {
    bad(what, e.what());
  }
}

}  // namespace lockstep::io
