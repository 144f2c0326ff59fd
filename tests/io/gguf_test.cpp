// The GGUF reader: every value type and the tensor directory on a file built
// here byte by byte; every truncation and random corruptions of it throw
// std::runtime_error (never crash); the llama.cpp vocab files read.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>

#include "lockstep/io/gguf.hpp"

namespace {

using namespace lockstep::io;

// A little-endian GGUF writer for tests.
struct Builder {
  std::string b;
  template <class T>
  void put(T v) {
    for (std::size_t k = 0; k < sizeof(T); ++k) b.push_back(static_cast<char>((static_cast<std::uint64_t>(v) >> (8 * k)) & 0xFF));
  }
  void str(const std::string& s) {
    put<std::uint64_t>(s.size());
    b += s;
  }
  void f32(float f) {
    std::uint32_t u;
    std::memcpy(&u, &f, 4);
    put(u);
  }
  void f64(double d) {
    std::uint64_t u;
    std::memcpy(&u, &d, 8);
    put(u);
  }
  void key(const std::string& k, GgufType t) {
    str(k);
    put(static_cast<std::uint32_t>(t));
  }
};

// Every value type, two tensors (F32 and Q8_0), alignment 64, then data.
std::string sample_file() {
  Builder g;
  g.b = "GGUF";
  g.put<std::uint32_t>(3);
  g.put<std::uint64_t>(2);   // tensors
  g.put<std::uint64_t>(16);  // kv
  g.key("u8", GgufType::kU8), g.put<std::uint8_t>(200);
  g.key("i8", GgufType::kI8), g.put<std::int8_t>(-5);
  g.key("u16", GgufType::kU16), g.put<std::uint16_t>(60000);
  g.key("i16", GgufType::kI16), g.put<std::int16_t>(-30000);
  g.key("u32", GgufType::kU32), g.put<std::uint32_t>(4000000000u);
  g.key("i32", GgufType::kI32), g.put<std::int32_t>(-2000000000);
  g.key("f32", GgufType::kF32), g.f32(1.5f);
  g.key("bool", GgufType::kBool), g.put<std::uint8_t>(1);
  g.key("str", GgufType::kString), g.str("héllo");
  g.key("u64", GgufType::kU64), g.put<std::uint64_t>(1ull << 40);
  g.key("i64", GgufType::kI64), g.put<std::int64_t>(-(1ll << 40));
  g.key("f64", GgufType::kF64), g.f64(-0.25);
  g.key("arr.str", GgufType::kArray), g.put<std::uint32_t>(8), g.put<std::uint64_t>(3), g.str("a"), g.str(""), g.str("ccc");
  g.key("arr.i32", GgufType::kArray), g.put<std::uint32_t>(5), g.put<std::uint64_t>(3);
  g.put<std::int32_t>(-1), g.put<std::int32_t>(0), g.put<std::int32_t>(7);
  g.key("arr.f32", GgufType::kArray), g.put<std::uint32_t>(6), g.put<std::uint64_t>(2), g.f32(0.5f), g.f32(-2.0f);
  g.key("general.alignment", GgufType::kU32), g.put<std::uint32_t>(64);
  g.str("w"), g.put<std::uint32_t>(2), g.put<std::uint64_t>(4), g.put<std::uint64_t>(3), g.put<std::uint32_t>(0), g.put<std::uint64_t>(0);
  g.str("q"), g.put<std::uint32_t>(1), g.put<std::uint64_t>(64), g.put<std::uint32_t>(8), g.put<std::uint64_t>(64);
  while (g.b.size() % 64) g.b.push_back('\0');
  g.b += std::string(64 + 2 * 34, '\x11');  // 12 f32 (48 bytes, padded to 64), then 2 Q8_0 blocks
  return g.b;
}

GgufFile parse(const std::string& s) {
  return gguf_parse(std::span(reinterpret_cast<const unsigned char*>(s.data()), s.size()), "mem");
}

TEST(Gguf, ReadsEveryTypeAndTheTensorDirectory) {
  const std::string s = sample_file();
  const GgufFile g = parse(s);
  EXPECT_EQ(g.version, 3u);
  ASSERT_EQ(g.metadata.size(), 16u);
  EXPECT_EQ(g.at("u8").as_int(), 200);
  EXPECT_EQ(g.at("i8").as_int(), -5);
  EXPECT_EQ(g.at("u16").as_int(), 60000);
  EXPECT_EQ(g.at("i16").as_int(), -30000);
  EXPECT_EQ(g.at("u32").as_int(), 4000000000ll);
  EXPECT_EQ(g.at("i32").as_int(), -2000000000);
  EXPECT_EQ(g.at("f32").as_float(), 1.5);
  EXPECT_TRUE(g.at("bool").as_bool());
  EXPECT_EQ(g.at("str").as_string(), "héllo");
  EXPECT_EQ(g.at("u64").as_int(), 1ll << 40);
  EXPECT_EQ(g.at("i64").as_int(), -(1ll << 40));
  EXPECT_EQ(g.at("f64").as_float(), -0.25);
  EXPECT_EQ(g.at("arr.str").strings(), (std::vector<std::string>{"a", "", "ccc"}));
  EXPECT_EQ(g.at("arr.i32").ints(), (std::vector<std::int64_t>{-1, 0, 7}));
  EXPECT_EQ(g.at("arr.f32").f32s(), (std::vector<float>{0.5f, -2.0f}));
  EXPECT_EQ(g.alignment, 64u);
  ASSERT_EQ(g.tensors.size(), 2u);
  EXPECT_EQ(g.tensors[0].name, "w");
  EXPECT_EQ(g.tensors[0].dims, (std::vector<std::uint64_t>{4, 3}));
  EXPECT_EQ(g.tensors[0].nbytes, 48u);
  EXPECT_EQ(g.tensors[1].nbytes, 68u);
  EXPECT_EQ(g.data_offset % 64, 0u);
  EXPECT_EQ(g.data_offset + 64 + 68, s.size());
  EXPECT_THROW(g.at("str").as_int(), std::runtime_error);
  EXPECT_THROW(g.at("u8").strings(), std::runtime_error);
  EXPECT_THROW(g.at("missing"), std::runtime_error);
  EXPECT_EQ(g.find("missing"), nullptr);
}

// Every proper prefix of a valid file is refused with an error naming the
// source and offset; random byte corruptions either parse or throw
// runtime_error (the sanitizer build checks nothing else goes wrong).
TEST(Gguf, TruncationsAndCorruptionsThrowRuntimeError) {
  const std::string s = sample_file();
  int truncations = 0, bad = 0;
  for (std::size_t n = 0; n < s.size(); ++n) {
    try {
      parse(s.substr(0, n));
      ++bad;  // a truncated file must not parse (its tensor data is cut)
    } catch (const std::runtime_error& e) {
      bad += std::string(e.what()).rfind("mem: offset ", 0) != 0;
    }
    ++truncations;
  }
  std::mt19937 rng(3);
  int corruptions = 0, parsed = 0;
  for (int k = 0; k < 20000; ++k) {
    std::string t = s;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) t[rng() % t.size()] = static_cast<char>(rng() % 256);
    try {
      parse(t);
      ++parsed;
    } catch (const std::runtime_error&) {
    }
    ++corruptions;
  }
  std::printf("gguf: %d truncations (%d not refused cleanly), %d corruptions (%d still parse)\n", truncations, bad,
              corruptions, parsed);
  EXPECT_EQ(bad, 0);
}

TEST(Gguf, RejectsMalformedHeaders) {
  const auto expect = [](const std::string& bytes, const std::string& needle) {
    try {
      parse(bytes);
      ADD_FAILURE() << "parsed; wanted an error with " << needle;
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  Builder h;
  h.b = "GGUF";
  h.put<std::uint32_t>(3);
  h.put<std::uint64_t>(0);
  const std::string head = h.b;
  expect("GGUX", "bad magic");
  expect(std::string("GGUF\x04\0\0\0", 8), "unsupported GGUF version 4");
  expect(std::string("GGUF\0\0\0\x03", 8), "big-endian");
  Builder a = h;  // a huge string length
  a.put<std::uint64_t>(1), a.put<std::uint64_t>(~0ull);
  expect(a.b, "offset 24: key length");
  Builder c = h;  // a huge array
  c.put<std::uint64_t>(1), c.str("k"), c.put<std::uint32_t>(9), c.put<std::uint32_t>(5), c.put<std::uint64_t>(1ull << 60);
  expect(c.b, "array length");
  Builder d = h;  // nested array
  d.put<std::uint64_t>(1), d.str("k"), d.put<std::uint32_t>(9), d.put<std::uint32_t>(9), d.put<std::uint64_t>(0);
  expect(d.b, "nested arrays");
  Builder e = h;  // duplicate key
  e.put<std::uint64_t>(2), e.str("k"), e.put<std::uint32_t>(0), e.put<std::uint8_t>(1), e.str("k"), e.put<std::uint32_t>(0), e.put<std::uint8_t>(1);
  expect(e.b, "duplicate key k");
  Builder f = h;  // bad bool
  f.put<std::uint64_t>(1), f.str("k"), f.put<std::uint32_t>(7), f.put<std::uint8_t>(2);
  expect(f.b, "bool");
  Builder t;  // tensor past the end of the file
  t.b = "GGUF";
  t.put<std::uint32_t>(3), t.put<std::uint64_t>(1), t.put<std::uint64_t>(0);
  t.str("w"), t.put<std::uint32_t>(1), t.put<std::uint64_t>(1000), t.put<std::uint32_t>(0), t.put<std::uint64_t>(0);
  expect(t.b, "data extends past the end");
  Builder u = t;  // misaligned offset
  u.b.resize(u.b.size() - 8);
  u.put<std::uint64_t>(3);
  expect(u.b, "not aligned");
  Builder v;  // overflowing element count
  v.b = "GGUF";
  v.put<std::uint32_t>(3), v.put<std::uint64_t>(1), v.put<std::uint64_t>(0);
  v.str("w"), v.put<std::uint32_t>(2), v.put<std::uint64_t>(1ull << 40), v.put<std::uint64_t>(1ull << 40);
  v.put<std::uint32_t>(0), v.put<std::uint64_t>(0);
  expect(v.b, "element count overflows");
  (void)head;
}

TEST(Gguf, ReadsTheVocabFiles) {
  const std::filesystem::path f = std::filesystem::path(LOCKSTEP_SOURCE_DIR) / "tests/fixtures/tok/ggml-vocab-llama-spm.gguf";
  if (!std::filesystem::exists(f)) GTEST_SKIP() << "missing " << f;
  const GgufFile g = gguf_read(f);
  EXPECT_EQ(g.at("general.architecture").as_string(), "llama");
  EXPECT_EQ(g.at("tokenizer.ggml.model").as_string(), "llama");
  EXPECT_EQ(g.at("tokenizer.ggml.tokens").size(), 32000u);
  EXPECT_EQ(g.at("tokenizer.ggml.scores").f32s().size(), 32000u);
  EXPECT_EQ(g.at("tokenizer.ggml.token_type").ints().size(), 32000u);
  EXPECT_EQ(g.tensors.size(), 0u);
  std::printf("%s: %zu keys, %zu tensors\n", f.filename().c_str(), g.metadata.size(), g.tensors.size());
}

}  // namespace
