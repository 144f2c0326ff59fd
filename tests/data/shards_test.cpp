// Token shards: round trip, validation of every header field, and batches that
// are pure functions of (seed, step).
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "lockstep/data/shards.hpp"

namespace d = lockstep::data;
namespace fs = std::filesystem;

namespace {
fs::path tmp(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("lockstep_shards_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return dir / name;
}

std::vector<char> slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

void spit(const fs::path& p, const std::vector<char>& b) {
  std::ofstream f(p, std::ios::binary);
  f.write(b.data(), static_cast<std::streamsize>(b.size()));
}

std::string open_error(const fs::path& p) {
  try {
    d::Shard s(p.string());
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(Shards, RoundTripTwoAndFourByteTokens) {
  for (std::uint64_t vocab : {300ull, 100000ull}) {
    const std::vector<std::vector<std::int32_t>> docs = {{1, 2, 3}, {}, {static_cast<std::int32_t>(vocab - 1), 0}};
    const auto p = tmp("rt.tokens");
    d::write_shard(p.string(), docs, vocab, 0xabcdef);
    d::Shard s(p.string());
    EXPECT_EQ(s.header().token_bytes, vocab <= 65536 ? 2u : 4u);
    EXPECT_EQ(s.size(), 5u);
    EXPECT_EQ(s.header().n_documents, 3u);
    EXPECT_EQ(s.header().tokenizer_fingerprint, 0xabcdefu);
    EXPECT_EQ(s.document_start(2), 3u);
    std::vector<std::int32_t> all(5);
    s.read(0, 5, all.data());
    EXPECT_EQ(all, (std::vector<std::int32_t>{1, 2, 3, static_cast<std::int32_t>(vocab - 1), 0}));
    EXPECT_THROW(s.read(3, 3, all.data()), std::out_of_range);
  }
  EXPECT_THROW(d::write_shard(tmp("bad.tokens").string(), {{5, 300}}, 300), std::invalid_argument);
  EXPECT_FALSE(fs::exists(tmp("bad.tokens")));  // nothing half-written
}

TEST(Shards, RefusesDamagedFilesNamingTheField) {
  const auto p = tmp("good.tokens");
  d::write_shard(p.string(), {{1, 2, 3, 4}, {5, 6}}, 300);
  const auto good = slurp(p);
  const auto q = tmp("damaged.tokens");
  for (std::size_t cut : {0ul, 10ul, 63ul, 64ul, 71ul, good.size() - 1}) {
    spit(q, {good.begin(), good.begin() + static_cast<std::ptrdiff_t>(cut)});
    EXPECT_NE(open_error(q), "") << "truncated at " << cut;
  }
  auto bad = good;
  bad[0] = 'X';
  spit(q, bad);
  EXPECT_NE(open_error(q).find("bad magic"), std::string::npos);
  bad = good;
  bad[12] = 3;
  spit(q, bad);
  EXPECT_NE(open_error(q).find("bytes per token"), std::string::npos);
  bad = good;
  bad[16] = 0;
  bad[17] = 0;
  bad[18] = 2;  // vocab 131072 with 2-byte tokens
  spit(q, bad);
  EXPECT_NE(open_error(q).find("does not fit"), std::string::npos);
  bad = good;
  bad[64 + 8] = 9;  // second document starts past the 6 tokens
  spit(q, bad);
  EXPECT_NE(open_error(q).find("document 1"), std::string::npos);
  bad = good;
  bad[24] = 7;  // token count disagrees with the file size
  spit(q, bad);
  EXPECT_NE(open_error(q).find("does not match"), std::string::npos);
  bad = good;
  bad[64 + 16] = 0x2c;  // token 0 := 300 + ... out of the vocabulary
  bad[64 + 17] = 0x01;
  spit(q, bad);
  d::Shard s(q.string());
  EXPECT_THROW(s.token(0), std::runtime_error);
}

TEST(Shards, BatchesArePureFunctionsOfSeedAndStep) {
  std::vector<std::int32_t> doc(10000);
  for (std::size_t i = 0; i < doc.size(); ++i) doc[i] = static_cast<std::int32_t>(i % 251);
  const auto p = tmp("batch.tokens");
  d::write_shard(p.string(), {doc}, 256);
  d::Shard s(p.string());
  const auto a = d::sample_batch(s, 42, 7, 4, 16);
  const auto b = d::sample_batch(s, 42, 7, 4, 16);
  EXPECT_EQ(a.inputs, b.inputs);
  EXPECT_NE(a.inputs, d::sample_batch(s, 42, 8, 4, 16).inputs);
  EXPECT_NE(a.inputs, d::sample_batch(s, 43, 7, 4, 16).inputs);
  for (std::size_t i = 0; i < a.inputs.size(); ++i)  // targets are the next token
    EXPECT_EQ(a.targets[i], (a.inputs[i] + 1) % 251) << i;
  // Starts spread over the whole shard, never past the end.
  std::set<std::int32_t> firsts;
  for (std::uint64_t step = 0; step < 2000; ++step) firsts.insert(d::sample_batch(s, 1, step, 1, 16).inputs[0]);
  EXPECT_GE(firsts.size(), 245u);  // of 251 possible values (uniform: about 251 expected)
  const auto seq = d::sequential_batch(s, 0, 2, 16);
  EXPECT_EQ(seq.inputs[0], 0);
  EXPECT_EQ(seq.inputs[16], 16);
  EXPECT_THROW(d::sample_batch(s, 1, 1, 1, 10000), std::invalid_argument);
}
