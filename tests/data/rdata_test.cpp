// The R data reader behind the embedded corpus: a synthetic serialization
// written here byte by byte, malformed inputs refused with a message naming
// the offset, and (when scripts/setup.sh has fetched it) the real package file.
#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdint>
#include <filesystem>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "lockstep/data/rdata.hpp"

using lockstep::data::parse_r_character_vector;
using lockstep::data::parse_rdb;

namespace {

void put32(std::vector<std::uint8_t>& b, std::int32_t v) {
  const auto u = static_cast<std::uint32_t>(v);
  for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<std::uint8_t>(u >> s));
}

// An R (version 3) XDR serialization of c(strings...), NA where `na[i]`.
std::vector<std::uint8_t> serialize(const std::vector<std::string>& strings,
                                    const std::vector<bool>& na = {}) {
  std::vector<std::uint8_t> b = {'X', '\n'};
  put32(b, 3);
  put32(b, 0x040201);
  put32(b, 0x030500);
  put32(b, 5);
  for (char c : std::string("UTF-8")) b.push_back(static_cast<std::uint8_t>(c));
  put32(b, 16);  // STRSXP
  put32(b, static_cast<std::int32_t>(strings.size()));
  for (std::size_t i = 0; i < strings.size(); ++i) {
    put32(b, 0x00040009);  // CHARSXP, UTF-8 flag
    if (i < na.size() && na[i]) {
      put32(b, -1);
      continue;
    }
    put32(b, static_cast<std::int32_t>(strings[i].size()));
    for (char c : strings[i]) b.push_back(static_cast<std::uint8_t>(c));
  }
  return b;
}

// One .rdb blob: big-endian uncompressed length, then the zlib stream.
void append_blob(std::vector<std::uint8_t>& rdb, const std::vector<std::uint8_t>& data) {
  uLongf n = compressBound(static_cast<uLong>(data.size()));
  std::vector<std::uint8_t> z(n);
  ASSERT_EQ(compress(z.data(), &n, data.data(), static_cast<uLong>(data.size())), Z_OK);
  put32(rdb, static_cast<std::int32_t>(data.size()));
  rdb.insert(rdb.end(), z.begin(), z.begin() + static_cast<std::ptrdiff_t>(n));
}

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(RData, ParsesACharacterVectorWithNaAndUtf8) {
  const auto v = parse_r_character_vector(serialize({"It is a truth", "", "caf\xc3\xa9", "x"},
                                                    {false, false, false, true}));
  ASSERT_EQ(v.size(), 4u);
  EXPECT_EQ(v[0], "It is a truth");
  EXPECT_EQ(v[1], "");
  EXPECT_EQ(v[2], "caf\xc3\xa9");
  EXPECT_EQ(v[3], "");  // NA
}

TEST(RData, ParsesSeveralBlobs) {
  std::vector<std::uint8_t> rdb;
  append_blob(rdb, serialize({"a", "bc"}));
  append_blob(rdb, serialize({"def"}));
  const auto books = parse_rdb(rdb);
  ASSERT_EQ(books.size(), 2u);
  EXPECT_EQ(books[0], (std::vector<std::string>{"a", "bc"}));
  EXPECT_EQ(books[1], (std::vector<std::string>{"def"}));
}

TEST(RData, RefusesMalformedInputNamingTheOffset) {
  auto good = serialize({"hello", "world"});
  // Truncated anywhere: an error, never a crash or a short vector.
  for (std::size_t cut = 0; cut < good.size(); ++cut) {
    std::vector<std::uint8_t> t(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(cut));
    EXPECT_NE(error_of([&] { parse_r_character_vector(t, "t"); }), "") << "cut at " << cut;
  }
  auto wrong_type = good;
  wrong_type[26] = 14;  // REALSXP instead of STRSXP (the low byte of the flags word)
  EXPECT_NE(error_of([&] { parse_r_character_vector(wrong_type, "t"); }).find("type 14"),
            std::string::npos);
  auto huge = good;
  huge[27] = 0x7f;  // the length word becomes about 2^31
  EXPECT_NE(error_of([&] { parse_r_character_vector(huge, "t"); }).find("exceeds"), std::string::npos);
  EXPECT_NE(error_of([&] { parse_r_character_vector(std::vector<std::uint8_t>{'A', '\n'}, "t"); })
                .find("at byte"),
            std::string::npos);

  std::vector<std::uint8_t> rdb;
  append_blob(rdb, good);
  rdb[rdb.size() / 2] ^= 0xff;  // corrupt the zlib stream
  EXPECT_NE(error_of([&] { parse_rdb(rdb, "r"); }), "");
  std::vector<std::uint8_t> short_header = {0, 0};
  EXPECT_NE(error_of([&] { parse_rdb(short_header, "r"); }).find("truncated"), std::string::npos);
}

TEST(RData, ReadsJaneAustenFromTheDebianPackage) {
  const std::string path = std::string(LOCKSTEP_SOURCE_DIR) + "/data/janeaustenr/Rdata.rdb";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " absent: run scripts/setup.sh";
  const auto books = lockstep::data::read_rdb(path);
  ASSERT_EQ(books.size(), 6u);
  std::size_t lines = 0, bytes = 0;
  bool pride = false;
  for (const auto& b : books) {
    lines += b.size();
    for (const auto& l : b) {
      bytes += l.size() + 1;
      if (l.find("It is a truth universally acknowledged") != std::string::npos) pride = true;
    }
  }
  std::printf("janeaustenr: %zu books, %zu lines, %zu bytes of text\n", books.size(), lines, bytes);
  EXPECT_GT(bytes, 4'000'000u);
  EXPECT_TRUE(pride) << "Pride and Prejudice's first sentence not found";
}
