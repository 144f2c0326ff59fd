// Typed storage (src/lockstep/tensor/): dtype names and sizes, the TERNARY2
// bit layout and its round trip, Storage's checks and memory, and a Param
// holding a frozen typed value: its bytes, its storage rule, and the float
// models refusing it by name.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include <unistd.h>

#include "lockstep/ad/rng.hpp"
#include "lockstep/io/gguf.hpp"
#include "lockstep/io/safetensors.hpp"
#include "lockstep/model/model.hpp"
#include "lockstep/num/fp.hpp"
#include "lockstep/ops/quant.hpp"
#include "lockstep/tensor/convert.hpp"
#include "lockstep/tensor/dtype.hpp"
#include "lockstep/tensor/storage.hpp"
#include "lockstep/train/checkpoint.hpp"

#include "../common/test_seed.hpp"

namespace t = lockstep::tensor;
namespace m = lockstep::model;
using lockstep::num::bits_of;
using t::DType;

using lockstep::test::test_seed;

namespace {

// The message of the std::invalid_argument `f` throws ("" if none).
std::string refusal(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

std::vector<std::int8_t> random_codes(std::size_t n, std::uint64_t seed) {
  lockstep::ad::Rng rng(seed);
  std::vector<std::int8_t> c(n);
  for (auto& v : c) v = static_cast<std::int8_t>(static_cast<int>(rng.below(3)) - 1);
  return c;
}

}  // namespace

// --- dtypes -------------------------------------------------------------------------

TEST(TensorDType, NamesAreTheFormatsNames) {
  // The names safetensors (io/safetensors) and GGUF (io/gguf's ggml type table) use.
  const std::pair<DType, lockstep::io::DType> st[] = {{DType::f32, lockstep::io::DType::F32},
                                                      {DType::bf16, lockstep::io::DType::BF16},
                                                      {DType::f16, lockstep::io::DType::F16},
                                                      {DType::i8, lockstep::io::DType::I8},
                                                      {DType::i32, lockstep::io::DType::I32}};
  for (auto [ours, theirs] : st) {
    EXPECT_EQ(t::dtype_name(ours), lockstep::io::dtype_name(theirs));
    EXPECT_EQ(t::dtype_bits(ours), 8 * lockstep::io::dtype_size(theirs));
  }
  const std::pair<DType, std::uint32_t> gguf[] = {
      {DType::f32, 0}, {DType::f16, 1}, {DType::bf16, 30}, {DType::i8, 24}, {DType::i32, 26}};
  for (auto [ours, id] : gguf) {
    const auto g = lockstep::io::ggml_type_size(id);
    ASSERT_TRUE(g.has_value());
    EXPECT_EQ(t::dtype_name(ours), g->name);
  }
  EXPECT_EQ(t::dtype_name(DType::ternary2), "TERNARY2");
  for (DType d : t::kAllDTypes) EXPECT_EQ(t::dtype_from_name(t::dtype_name(d)), d);
  EXPECT_FALSE(t::dtype_from_name("I2_S").has_value());
}

TEST(TensorDType, ByteSizes) {
  EXPECT_EQ(t::storage_bytes(DType::f32, 10), 40u);
  EXPECT_EQ(t::storage_bytes(DType::bf16, 10), 20u);
  EXPECT_EQ(t::storage_bytes(DType::f16, 3), 6u);
  EXPECT_EQ(t::storage_bytes(DType::i8, 7), 7u);
  EXPECT_EQ(t::storage_bytes(DType::i32, 2), 8u);
  for (std::size_t n = 0; n < 20; ++n) EXPECT_EQ(t::storage_bytes(DType::ternary2, n), (n + 3) / 4) << n;
  EXPECT_EQ(t::storage_bytes(DType::ternary2, 2560u * 6912u), 2560u * 6912u / 4);
}

// --- ternary packing ------------------------------------------------------------------

TEST(TensorTernary, TheBitLayoutIsTheDocumentedOne) {
  // Element i in byte i / 4 at bits 2(i % 4), field = code + 1; padding 0.
  const std::vector<std::int8_t> codes{-1, 0, 1, 1, 0, -1};
  const std::vector<std::uint8_t> want{0b10'10'01'00, 0b0000'00'01};
  EXPECT_EQ(t::pack_ternary(codes), want);
  EXPECT_EQ(t::unpack_ternary(want, codes.size()), codes);
}

TEST(TensorTernary, EveryByteUnpacksOrIsRefused) {
  // A byte holds 4 codes: the 81 bytes with no field 3 unpack and pack back to
  // themselves; the other 175 are refused.
  int valid = 0;
  for (int b = 0; b < 256; ++b) {
    const std::vector<std::uint8_t> byte{static_cast<std::uint8_t>(b)};
    bool has3 = false;
    for (int f = 0; f < 4; ++f) has3 |= ((b >> (2 * f)) & 3) == 3;
    if (has3) {
      EXPECT_NE(refusal([&] { t::unpack_ternary(byte, 4); }).find("field 3"), std::string::npos) << b;
      continue;
    }
    ++valid;
    EXPECT_EQ(t::pack_ternary(t::unpack_ternary(byte, 4)), byte) << b;
  }
  EXPECT_EQ(valid, 81);
}

TEST(TensorTernary, RandomCodesRoundTrip) {
  for (std::size_t n : {0u, 1u, 2u, 3u, 4u, 5u, 127u, 128u, 129u, 4099u, 100003u}) {
    const auto codes = random_codes(n, lockstep::ad::derive_seed(test_seed(), "TensorTernary.RoundTrip", n));
    const auto packed = t::pack_ternary(codes);
    ASSERT_EQ(packed.size(), (n + 3) / 4);
    EXPECT_EQ(t::unpack_ternary(packed, n), codes) << n;
  }
}

TEST(TensorTernary, BadInputIsRefused) {
  EXPECT_NE(refusal([] { t::pack_ternary(std::vector<std::int8_t>{0, 1, 2}); }).find("code 2 at index 2"),
            std::string::npos);
  EXPECT_NE(refusal([] { t::pack_ternary(std::vector<std::int8_t>{-2}); }).find("code -2 at index 0"),
            std::string::npos);
  EXPECT_NE(refusal([] { t::unpack_ternary(std::vector<std::uint8_t>{0x55, 0x55}, 9); }).find("2 bytes"),
            std::string::npos);
  // Three codes in a byte: the fourth field is padding and must be 0.
  EXPECT_NE(refusal([] { t::unpack_ternary(std::vector<std::uint8_t>{0b01'01'01'01}, 3); }).find("padding"),
            std::string::npos);
  EXPECT_EQ(t::unpack_ternary(std::vector<std::uint8_t>{0b00'01'01'01}, 3), (std::vector<std::int8_t>{0, 0, 0}));
}

// --- Storage -----------------------------------------------------------------------------

// A BitNet weight quantized by ops/quant.hpp, held as TERNARY2: the codes and
// the scale come back, and its f32 image is the op's dequantized weight q * m.
TEST(TensorStorage, TernaryHoldsBitLinearCodesAndScale) {
  lockstep::ad::Rng rng(lockstep::ad::derive_seed(test_seed(), "TensorStorage.Ternary", 0));
  const std::size_t rows = 37, cols = 53;
  std::vector<float> w(rows * cols);
  for (auto& v : w) v = static_cast<float>(0.02 * rng.normal());
  const auto q = lockstep::ops::quantize_ternary(w.data(), w.size());
  const t::Storage s = t::Storage::ternary({37, 53}, q.q, q.scale);
  EXPECT_EQ(s.dtype(), DType::ternary2);
  EXPECT_EQ(s.numel(), rows * cols);
  EXPECT_EQ(s.bytes().size(), (rows * cols + 3) / 4);
  ASSERT_EQ(s.scales().size(), 1u);
  EXPECT_EQ(bits_of(s.scales()[0]), bits_of(q.scale));
  EXPECT_EQ(t::codes_of(s), q.q);
  const std::vector<float> f = t::to_f32(s);
  for (std::size_t i = 0; i < f.size(); ++i)
    ASSERT_EQ(bits_of(f[i]), bits_of(static_cast<float>(q.q[i]) * q.scale)) << i;
}

TEST(TensorStorage, FrozenTernary2B4TMatrixTakesAQuarterByteAWeight) {
  const std::int64_t rows = 2560, cols = 6912;  // BitNet 2B4T's FFN matrix
  const std::size_t n = static_cast<std::size_t>(rows * cols);
  const t::Storage s = t::Storage::ternary({rows, cols}, random_codes(n, 7), 0.0123f);
  std::printf("ternary %lldx%lld: %zu bytes held (n/4 = %zu; f32 would be %zu)\n", static_cast<long long>(rows),
              static_cast<long long>(cols), s.bytes_held(), n / 4, 4 * n);
  EXPECT_GE(s.bytes_held(), n / 4 + sizeof(float));
  EXPECT_LE(s.bytes_held(), n / 4 + 64);  // + the scale and the shape
}

TEST(TensorStorage, Int8RowsHoldOneStepPerRow) {
  const std::vector<std::int8_t> codes{-127, 0, 5, 127, -128, 1};
  const std::vector<float> steps{0.5f, 0.1f};
  const t::Storage s = t::Storage::int8_rows({2, 3}, codes, steps);
  EXPECT_EQ(s.rows(), 2u);
  EXPECT_EQ(t::codes_of(s), codes);
  const std::vector<float> f = t::to_f32(s);
  for (std::size_t i = 0; i < codes.size(); ++i)
    EXPECT_EQ(bits_of(f[i]), bits_of(static_cast<float>(codes[i]) * steps[i / 3])) << i;
  EXPECT_NE(refusal([&] { t::Storage::int8_rows({2, 3}, codes, std::vector<float>{1.0f}); })
                .find("1 scales, expected 2"),
            std::string::npos);
  EXPECT_NE(refusal([&] { t::Storage::int8_rows({3, 2}, codes, steps); }).find("expected 3"), std::string::npos);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_NE(refusal([&] { t::Storage::int8_rows({2, 3}, codes, std::vector<float>{1.0f, nan}); })
                .find("scale 1 is nan"),
            std::string::npos);
}

TEST(TensorStorage, FloatTypesRoundOnceAndWidenExactly) {
  const std::vector<float> v{1.0f, -0.0f, 1.00390625f, 65520.0f, 0x1p-25f, 3.14159265f};
  const t::Storage b = t::Storage::bf16_rounded({2, 3}, v), h = t::Storage::f16_rounded({6}, v);
  const t::Storage f = t::Storage::f32({3, 2}, v);
  EXPECT_EQ(b.bytes().size(), 12u);
  EXPECT_EQ(h.bytes().size(), 12u);
  const auto bf = t::to_f32(b), hf = t::to_f32(h), ff = t::to_f32(f);
  for (std::size_t i = 0; i < v.size(); ++i) {
    EXPECT_EQ(bits_of(bf[i]), bits_of(t::bf16_to_f32(t::f32_to_bf16(v[i])))) << i;
    EXPECT_EQ(bits_of(hf[i]), bits_of(t::f16_to_f32(t::f32_to_f16(v[i])))) << i;
    EXPECT_EQ(bits_of(ff[i]), bits_of(v[i])) << i;
  }
  EXPECT_TRUE(std::isinf(hf[3]));  // 65520 overflows f16
  EXPECT_EQ(bits_of(hf[4]), 0u);   // 2^-25: a tie, to +0
}

TEST(TensorStorage, MalformedStorageIsRefused) {
  EXPECT_NE(refusal([] { t::Storage::from_bytes(DType::f16, {3}, std::vector<std::uint8_t>(5)); })
                .find("5 bytes, expected 6"),
            std::string::npos);
  EXPECT_NE(refusal([] { t::Storage::from_bytes(DType::ternary2, {5}, std::vector<std::uint8_t>(2)); })
                .find("0 scales, expected 1"),
            std::string::npos);
  EXPECT_NE(refusal([] {
              t::Storage::from_bytes(DType::ternary2, {4}, std::vector<std::uint8_t>{0xff}, {1.0f});
            }).find("field 3"),
            std::string::npos);
  EXPECT_NE(refusal([] { t::Storage::f32({2, 2}, std::vector<float>(3)); }).find("3 values for shape [2,2]"),
            std::string::npos);
  EXPECT_NE(refusal([] { t::Storage::f32({-1}, {}); }).find("negative"), std::string::npos);
  // I32 holds indices: no f32 image.
  const t::Storage ids = t::Storage::i32({2}, std::vector<std::int32_t>{7, -1});
  EXPECT_NE(refusal([&] { t::to_f32(ids); }).find("indices"), std::string::npos);
  EXPECT_NE(refusal([&] { t::codes_of(ids); }).find("no integer codes"), std::string::npos);
  EXPECT_TRUE(t::Storage{}.empty());
  EXPECT_FALSE(ids.empty());
}

// --- a Param holding a frozen typed value --------------------------------------------------

namespace {

// The parameter `name` of `model`, replaced by its ternary codes (BitNet's
// quantizer) held frozen as TERNARY2: what a BitNet base loaded from its
// packed checkpoint will be.
m::Param& freeze_as_ternary(m::Model& model, const std::string& name) {
  for (m::Param& p : model.params()) {
    if (p.name != name) continue;
    const auto q = lockstep::ops::quantize_ternary(p.value.data(), p.value.size());
    p.trainable = false;
    p.dtype = DType::ternary2;
    p.frozen_value = t::Storage::ternary(p.shape, q.q, q.scale);
    p.value = {};
    p.grad = {};
    return p;
  }
  throw std::logic_error("no parameter " + name);
}

}  // namespace

TEST(TensorParam, AFrozenTernaryParamHoldsAQuarterByteAWeight) {
  const std::int64_t rows = 2560, cols = 6912;
  const std::size_t n = static_cast<std::size_t>(rows * cols);
  m::Param p;
  p.name = "model.layers.0.mlp.down_proj.weight";
  p.shape = {rows, cols};
  p.trainable = false;
  p.dtype = DType::ternary2;
  p.frozen_value = t::Storage::ternary(p.shape, random_codes(n, 11), 0.02f);
  EXPECT_NO_THROW(m::check_param_storage(p));
  std::printf("frozen ternary param %lldx%lld: %zu bytes held; as an f32 param (value + grad): %zu\n",
              static_cast<long long>(rows), static_cast<long long>(cols), m::bytes_held(p), 8 * n);
  EXPECT_LE(m::bytes_held(p), n / 4 + 64);
  m::Param f;
  f.name = p.name;
  f.shape = p.shape;
  f.value.assign(n, 0.0f);
  f.grad.assign(n, 0.0f);
  EXPECT_EQ(m::bytes_held(f), 8 * n);
}

TEST(TensorParam, TheStorageRuleIsChecked) {
  m::Param p;
  p.name = "w";
  p.shape = {2, 4};
  p.value.assign(8, 0.0f);
  p.grad.assign(8, 0.0f);
  EXPECT_NO_THROW(m::check_param_storage(p));  // F32 with value and grad: today's params
  const t::Storage codes = t::Storage::ternary({2, 4}, std::vector<std::int8_t>(8, 1), 0.5f);
  {
    m::Param q = p;
    q.frozen_value = codes;
    EXPECT_NE(refusal([&] { m::check_param_storage(q); }).find("frozen_value is set"), std::string::npos);
  }
  m::Param q = p;
  q.dtype = DType::ternary2;
  q.frozen_value = codes;
  EXPECT_NE(refusal([&] { m::check_param_storage(q); }).find("trainable is true"), std::string::npos);
  q.trainable = false;
  EXPECT_NE(refusal([&] { m::check_param_storage(q); }).find("no f32 value or grad"), std::string::npos);
  q.value.clear();
  q.grad.clear();
  EXPECT_NO_THROW(m::check_param_storage(q));
  q.dtype = DType::i8;
  EXPECT_NE(refusal([&] { m::check_param_storage(q); }).find("frozen_value is TERNARY2 [2,4]"), std::string::npos);
  q.dtype = DType::ternary2;
  q.shape = {4, 2};
  EXPECT_NE(refusal([&] { m::check_param_storage(q); }).find("frozen_value is TERNARY2 [2,4]"), std::string::npos);
}

// The CPU model runs a frozen BitLinear projection held as TERNARY2 codes
// (the engine's codes path: a LoRA base, docs/LORA.md) with the F32 masters'
// bits; init (which writes F32 values), the checkpoint writer, reader and
// weight hash, which read F32 values by shape, refuse it by name and dtype (no
// silent conversion, no read past an empty value), and so does every pass for
// another dtype. Put back as F32, the model gives the loss it gave before, bit for bit.
TEST(TensorParam, TheCpuModelRunsTernaryCodesAndRefusesOtherDtypesByName) {
  auto model = m::make_cpu_model(m::preset("bitnet-micro"));
  model->init(5);
  const std::vector<std::int32_t> ids{1, 2, 3, 4, 5, 6, 7, 8}, targets{2, 3, 4, 5, 6, 7, 8, 9};
  const float before = model->loss(ids, targets, 2, 4, 1);

  const std::string name = "model.layers.1.mlp.down_proj.weight";
  m::Param& p = freeze_as_ternary(*model, name);
  const std::vector<float> dequantized = t::to_f32(p.frozen_value);
  const std::string want = "init: parameter '" + name +
                           "' is held as TERNARY2 (frozen); this model runs F32 parameters only: it is refused, not "
                           "converted";
  EXPECT_EQ(bits_of(model->loss(ids, targets, 2, 4, 1)), bits_of(before));
  EXPECT_EQ(bits_of(model->forward_backward(ids, targets, 2, 4, false, 1)), bits_of(before));
  EXPECT_NO_THROW(model->next_logits(ids, 1));
  EXPECT_EQ(refusal([&] { model->init(5); }), want);
  EXPECT_NE(refusal([&] { lockstep::train::weights_hash(*model); }).find("weights_hash: parameter '" + name),
            std::string::npos);
  const auto dir = std::filesystem::temp_directory_path() / ("lockstep_tensor_param_" + std::to_string(::getpid()));
  EXPECT_NE(refusal([&] { lockstep::train::save_hf_model(dir.string(), *model); }).find("is held as TERNARY2"),
            std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir));
  EXPECT_NE(refusal([&] { lockstep::train::load_hf_weights(dir.string(), *model); }).find("is held as TERNARY2"),
            std::string::npos);

  // An int8 or bf16 frozen value is refused by every pass.
  p.dtype = DType::bf16;
  p.frozen_value = t::Storage::bf16_rounded(p.shape, dequantized);
  const std::string bf16 = "the CPU model: parameter '" + name +
                           "' is held as BF16 (frozen); this model runs F32, TERNARY2 parameters only: it is "
                           "refused, not converted";
  EXPECT_EQ(refusal([&] { model->loss(ids, targets, 2, 4, 1); }), bf16);
  EXPECT_EQ(refusal([&] { model->forward_backward(ids, targets, 2, 4, false, 1); }), bf16);
  EXPECT_EQ(refusal([&] { model->next_logits(ids, 1); }), bf16);
  // TERNARY2 anywhere but a BitLinear projection (the embedding) is refused.
  p.dtype = DType::f32;
  p.frozen_value = {};
  p.trainable = true;
  p.value.assign(dequantized.size(), 0.0f);
  p.grad.assign(dequantized.size(), 0.0f);
  m::Param& e = freeze_as_ternary(*model, "model.embed_tokens.weight");
  EXPECT_EQ(refusal([&] { model->loss(ids, targets, 2, 4, 1); }),
            "parameter 'model.embed_tokens.weight' is TERNARY2, but the CPU model runs codes only for the BitLinear "
            "projections of a bitnet model");
  e.dtype = DType::f32;
  e.frozen_value = {};
  e.trainable = true;
  e.value.assign(t::numel_of(e.shape), 0.0f);
  e.grad.assign(e.value.size(), 0.0f);

  // Back to F32 with the original values (re-init): the same loss bits as before.
  p.dtype = DType::f32;
  p.frozen_value = {};
  p.trainable = true;
  p.value.assign(dequantized.size(), 0.0f);
  p.grad.assign(dequantized.size(), 0.0f);
  model->init(5);
  EXPECT_EQ(bits_of(model->loss(ids, targets, 2, 4, 1)), bits_of(before));
}
