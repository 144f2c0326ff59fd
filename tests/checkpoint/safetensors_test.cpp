// safetensors: round trip, the reference implementation's validity rules,
// crash-safe writes, and agreement with Hugging Face's own library.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "lockstep/io/atomic_file.hpp"
#include "lockstep/io/safetensors.hpp"

#include "../common/run_command.hpp"

namespace io = lockstep::io;
namespace fs = std::filesystem;

namespace {

fs::path temp_dir() {
  fs::path d = fs::temp_directory_path() / ("lockstep_st_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d;
}

using lockstep::test::run_command;

bool have_python_safetensors() {
  int st = 0;
  run_command("python3 -c 'import numpy, safetensors'", &st);
  return st == 0;
}

std::string error_of(std::vector<std::uint8_t> bytes) {
  try {
    io::SafetensorsFile::parse(std::move(bytes), "t");
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

// A file whose header is `json` followed by `data_bytes` bytes of data.
// (Built in a string: GCC 12 -O3 warns falsely on vector::insert here.)
std::vector<std::uint8_t> raw(const std::string& json, std::size_t data_bytes) {
  std::string b(8, '\0');
  const std::uint64_t n = json.size();
  for (std::size_t i = 0; i < 8; ++i) b[i] = static_cast<char>(n >> (8 * i));
  b += json;
  b.append(data_bytes, '\0');
  return {b.begin(), b.end()};
}

}  // namespace

TEST(Safetensors, RoundTripKeepsBitsShapesAndMetadata) {
  const std::vector<float> w = {1.5f, -0.0f, 3.0e-40f, -7.25f, 0.0f, 1e30f};
  const std::vector<std::int32_t> ids = {7, -1, 1 << 30};
  const std::vector<io::TensorRef> ts = {
      io::TensorRef::f32("layer.0.w", {2, 3}, w),
      {"ids", io::DType::I32, {3}, {reinterpret_cast<const std::uint8_t*>(ids.data()), 12}},
  };
  const fs::path path = temp_dir() / "rt.safetensors";
  io::write_safetensors(path.string(), ts, {{"format", "pt"}});
  const auto f = io::SafetensorsFile::read(path.string());
  ASSERT_EQ(f.tensors().size(), 2u);
  EXPECT_EQ(f.metadata().at("format"), "pt");
  const std::vector<std::int64_t> shape = {2, 3};
  const auto back = f.f32("layer.0.w", &shape);
  ASSERT_EQ(back.size(), w.size());
  EXPECT_EQ(std::memcmp(back.data(), w.data(), w.size() * 4), 0);  // bit patterns, -0 included
  EXPECT_EQ(f.find("ids")->dtype, io::DType::I32);
  const std::vector<std::int64_t> wrong = {3, 2};
  EXPECT_THROW(f.f32("layer.0.w", &wrong), std::runtime_error);
  EXPECT_THROW(f.f32("ids"), std::runtime_error);      // not F32
  EXPECT_THROW(f.f32("missing"), std::runtime_error);
}

TEST(Safetensors, RefusesMalformedFiles) {
  const auto good = io::serialize_safetensors({io::TensorRef::f32("a", {2}, std::vector<float>{1, 2})});
  EXPECT_EQ(error_of(good), "");
  for (std::size_t cut = 0; cut < good.size(); ++cut)
    EXPECT_NE(error_of({good.begin(), good.begin() + static_cast<std::ptrdiff_t>(cut)}), "") << cut;
  ASSERT_GE(good.size(), 8u);
  auto huge = good;
  huge.at(7) = 0x7f;
  EXPECT_NE(error_of(huge).find("100 MB"), std::string::npos);
  const std::string e1 = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})";
  EXPECT_NE(error_of(raw(e1, 4)).find("4 bytes for 2 elements"), std::string::npos);
  const std::string e2 = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  EXPECT_NE(error_of(raw(e2, 4)).find("overlap or hole"), std::string::npos);
  const std::string e3 = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})";
  EXPECT_NE(error_of(raw(e3, 8)).find("overlap or hole"), std::string::npos);
  const std::string e4 = R"({"a":{"dtype":"F33","shape":[1],"data_offsets":[0,4]}})";
  EXPECT_NE(error_of(raw(e4, 4)).find("unknown safetensors dtype"), std::string::npos);
  const std::string e5 = R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})";
  EXPECT_NE(error_of(raw(e5, 4)).find("negative"), std::string::npos);
  EXPECT_NE(error_of(raw("{not json", 0)).find("not valid JSON"), std::string::npos);
  const std::string e6 = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  EXPECT_NE(error_of(raw(e6, 8)).find("cover"), std::string::npos);  // trailing bytes
  const std::string e7 = R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}})";
  EXPECT_NE(error_of(raw(e7, 4)), "");  // overflowing element count
}

TEST(Safetensors, CrashBeforeRenameLeavesThePreviousFile) {
  const fs::path path = temp_dir() / "atomic.safetensors";
  const std::vector<float> v1 = {1, 2, 3}, v2 = {4, 5, 6};
  io::write_safetensors(path.string(), {io::TensorRef::f32("x", {3}, v1)});
  io::g_before_rename_hook = [](const std::string&) { throw std::runtime_error("simulated crash"); };
  EXPECT_THROW(io::write_safetensors(path.string(), {io::TensorRef::f32("x", {3}, v2)}), std::runtime_error);
  io::g_before_rename_hook = nullptr;
  EXPECT_EQ(io::SafetensorsFile::read(path.string()).f32("x"), v1);
  int leftovers = 0;
  for (const auto& e : fs::directory_iterator(path.parent_path()))
    if (e.path().filename().string().find(".tmp") != std::string::npos) ++leftovers;
  EXPECT_EQ(leftovers, 0) << "temporary file left behind";
  io::write_safetensors(path.string(), {io::TensorRef::f32("x", {3}, v2)});
  EXPECT_EQ(io::SafetensorsFile::read(path.string()).f32("x"), v2);
}

TEST(Safetensors, AgreesWithHuggingFaceSafetensors) {
  if (!have_python_safetensors()) GTEST_SKIP() << "python3 numpy/safetensors absent (scripts/setup.sh installs them)";
  const std::string script = std::string(LOCKSTEP_TEST_DIR) + "/cross_check.py";
  // lockstep writes, HF reads.
  const std::vector<float> w = {0.25f, -0.0f, 1e-42f, 3.0f};
  const std::vector<std::int32_t> ids = {5, -6};
  const fs::path ours = temp_dir() / "ours.safetensors";
  io::write_safetensors(ours.string(),
                        {io::TensorRef::f32("w", {2, 2}, w),
                         {"ids", io::DType::I32, {2}, {reinterpret_cast<const std::uint8_t*>(ids.data()), 8}}},
                        {{"format", "pt"}});
  int st = 0;
  const std::string out = run_command("python3 " + script + " read " + ours.string(), &st);
  ASSERT_EQ(st, 0) << out;
  auto bitsum = [](const void* p, std::size_t n) {
    std::uint64_t s = 0;
    for (std::size_t i = 0; i < n; ++i) s += static_cast<const std::uint8_t*>(p)[i];
    return s;
  };
  EXPECT_NE(out.find("ids int32 [2] " + std::to_string(bitsum(ids.data(), 8))), std::string::npos) << out;
  EXPECT_NE(out.find("w float32 [2, 2] " + std::to_string(bitsum(w.data(), 16))), std::string::npos) << out;
  // HF writes, lockstep reads.
  const fs::path theirs = temp_dir() / "theirs.safetensors";
  const std::string out2 = run_command("python3 " + script + " write " + theirs.string(), &st);
  ASSERT_EQ(st, 0) << out2;
  const auto f = io::SafetensorsFile::read(theirs.string());
  EXPECT_EQ(f.metadata().at("format"), "pt");
  const std::vector<std::int64_t> shape = {3, 4};
  const auto wv = f.f32("w", &shape);
  for (int i = 0; i < 12; ++i) EXPECT_EQ(wv[static_cast<std::size_t>(i)], (static_cast<float>(i) - 5.5f) / 3.0f);
  const auto nz = f.f32("neg_zero");
  EXPECT_TRUE(std::signbit(nz[0]));
  EXPECT_FALSE(std::signbit(nz[1]));
}
