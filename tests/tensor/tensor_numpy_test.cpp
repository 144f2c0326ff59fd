// lockstep's f32 <-> f16/bf16 conversions against numpy's float16 and
// ml_dtypes' bfloat16 (convert_cross_check.py): every 16-bit pattern widened,
// every tie between neighbouring 16-bit values and its two binary32
// neighbours, the edge cases, and 2·10^6 random binary32 values narrowed.
// Skips when python3 with numpy and ml_dtypes is absent (scripts/setup.sh
// installs tests/requirements.txt).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "lockstep/ad/rng.hpp"
#include "lockstep/num/fp.hpp"
#include "lockstep/tensor/convert.hpp"

#include "../common/run_command.hpp"
#include "../common/test_seed.hpp"

namespace t = lockstep::tensor;
namespace fs = std::filesystem;
using lockstep::num::float_of;

namespace {

template <class T>
void write_raw(const fs::path& path, const std::vector<T>& v) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(T)));
  ASSERT_TRUE(f.good()) << path;
}

// The binary32 inputs: ties and their neighbours, edge cases, random values.
std::vector<std::uint32_t> inputs(std::uint64_t seed) {
  std::vector<std::uint32_t> x;
  for (std::uint32_t sign : {0u, 0x80000000u}) {
    for (std::uint32_t m = 0; m < 0x7f80u; ++m) {  // bf16 midpoints
      const std::uint32_t mid = sign | (m << 16) | 0x8000u;
      x.insert(x.end(), {mid - 1, mid, mid + 1});
    }
    for (std::uint32_t h = 0; h < 0x7c00u; ++h) {  // f16 midpoints: exact in f32 (12 significant bits)
      const float lo = t::f16_to_f32(static_cast<std::uint16_t>(h));
      const float hi = h + 1 == 0x7c00u ? 65536.0f : t::f16_to_f32(static_cast<std::uint16_t>(h + 1));
      const std::uint32_t mid = sign | lockstep::num::bits_of((lo + hi) / 2);
      x.insert(x.end(), {mid - 1, mid, mid + 1});
    }
  }
  for (std::uint32_t e : {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00000u, 0x7f800001u,
                          0xff800001u, 0x7fffffffu, 0x00000001u, 0x007fffffu, 0x00800000u, 0x7f7fffffu, 0x477fe000u,
                          0x477ff000u, 0x477fefffu, 0x33000000u, 0x33000001u, 0x38800000u, 0x387fffffu})
    x.push_back(e);
  lockstep::ad::Rng rng(lockstep::ad::derive_seed(seed, "TensorNumpy.Random", 0));
  for (int i = 0; i < 1'000'000; ++i) x.push_back(static_cast<std::uint32_t>(rng.next()));
  for (int i = 0; i < 1'000'000; ++i) {
    const std::uint64_t r = rng.next();
    const std::uint32_t exponent = 100 + static_cast<std::uint32_t>((r >> 32) % 45);
    x.push_back((static_cast<std::uint32_t>(r >> 63) << 31) | (exponent << 23) |
                (static_cast<std::uint32_t>(r) & 0x7fffffu));
  }
  return x;
}

}  // namespace

TEST(TensorNumpy, ConversionsAgreeWithNumpyAndMlDtypes) {
  int st = 0;
  lockstep::test::run_command("python3 -c 'import numpy, ml_dtypes'", &st);
  if (st != 0) GTEST_SKIP() << "python3 numpy/ml_dtypes absent (scripts/setup.sh installs tests/requirements.txt)";

  const std::uint64_t seed = lockstep::test::test_seed();
  const fs::path dir = fs::temp_directory_path() / ("lockstep_tensor_np_" + std::to_string(::getpid()));
  fs::create_directories(dir);

  const std::vector<std::uint32_t> x = inputs(seed);
  std::vector<std::uint16_t> f16(x.size()), bf16(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    f16[i] = t::f16_from_f32_bits(x[i]);
    bf16[i] = t::bf16_from_f32_bits(x[i]);
  }
  std::vector<std::uint32_t> f16_wide(65536), bf16_wide(65536);
  for (std::uint32_t h = 0; h < 65536; ++h) {
    f16_wide[h] = t::f32_bits_from_f16(static_cast<std::uint16_t>(h));
    bf16_wide[h] = t::f32_bits_from_bf16(static_cast<std::uint16_t>(h));
  }
  write_raw(dir / "in.f32", x);
  write_raw(dir / "f16.u16", f16);
  write_raw(dir / "bf16.u16", bf16);
  write_raw(dir / "f16_wide.f32", f16_wide);
  write_raw(dir / "bf16_wide.f32", bf16_wide);

  const std::string script = std::string(LOCKSTEP_TEST_DIR) + "/convert_cross_check.py";
  const std::string out = lockstep::test::run_command("python3 " + script + " " + dir.string(), &st);
  std::printf("%s", out.c_str());
  EXPECT_EQ(st, 0) << out;
  EXPECT_NE(out.find("f32->f16 (numpy.float16) " + std::to_string(x.size()) + " cases 0 mismatches"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("f32->bf16 (ml_dtypes.bfloat16) " + std::to_string(x.size()) + " cases 0 mismatches"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("f16->f32 (numpy.float16) 65536 cases 0 mismatches"), std::string::npos) << out;
  EXPECT_NE(out.find("bf16->f32 (ml_dtypes.bfloat16) 65536 cases 0 mismatches"), std::string::npos) << out;

  // The comparison can fail: one f16 and one bf16 result off by an ulp are both reported.
  f16[1000] = static_cast<std::uint16_t>(f16[1000] ^ 1u);
  bf16[2000] = static_cast<std::uint16_t>(bf16[2000] ^ 1u);
  write_raw(dir / "f16.u16", f16);
  write_raw(dir / "bf16.u16", bf16);
  const std::string bad = lockstep::test::run_command("python3 " + script + " " + dir.string(), &st);
  EXPECT_EQ(st, 1) << bad;
  EXPECT_NE(bad.find("f32->f16 (numpy.float16) " + std::to_string(x.size()) + " cases 1 mismatches"),
            std::string::npos)
      << bad;
  EXPECT_NE(bad.find("f32->bf16 (ml_dtypes.bfloat16) " + std::to_string(x.size()) + " cases 1 mismatches"),
            std::string::npos)
      << bad;
  fs::remove_all(dir);
}
