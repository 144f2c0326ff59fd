// GGUF writing and the model loaders: every metadata type written and read
// back; the tensor codecs against known answers from their specifications
// (I2_S: bitnet.cpp's quantize_i2_s layout; HF packed: transformers'
// pack_weights); ternary_master reproduces codes and scale through the model's
// own BitLinear quantizer; llama-micro and bitnet-micro written as GGUF (F32,
// F16, BF16, Q8_0, I2_S) and as Hugging Face directories (F32, BF16, packed)
// load back to the same logits, bit for bit where the format holds the values
// exactly; malformed files give one escaped line.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>

#include <nlohmann/json.hpp>

#include "lockstep/io/atomic_file.hpp"
#include "lockstep/io/gguf.hpp"
#include "lockstep/io/gguf_tensor.hpp"
#include "lockstep/io/safetensors.hpp"
#include "lockstep/load/model_file.hpp"
#include "lockstep/model/model.hpp"
#include "lockstep/model/params.hpp"
#include "lockstep/ops/quant.hpp"
#include "lockstep/tensor/convert.hpp"
#include "lockstep/train/checkpoint.hpp"

namespace fs = std::filesystem;
using namespace lockstep;

namespace {

fs::path tmp_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("lockstep_load_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::vector<std::int32_t> tokens(std::int64_t vocab) {
  std::vector<std::int32_t> t;
  for (int i = 0; i < 11; ++i) t.push_back(static_cast<std::int32_t>((i * 37 + 5) % vocab));
  return t;
}

std::vector<float> logits(model::Model& m) { return m.next_logits(tokens(m.config().vocab_size), 1); }

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

std::unique_ptr<model::Model> source_model(const std::string& preset, std::uint64_t seed) {
  auto m = model::make_cpu_model(model::preset(preset));
  m->init(seed);
  // Norm weights away from 1 so a swapped norm cannot hide.
  for (auto& p : m->params())
    if (p.shape.size() == 1)
      for (std::size_t i = 0; i < p.value.size(); ++i) p.value[i] = 1.0f + 0.01f * static_cast<float>(i % 7);
  return m;
}

TEST(GgufWriter, EveryValueTypeRoundTrips) {
  using io::GgufType;
  using io::GgufValue;
  io::GgufWriter w(64);
  w.set("u8", GgufValue::integer(GgufType::kU8, 200));
  w.set("i8", GgufValue::integer(GgufType::kI8, -5));
  w.set("u16", GgufValue::integer(GgufType::kU16, 60000));
  w.set("i16", GgufValue::integer(GgufType::kI16, -30000));
  w.set("u32", GgufValue::integer(GgufType::kU32, 4000000000ll));
  w.set("i32", GgufValue::integer(GgufType::kI32, -2000000000));
  w.set("u64", GgufValue::u64(~std::uint64_t{0}));
  w.set("i64", GgufValue::integer(GgufType::kI64, -(1ll << 40)));
  w.set("f32", GgufValue::f32(-0.0f));
  w.set("f64", GgufValue::f64(0.1));
  w.set("bool", GgufValue::boolean(true));
  w.set("str", GgufValue::string(std::string("a\0b", 3)));
  w.set("arr.u16", GgufValue::int_array(GgufType::kU16, {1, 65535}));
  w.set("arr.i64", GgufValue::int_array(GgufType::kI64, {-1, 1ll << 50}));
  w.set("arr.f32", GgufValue::f32_array({0.5f, -2.0f}));
  w.set("arr.f64", GgufValue::f64_array({1e300}));
  w.set("arr.bool", GgufValue::bool_array({true, false}));
  w.set("arr.str", GgufValue::string_array({"x", "", "zz"}));
  w.set("arr.empty", GgufValue::int_array(GgufType::kI32, {}));
  w.add_tensor("t0", {3}, io::kGgmlF32, io::gguf_quantize(io::kGgmlF32, std::vector<float>{1, 2, 3}, "t0"));
  w.add_tensor("t1", {128, 2}, io::kGgmlTypeI2S, io::i2s_pack(std::vector<std::int8_t>(256, 1), 0.5f));
  EXPECT_THROW(w.set("u8", GgufValue::boolean(false)), std::invalid_argument);
  EXPECT_THROW(GgufValue::integer(GgufType::kU8, 256), std::invalid_argument);
  EXPECT_THROW(w.add_tensor("t2", {5}, io::kGgmlF32, std::vector<unsigned char>(16)), std::invalid_argument);
  const auto bytes = w.serialize();
  const io::GgufFile g = io::gguf_parse(bytes, "mem");
  EXPECT_EQ(g.version, 3u);
  EXPECT_EQ(g.alignment, 64u);
  ASSERT_EQ(g.metadata.size(), 20u);  // general.alignment first
  EXPECT_EQ(g.metadata[0].first, "general.alignment");
  EXPECT_EQ(g.at("u64").scalar_bits(), ~std::uint64_t{0});
  EXPECT_EQ(g.at("i16").as_int(), -30000);
  EXPECT_TRUE(std::signbit(g.at("f32").as_float()));
  EXPECT_EQ(g.at("f64").as_float(), 0.1);
  EXPECT_EQ(g.at("str").as_string(), std::string("a\0b", 3));
  EXPECT_EQ(g.at("arr.i64").ints(), (std::vector<std::int64_t>{-1, 1ll << 50}));
  EXPECT_EQ(g.at("arr.str").strings(), (std::vector<std::string>{"x", "", "zz"}));
  EXPECT_EQ(g.at("arr.empty").size(), 0u);
  for (std::size_t i = 1; i < g.metadata.size(); ++i) {
    io::GgufWriter w2;
    w2.set(g.metadata[i].first, g.metadata[i].second);
    const auto again = io::gguf_parse(w2.serialize(), "again");
    EXPECT_EQ(again.metadata[0].second, g.metadata[i].second) << g.metadata[i].first;
  }
  ASSERT_EQ(g.tensors.size(), 2u);
  EXPECT_EQ(g.tensors[1].offset % 64, 0u);
  EXPECT_EQ(*g.tensors[1].nbytes, 256u / 4 + 32);
  EXPECT_EQ(g.data_offset % 64, 0u);
  const auto t1 = io::gguf_storage(g.tensors[1], io::gguf_tensor_data(bytes, g, g.tensors[1]), "mem");
  EXPECT_EQ(t1.dtype(), tensor::DType::ternary2);
  EXPECT_EQ(t1.shape(), (tensor::Dims{2, 128}));
  EXPECT_EQ(t1.scales()[0], 0.5f);
  EXPECT_EQ(g.at("str").to_display(), "\"a\\x00b\"");
}

TEST(GgufText, ANulByteInAKeyPrintsEscapedNotCutShort) {
  EXPECT_EQ(io::escape_bytes(std::string("ab\0c\x01\\\xff", 7)), "ab\\x00c\\x01\\\\\\xff");
  EXPECT_EQ(io::escape_bytes("h\xc3\xa9llo"), "h\xc3\xa9llo");  // UTF-8 kept
  io::GgufWriter w;
  w.set(std::string("bad\0key", 7), io::GgufValue::string("x"));
  const auto bytes = w.serialize();
  const io::GgufFile g = io::gguf_parse(bytes, "mem");
  try {
    (void)g.at(std::string("bad\0key", 7)).as_int();
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("bad\\x00key is string"), std::string::npos) << e.what();
  }
  std::vector<unsigned char> dup = bytes;  // a second copy of the key: the duplicate error names it whole
  io::GgufWriter w2;
  w2.set(std::string("bad\0key", 7), io::GgufValue::string("x"));
  w2.set(std::string("bad\0kez", 7), io::GgufValue::string("x"));
  auto b2 = w2.serialize();
  for (std::size_t i = 0; i + 7 <= b2.size(); ++i)
    if (std::memcmp(b2.data() + i, "bad\0kez", 7) == 0) b2[i + 6] = 'y';
  try {
    (void)io::gguf_parse(b2, "mem");
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("duplicate key bad\\x00key"), std::string::npos) << e.what();
  }
}

// I2_S as bitnet.cpp's quantize_i2_s lays it out: weight j of a block of 128
// in byte j % 32 at shift 6 - 2 (j / 32), field code + 1; scale at n/4.
TEST(GgufTensor, I2sLayoutKnownAnswer) {
  std::vector<std::int8_t> codes(256, 0);
  codes[0] = 1;     // byte 0, shift 6: field 2 -> 0x80 | (zeros: 0x15)
  codes[32] = -1;   // byte 0, shift 4: field 0
  codes[127] = 1;   // byte 31, shift 0: field 2
  codes[128] = -1;  // block 1: byte 32, shift 6: field 0
  const auto b = io::i2s_pack(codes, 0.25f);
  ASSERT_EQ(b.size(), 256u / 4 + 32);
  EXPECT_EQ(b[0], 0x80 | 0x00 | 0x04 | 0x01);  // fields 2, 0, 1, 1
  EXPECT_EQ(b[31], 0x40 | 0x10 | 0x04 | 0x02); // fields 1, 1, 1, 2
  EXPECT_EQ(b[32], 0x00 | 0x10 | 0x04 | 0x01); // fields 0, 1, 1, 1
  EXPECT_EQ(b[1], 0x55);
  float s;
  std::memcpy(&s, b.data() + 64, 4);
  EXPECT_EQ(s, 0.25f);
  for (std::size_t i = 68; i < b.size(); ++i) EXPECT_EQ(b[i], 0);
  const auto t = io::i2s_unpack(b, 256, "t");
  EXPECT_EQ(t.codes, codes);
  auto bad = b;
  bad[5] |= 0xC0;  // field 3
  EXPECT_THROW(io::i2s_unpack(bad, 256, "t"), std::runtime_error);
  EXPECT_THROW(io::i2s_unpack(b, 128, "t"), std::runtime_error);
  EXPECT_THROW(io::i2s_pack(std::vector<std::int8_t>(100), 1.0f), std::invalid_argument);
}

TEST(GgufTensor, Q8_0AndFloatCodecs) {
  std::vector<float> v(64);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = (static_cast<float>(i) - 20.5f) / 7.0f;
  const auto q = io::gguf_quantize(io::kGgmlQ8_0, v, "q");
  ASSERT_EQ(q.size(), 68u);
  // Block 0: amax = 20.5/7, d = amax/127 as f16, codes round(x / d).
  const float amax = 20.5f / 7.0f, d = amax / 127.0f;
  EXPECT_EQ(q[0] | (q[1] << 8), tensor::f32_to_f16(d));
  EXPECT_EQ(static_cast<std::int8_t>(q[2]), -127);
  EXPECT_EQ(static_cast<std::int8_t>(q[2 + 20]), static_cast<std::int8_t>(std::round(v[20] * (1.0f / d))));
  const auto back = io::gguf_dequantize(io::kGgmlQ8_0, q, 64, "q");
  const float df = tensor::f16_to_f32(tensor::f32_to_f16(d));
  EXPECT_EQ(back[3], df * static_cast<float>(static_cast<std::int8_t>(q[5])));
  for (std::size_t i = 0; i < 32; ++i) EXPECT_LE(std::fabs(back[i] - v[i]), df * 0.5f + 1e-6f);
  for (std::uint32_t type : {io::kGgmlF32, io::kGgmlF16, io::kGgmlBF16}) {
    const auto b = io::gguf_quantize(type, v, "v");
    const auto r = io::gguf_dequantize(type, b, 64, "v");
    for (std::size_t i = 0; i < v.size(); ++i) {
      const float want = type == io::kGgmlF32 ? v[i]
                         : type == io::kGgmlF16 ? tensor::f16_to_f32(tensor::f32_to_f16(v[i]))
                                                 : tensor::bf16_to_f32(tensor::f32_to_bf16(v[i]));
      EXPECT_EQ(r[i], want);
    }
  }
  EXPECT_THROW(io::gguf_dequantize(io::kGgmlQ8_0, q, 32, "q"), std::runtime_error);
  EXPECT_THROW(io::gguf_quantize(io::kGgmlQ8_0, std::vector<float>(33), "q"), std::invalid_argument);
}

// transformers' pack_weights: row r + i·(out/4) in bits 2i of packed row r.
TEST(HfPacked, LayoutKnownAnswerAndRoundTrip) {
  std::vector<std::int8_t> codes(8 * 3, 0);  // out 8, in 3: packed [2, 3]
  codes[0 * 3 + 0] = 1;   // r 0 -> packed row 0, bits 0..1: field 2
  codes[2 * 3 + 0] = -1;  // r 2 -> packed row 0, bits 2..3: field 0
  codes[7 * 3 + 2] = 1;   // r 7 -> packed row 1, bits 6..7: field 2
  const auto p = load::hf_pack_ternary(codes, 8, 3);
  ASSERT_EQ(p.size(), 6u);
  EXPECT_EQ(p[0], 0x02 | 0x00 | 0x10 | 0x40);
  EXPECT_EQ(p[1 * 3 + 2], 0x01 | 0x04 | 0x10 | 0x80);
  EXPECT_EQ(load::hf_unpack_ternary(p, 8, 3, "t"), codes);
  std::mt19937 rng(5);
  std::vector<std::int8_t> r(64 * 20);
  for (auto& c : r) c = static_cast<std::int8_t>(static_cast<int>(rng() % 3) - 1);
  EXPECT_EQ(load::hf_unpack_ternary(load::hf_pack_ternary(r, 64, 20), 64, 20, "t"), r);
}

// The F32 master holds the codes and the scale exactly under the model's
// quantizer, for random codes, densities, sizes and scales.
TEST(TernaryMaster, QuantizesBackToTheCodesAndTheScale) {
  std::mt19937 rng(11);
  int tried = 0, exact = 0, unreachable = 0;
  for (int k = 0; k < 60; ++k) {
    const std::size_t n = 128u * (1 + rng() % 200);
    const double density = 0.05 + 0.9 * (rng() % 1000) / 1000.0;
    std::vector<std::int8_t> codes(n);
    for (auto& c : codes) c = (rng() % 1000) / 1000.0 < density ? static_cast<std::int8_t>(rng() % 2 ? 1 : -1) : 0;
    const float scale = std::ldexp(1.0f + static_cast<float>(rng() % 100000) / 100000.0f, -static_cast<int>(rng() % 12));
    ++tried;
    const auto w = load::ternary_master(codes, scale);
    if (!w) {
      // Only where no float S has S / n == scale (a brute search around n·scale).
      const float nf = static_cast<float>(n);
      float s = std::nextafter(scale * nf, 0.0f);
      for (int j = 0; j < 64; ++j) s = std::nextafter(s, 0.0f);
      bool reachable = false;
      for (int j = 0; j < 129; ++j, s = std::nextafter(s, 1e38f)) reachable |= s / nf == scale;
      EXPECT_FALSE(reachable) << "n " << n << " scale " << scale;
      ++unreachable;
      continue;
    }
    const auto q = ops::quantize_ternary(w->data(), n);
    EXPECT_EQ(q.scale, scale);
    EXPECT_EQ(q.q, codes);
    exact += q.scale == scale && q.q == codes;
  }
  EXPECT_EQ(exact + unreachable, tried);
  EXPECT_LE(unreachable, 3);
  EXPECT_FALSE(load::ternary_master(std::vector<std::int8_t>(128, 1), 1e-6f));  // under the floor
}

std::vector<float> loaded_logits(const std::string& path) {
  auto m = load::make_loaded_model(load::load_model_file(path));
  return logits(*m);
}

class ModelRoundTrip : public ::testing::TestWithParam<std::string> {};

TEST_P(ModelRoundTrip, GgufF32AndHfF32GiveTheSameLogitsBitForBit) {
  auto src = source_model(GetParam(), 7);
  const auto want = logits(*src);
  const fs::path d = tmp_dir("rt_" + GetParam());
  load::write_gguf_model((d / "m.gguf").string(), src->config(), src->params(), {});
  EXPECT_TRUE(same_bits(loaded_logits((d / "m.gguf").string()), want));
  train::save_hf_model((d / "hf").string(), *src);
  EXPECT_TRUE(same_bits(loaded_logits((d / "hf").string()), want));
  const auto loaded = load::load_model_file((d / "m.gguf").string());
  for (std::size_t i = 0; i < loaded.params.size(); ++i) EXPECT_EQ(loaded.params[i].value, src->params()[i].value) << loaded.params[i].name;
  fs::remove_all(d);
}

// F16 / BF16 / Q8_0 matrices: the logits of the source model whose matrices
// hold the rounded values, bit for bit.
TEST_P(ModelRoundTrip, RoundedTypesGiveTheRoundedModelsLogits) {
  const fs::path d = tmp_dir("rnd_" + GetParam());
  for (std::uint32_t type : {io::kGgmlF16, io::kGgmlBF16, io::kGgmlQ8_0}) {
    auto src = source_model(GetParam(), 8);
    load::GgufWriteOptions opt;
    opt.matrix_type = type;
    load::write_gguf_model((d / "m.gguf").string(), src->config(), src->params(), opt);
    const bool bitnet = src->config().family == model::Family::Bitnet;
    for (auto& p : src->params()) {
      if (p.shape.size() != 2 || p.name == "model.embed_tokens.weight") continue;
      if (bitnet && p.name != "lm_head.weight") continue;  // BitNet projections go as code·scale (below)
      if (type == io::kGgmlQ8_0 && p.shape[1] % 32 != 0) continue;  // stays F32
      p.value = io::gguf_dequantize(type, io::gguf_quantize(type, p.value, p.name), p.value.size(), p.name);
    }
    if (bitnet) continue;  // checked by the ternary test
    EXPECT_TRUE(same_bits(loaded_logits((d / "m.gguf").string()), logits(*src))) << io::ggml_type_label(type);
  }
  fs::remove_all(d);
}

INSTANTIATE_TEST_SUITE_P(Micro, ModelRoundTrip, ::testing::Values("llama-micro", "bitnet-micro"));

// llama.cpp's vocabulary loader requires tokenizer.ggml.model: a file written
// without a tokenizer says "no_vocab" (llama.cpp then makes vocab_size
// placeholder tokens; bench/infer/cpu_baselines.sh runs llama-bench on such a
// file), and a tokenizer given in `extra` is kept, its key once.
TEST(GgufExport, TokenizerModelIsNoVocabWithoutATokenizerAndTheGivenOneWithOne) {
  auto src = source_model("llama-micro", 3);
  const auto count = [](const io::GgufFile& g, const std::string& key) {
    return std::count_if(g.metadata.begin(), g.metadata.end(), [&](const auto& kv) { return kv.first == key; });
  };
  const io::GgufFile bare = io::gguf_parse(load::serialize_gguf_model(src->config(), src->params(), {}), "bare");
  EXPECT_EQ(bare.at("tokenizer.ggml.model").as_string(), "no_vocab");
  EXPECT_EQ(bare.at("llama.vocab_size").as_int(), src->config().vocab_size);  // what llama.cpp sizes the placeholders by
  EXPECT_EQ(count(bare, "tokenizer.ggml.model"), 1);
  load::GgufWriteOptions opt;
  opt.extra.emplace_back("tokenizer.ggml.model", io::GgufValue::string("llama"));
  const io::GgufFile tok = io::gguf_parse(load::serialize_gguf_model(src->config(), src->params(), opt), "tok");
  EXPECT_EQ(tok.at("tokenizer.ggml.model").as_string(), "llama");
  EXPECT_EQ(count(tok, "tokenizer.ggml.model"), 1);
}

// BitNet as I2_S (and as F16/F32 code·scale, bitnet.cpp's float files): the
// model computes from codes and scale only, so the loaded model's logits are
// the source's bit for bit; held as TERNARY2 the codes and scale are the
// source quantizer's.
TEST(BitnetTernary, I2sAndCodeScaleFloatsGiveTheSourceLogitsBitForBit) {
  auto src = source_model("bitnet-micro", 9);
  const auto want = logits(*src);
  const fs::path d = tmp_dir("i2s");
  for (std::uint32_t type : {io::kGgmlTypeI2S, io::kGgmlF32, io::kGgmlF16}) {
    load::GgufWriteOptions opt;
    opt.matrix_type = type;
    opt.embedding_type = io::kGgmlF32;
    opt.bitnet_ternary_floats = true;
    // code·scale in F16 is exact only when the scale is: write the F32 case
    // from ternary params whose scale is an f16 value.
    std::vector<model::Param> params = src->params();
    load::write_gguf_model((d / "m.gguf").string(), src->config(), params, opt);
    if (type == io::kGgmlF16) {
      // F16 rounds the scale: the loaded model is the source with that scale.
      const auto l = load::load_model_file((d / "m.gguf").string(), {load::TernaryAs::ternary2});
      for (std::size_t i = 0; i < l.params.size(); ++i)
        if (l.params[i].dtype == tensor::DType::ternary2) {
          const auto q = ops::quantize_ternary(params[i].value.data(), params[i].value.size());
          EXPECT_EQ(tensor::codes_of(l.params[i].frozen_value), q.q);
          EXPECT_EQ(l.params[i].frozen_value.scales()[0], tensor::f16_to_f32(tensor::f32_to_f16(q.scale)));
        }
      continue;
    }
    EXPECT_TRUE(same_bits(loaded_logits((d / "m.gguf").string()), want)) << io::ggml_type_label(type);
    const auto l = load::load_model_file((d / "m.gguf").string(), {load::TernaryAs::ternary2});
    int ternary = 0;
    for (std::size_t i = 0; i < l.params.size(); ++i) {
      if (l.params[i].dtype != tensor::DType::ternary2) continue;
      ++ternary;
      const auto q = ops::quantize_ternary(params[i].value.data(), params[i].value.size());
      EXPECT_EQ(tensor::codes_of(l.params[i].frozen_value), q.q) << l.params[i].name;
      EXPECT_EQ(l.params[i].frozen_value.scales()[0], q.scale) << l.params[i].name;
    }
    EXPECT_EQ(ternary, 2 * 7);
    // The CPU model runs the file's codes and scale (the engine's codes path)
    // with the source's bits, as it runs the F32 masters.
    EXPECT_TRUE(same_bits(load::make_loaded_model(l)->next_logits(tokens(256), 1), want)) << io::ggml_type_label(type);
  }
  fs::remove_all(d);
}

// Hugging Face's packed BitNet: uint8 codes and weight_scale = 1 / step
// (bf16). Loaded, the codes are the source's and the step 1/bf16(1/scale);
// the logits are those of the source model with that step, bit for bit.
TEST(BitnetTernary, HfPackedCheckpointLoads) {
  auto src = source_model("bitnet-micro", 10);
  const fs::path d = tmp_dir("packed");
  train::save_hf_model((d / "hf").string(), *src);
  std::vector<std::vector<std::uint8_t>> keep;
  keep.reserve(64);  // refs point into it
  std::vector<io::TensorRef> refs;
  auto cfg = src->config();
  std::vector<model::Param> expect = src->params();
  for (std::size_t i = 0; i < src->params().size(); ++i) {
    const model::Param& p = src->params()[i];
    const bool proj = p.shape.size() == 2 && p.name != "model.embed_tokens.weight" && p.name != "lm_head.weight";
    if (!proj) {
      refs.push_back(io::TensorRef::f32(p.name, p.shape, p.value));
      continue;
    }
    const auto q = ops::quantize_ternary(p.value.data(), p.value.size());
    keep.push_back(load::hf_pack_ternary(q.q, p.shape[0], p.shape[1]));
    refs.push_back({p.name, io::DType::U8, {p.shape[0] / 4, p.shape[1]}, keep.back()});
    const std::uint16_t ws = tensor::f32_to_bf16(1.0f / q.scale);
    keep.push_back({static_cast<std::uint8_t>(ws), static_cast<std::uint8_t>(ws >> 8)});
    refs.push_back({p.name.substr(0, p.name.size() - 6) + "weight_scale", io::DType::BF16, {1}, keep.back()});
    expect[i].value = *load::ternary_master(q.q, 1.0f / tensor::bf16_to_f32(ws));  // transformers divides by weight_scale
  }
  io::write_safetensors((d / "hf" / "model.safetensors").string(), refs);
  const auto l = load::load_model_file((d / "hf").string());
  EXPECT_EQ(l.format, "hf-packed");
  auto ref = model::make_cpu_model(cfg);
  ref->params() = expect;
  EXPECT_TRUE(same_bits(logits(*load::make_loaded_model(l)), logits(*ref)));
  fs::remove_all(d);
}

TEST(ModelFile, MalformedFilesGiveOneClearLine) {
  auto src = source_model("llama-micro", 3);
  auto bytes = load::serialize_gguf_model(src->config(), src->params(), {});
  const auto expect_error = [&](std::vector<unsigned char> b, const std::string& part) {
    try {
      (void)load::load_gguf_model_bytes(b, "m.gguf");
      ADD_FAILURE() << "no error for " << part;
    } catch (const std::runtime_error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(part), std::string::npos) << what;
      EXPECT_EQ(what.find('\n'), std::string::npos);
      EXPECT_EQ(what.rfind("m.gguf", 0), 0u) << what;
    }
  };
  auto arch = bytes;  // "llama" -> "llam\x01"
  for (std::size_t i = 0; i + 5 <= arch.size(); ++i)
    if (std::memcmp(arch.data() + i, "llama", 5) == 0) {
      arch[i + 4] = 1;
      break;
    }
  expect_error(arch, "architecture \"llam\\x01\" is not supported");
  auto name = bytes;  // blk.0.attn_q.weight -> blk.0.attn_x.weight
  for (std::size_t i = 0; i + 19 <= name.size(); ++i)
    if (std::memcmp(name.data() + i, "blk.0.attn_q.weight", 19) == 0) name[i + 11] = 'x';
  expect_error(name, "missing tensor blk.0.attn_q.weight");
  expect_error(std::vector<unsigned char>(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(bytes.size() - 1)), "past the end");
  std::mt19937 rng(2);
  for (int k = 0; k < 3000; ++k) {
    auto b = bytes;
    for (int f = 0; f < 3; ++f) b[rng() % std::min<std::size_t>(b.size(), 2048)] = static_cast<unsigned char>(rng());
    try {
      (void)load::load_gguf_model_bytes(b, "m.gguf");
    } catch (const std::runtime_error&) {
    }
  }
}

TEST(ModelFile, GgufNamesMapBothWays) {
  for (const auto& s : model::param_specs(model::preset("bitnet-micro"))) {
    const auto g = load::gguf_name_of(s.name);
    ASSERT_TRUE(g) << s.name;
    EXPECT_EQ(load::hf_name_of(*g), s.name);
  }
  EXPECT_EQ(*load::gguf_name_of("model.layers.12.mlp.ffn_sub_norm.weight"), "blk.12.ffn_sub_norm.weight");
  EXPECT_EQ(*load::gguf_name_of("lm_head.weight"), "output.weight");
  EXPECT_FALSE(load::hf_name_of("blk.x.attn_q.weight"));
}

}  // namespace

namespace {

// transformers 5 writes rope_parameters {rope_type, rope_theta}, not rope_theta.
TEST(ModelFile, HfConfigWithRopeParametersReadsItsTheta) {
  auto src = source_model("bitnet-micro", 4);
  const fs::path d = tmp_dir("ropeparams");
  train::save_hf_model((d / "hf").string(), *src);
  auto j = nlohmann::json::parse(io::read_file_text((d / "hf" / "config.json").string()));
  j.erase("rope_theta");
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 12345.0}};
  const std::string text = j.dump();
  io::write_file_atomic((d / "hf" / "config.json").string(), std::span(reinterpret_cast<const std::uint8_t*>(text.data()), text.size()));
  EXPECT_EQ(load::load_model_file((d / "hf").string()).config.rope_theta, 12345.0);
  j["rope_parameters"]["rope_type"] = "yarn";
  const std::string text2 = j.dump();
  io::write_file_atomic((d / "hf" / "config.json").string(), std::span(reinterpret_cast<const std::uint8_t*>(text2.data()), text2.size()));
  EXPECT_THROW(load::load_model_file((d / "hf").string()), std::runtime_error);
  fs::remove_all(d);
}

}  // namespace
