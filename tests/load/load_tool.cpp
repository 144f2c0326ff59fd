// The C++ side of tests/load/gguf_crosscheck.py (PyPI gguf, llama.cpp's own
// Python package, reads what this writes and writes what this reads):
//   load_tool sample OUT.gguf          every metadata type; F32/F16/BF16/Q8_0/I2_S tensors of known values
//   load_tool read IN.gguf             JSON: metadata (type, value) and tensors (dims, type, f32 bits / I2_S codes + scale)
//   load_tool model PRESET SEED DIR    a model: DIR/lockstep.gguf (F32), DIR/hf (HF F32), DIR/i2s.gguf (BitNet);
//                                      prints the source model's logits
//   load_tool tiny DIR                 DIR/tiny-llama.gguf (F16), DIR/tiny-bitnet.gguf (I2_S): fuzz seeds
//   load_tool logits PATH              a model file's logits (next_logits of fixed tokens) as f32 bit patterns
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

#include "lockstep/io/gguf.hpp"
#include "lockstep/io/gguf_tensor.hpp"
#include "lockstep/load/model_file.hpp"
#include "lockstep/train/checkpoint.hpp"

using namespace lockstep;

namespace {

// The values both sides compute: ((i·37) mod 101 − 50) / 13 in binary32.
float value_at(std::size_t i) { return static_cast<float>(static_cast<int>((i * 37) % 101) - 50) / 13.0f; }
std::int8_t code_at(std::size_t i) { return static_cast<std::int8_t>(static_cast<int>((i * 7) % 3) - 1); }

std::vector<float> values(std::size_t n) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = value_at(i);
  return v;
}

std::uint32_t bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

std::vector<std::int32_t> tokens(std::int64_t vocab) {
  std::vector<std::int32_t> t;
  for (int i = 0; i < 11; ++i) t.push_back(static_cast<std::int32_t>((i * 37 + 5) % vocab));
  return t;
}

void print_logits(model::Model& m) {
  const auto l = m.next_logits(tokens(m.config().vocab_size), 1);
  for (std::size_t i = 0; i < l.size(); ++i) std::printf("%s%08x", i ? " " : "", bits(l[i]));
  std::printf("\n");
}

int sample(const std::string& out) {
  using io::GgufType;
  using io::GgufValue;
  io::GgufWriter w(32);
  w.set("general.architecture", GgufValue::string("lockstep-sample"));
  w.set("t.u8", GgufValue::integer(GgufType::kU8, 250));
  w.set("t.i8", GgufValue::integer(GgufType::kI8, -128));
  w.set("t.u16", GgufValue::integer(GgufType::kU16, 65535));
  w.set("t.i16", GgufValue::integer(GgufType::kI16, -32768));
  w.set("t.u32", GgufValue::integer(GgufType::kU32, 4294967295ll));
  w.set("t.i32", GgufValue::integer(GgufType::kI32, -2147483647 - 1));
  w.set("t.u64", GgufValue::u64(18446744073709551615ull));
  w.set("t.i64", GgufValue::integer(GgufType::kI64, -9223372036854775807ll - 1));
  w.set("t.f32", GgufValue::f32(3.25f));
  w.set("t.f64", GgufValue::f64(-1e-300));
  w.set("t.bool", GgufValue::boolean(true));
  w.set("t.str", GgufValue::string("h\xc3\xa9llo"));
  w.set("t.arr_i32", GgufValue::int_array(GgufType::kI32, {-1, 0, 2147483647}));
  w.set("t.arr_u8", GgufValue::int_array(GgufType::kU8, {0, 255}));
  w.set("t.arr_f32", GgufValue::f32_array({0.5f, -2.0f}));
  w.set("t.arr_f64", GgufValue::f64_array({0.1}));
  w.set("t.arr_bool", GgufValue::bool_array({false, true}));
  w.set("t.arr_str", GgufValue::string_array({"a", "", "\xe2\x82\xac"}));
  w.add_tensor("f32", {4, 3}, io::kGgmlF32, io::gguf_quantize(io::kGgmlF32, values(12), "f32"));
  w.add_tensor("f16", {32, 2}, io::kGgmlF16, io::gguf_quantize(io::kGgmlF16, values(64), "f16"));
  w.add_tensor("bf16", {32, 2}, io::kGgmlBF16, io::gguf_quantize(io::kGgmlBF16, values(64), "bf16"));
  w.add_tensor("q8_0", {64, 2}, io::kGgmlQ8_0, io::gguf_quantize(io::kGgmlQ8_0, values(128), "q8_0"));
  std::vector<std::int8_t> codes(256);
  for (std::size_t i = 0; i < codes.size(); ++i) codes[i] = code_at(i);
  w.add_tensor("i2_s", {128, 2}, io::kGgmlTypeI2S, io::i2s_pack(codes, 0.37f));
  w.write(out);
  return 0;
}

int read(const std::string& in) {
  const io::GgufFile g = io::gguf_read(in);
  nlohmann::json j;
  j["alignment"] = g.alignment;
  for (const auto& [k, v] : g.metadata) {
    nlohmann::json e;
    e["type"] = io::gguf_type_name(v.type());
    const auto one = [&](io::GgufType t, const io::GgufValue& x) -> nlohmann::json {
      if (t == io::GgufType::kString) return x.as_string();
      if (t == io::GgufType::kBool) return x.as_bool();
      if (t == io::GgufType::kF32 || t == io::GgufType::kF64) return x.as_float();
      if (t == io::GgufType::kU64) return x.scalar_bits();
      return x.as_int();
    };
    if (v.is_array()) {
      e["elem"] = io::gguf_type_name(v.elem_type());
      nlohmann::json a = nlohmann::json::array();
      if (v.elem_type() == io::GgufType::kString) {
        for (const auto& s : v.strings()) a.push_back(s);
      } else if (v.elem_type() == io::GgufType::kF32) {
        for (float f : v.f32s()) a.push_back(static_cast<double>(f));
      } else if (v.elem_type() == io::GgufType::kF64) {
        for (std::size_t i = 0; i < v.size(); ++i) {
          double d;
          std::memcpy(&d, v.raw().data() + 8 * i, 8);
          a.push_back(d);
        }
      } else if (v.elem_type() == io::GgufType::kBool) {
        for (std::size_t i = 0; i < v.size(); ++i) a.push_back(v.raw()[i] != 0);
      } else {
        for (auto x : v.ints()) a.push_back(x);
      }
      e["value"] = a;
    } else {
      e["value"] = one(v.type(), v);
    }
    j["metadata"][k] = e;
  }
  for (const auto& t : g.tensors) {
    nlohmann::json e;
    e["dims"] = t.dims;
    e["type"] = io::ggml_type_label(t.type);
    const auto data = io::gguf_read_tensor_data(in, g, t);
    const tensor::Storage st = io::gguf_storage(t, data, in);
    if (st.dtype() == tensor::DType::ternary2) {
      e["codes"] = tensor::codes_of(st);
      e["scale_bits"] = bits(st.scales()[0]);
    } else {
      std::vector<std::uint32_t> b;
      for (float f : tensor::to_f32(st)) b.push_back(bits(f));
      e["f32_bits"] = b;
    }
    j["tensors"][t.name] = e;
  }
  std::cout << j.dump() << "\n";
  return 0;
}

int make(const std::string& preset, std::uint64_t seed, const std::string& dir) {
  auto m = model::make_cpu_model(model::preset(preset));
  m->init(seed);
  for (auto& p : m->params())
    if (p.shape.size() == 1)
      for (std::size_t i = 0; i < p.value.size(); ++i) p.value[i] = 1.0f + 0.01f * static_cast<float>(i % 7);
  std::filesystem::create_directories(dir);
  load::write_gguf_model(dir + "/lockstep.gguf", m->config(), m->params(), {});
  train::save_hf_model(dir + "/hf", *m);
  if (m->config().family == model::Family::Bitnet) {
    load::GgufWriteOptions opt;
    opt.matrix_type = io::kGgmlTypeI2S;
    load::write_gguf_model(dir + "/i2s.gguf", m->config(), m->params(), opt);
  }
  print_logits(*m);
  return 0;
}

// Tiny models (fuzz seeds, tests/fixtures/fuzz): vocab 16, width 16, one layer.
int tiny(const std::string& dir) {
  for (const char* family : {"llama", "bitnet"}) {
    model::ModelConfig c = model::preset(std::string(family) + "-micro");
    c.vocab_size = 16, c.max_seq = 8, c.d_model = 16, c.n_layer = 1, c.n_head = 2, c.n_kv_head = 1, c.head_dim = 8, c.d_ff = 32;
    auto m = model::make_cpu_model(c);
    m->init(3);
    load::GgufWriteOptions opt;
    opt.matrix_type = c.family == model::Family::Bitnet ? io::kGgmlTypeI2S : io::kGgmlF16;
    load::write_gguf_model(dir + "/tiny-" + family + ".gguf", c, m->params(), opt);
  }
  return 0;
}

int logits(const std::string& path) {
  auto m = load::make_loaded_model(load::load_model_file(path));
  print_logits(*m);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string cmd = argc > 1 ? argv[1] : "";
    if (cmd == "sample" && argc == 3) return sample(argv[2]);
    if (cmd == "read" && argc == 3) return read(argv[2]);
    if (cmd == "model" && argc == 5) return make(argv[2], std::stoull(argv[3]), argv[4]);
    if (cmd == "logits" && argc == 3) return logits(argv[2]);
    if (cmd == "tiny" && argc == 3) return tiny(argv[2]);
    std::fprintf(stderr, "usage: load_tool sample OUT | read IN | model PRESET SEED DIR | logits PATH\n");
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "load_tool: %s\n", e.what());
    return 1;
  }
}
