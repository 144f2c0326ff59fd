// The hand-written pre-tokenizers on cases worked out from their regexes
// (each expected split is what the regex engines of tiktoken and HF
// tokenizers give; the random-text agreement with HF is in hf_crosscheck_test).
#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "lockstep/tok/pretokenize.hpp"

namespace {

using lockstep::tok::PreTokenizer;

std::vector<std::string> split(PreTokenizer p, std::string_view text) {
  std::vector<std::string_view> v;
  lockstep::tok::pre_tokenize(p, text, v);
  return {v.begin(), v.end()};
}

struct Case {
  const char* text;
  std::vector<std::string> want;
};

void run(PreTokenizer p, const std::vector<Case>& cases) {
  int bad = 0;
  for (const Case& c : cases) {
    const auto got = split(p, c.text);
    if (got != c.want) {
      ++bad;
      std::string g;
      for (const auto& s : got) g += "[" + s + "]";
      ADD_FAILURE() << "text \"" << c.text << "\" split as " << g;
    }
  }
  std::printf("%s: %zu cases, %d mismatches\n", std::string(lockstep::tok::pre_tokenizer_name(p)).c_str(),
              cases.size(), bad);
}

TEST(TokPretokenize, Gpt2) {
  run(PreTokenizer::kGpt2,
      {
          {"", {}},
          {"Hello world", {"Hello", " world"}},
          {"Hello  world", {"Hello", " ", " world"}},
          {"a   b", {"a", "  ", " b"}},
          {"a\t\tb", {"a", "\t", "\t", "b"}},
          {"end   ", {"end", "   "}},
          {"I'm don't we'll THEY'RE", {"I", "'m", " don", "'t", " we", "'ll", " THEY", "'", "RE"}},
          {"'see", {"'s", "ee"}},
          {"abc123 4x", {"abc", "123", " 4", "x"}},
          {"!!! ?? a", {"!!!", " ??", " a"}},
          {" \n a", {" \n", " a"}},
          {"\n\n\nx", {"\n\n", "\n", "x"}},
          {"Привет, мир", {"Привет", ",", " мир"}},
          {"1½", {"1½"}},
          {"x😀😀 y", {"x", "😀😀", " y"}},
          {"\xC2\xA0word", {"\xC2\xA0", "word"}},
          {"a\xFF\xFE b", {"a", "\xFF\xFE", " b"}},
      });
}

TEST(TokPretokenize, Cl100k) {
  run(PreTokenizer::kCl100k,
      {
          {"", {}},
          {"Hello world", {"Hello", " world"}},
          {"I'm DON'T we'LL", {"I", "'m", " DON", "'T", " we", "'LL"}},
          {"x'ſa", {"x", "'ſ", "a"}},  // U+017F folds to s: a contraction
          {"12345678", {"123", "456", "78"}},
          {"abc123", {"abc", "123"}},
          {"\tabc", {"\tabc"}},
          {"$abc", {"$abc"}},
          {"\nabc", {"\n", "abc"}},
          {"a  b", {"a", " ", " b"}},
          {"a ...\n\nb", {"a", " ...\n\n", "b"}},
          {"x  \n  y", {"x", "  \n", " ", " y"}},
          {"x\n\n  \n", {"x", "\n\n  \n"}},
          {"end  ", {"end", "  "}},
          {"!!!x", {"!!!", "x"}},  // the letter alternative fails at the first "!"; the punctuation run wins
          {"a?!", {"a", "?!"}},
          {"1½ x", {"1½", " x"}},
          {"日本語テキスト", {"日本語テキスト"}},
          {"😀😀\r\n", {"😀😀\r\n"}},
      });
}

// Every matcher's pieces tile the input exactly, on random bytes too.
TEST(TokPretokenize, PiecesTileRandomBytes) {
  std::mt19937 rng(5);
  std::uint64_t pieces = 0;
  int bad = 0;
  for (int k = 0; k < 2000; ++k) {
    std::string s(rng() % 100, '\0');
    for (char& c : s) c = static_cast<char>(rng() % 3 ? " a1'\n\t.\xC3\xA9"[rng() % 10] : rng() % 256);
    for (const PreTokenizer p : {PreTokenizer::kGpt2, PreTokenizer::kCl100k}) {
      std::string joined;
      for (const auto& piece : split(p, s)) {
        bad += piece.empty();
        joined += piece;
        ++pieces;
      }
      bad += joined != s;
    }
  }
  std::printf("tiling: 4000 random inputs, %llu pieces, %d mismatches\n", static_cast<unsigned long long>(pieces), bad);
  EXPECT_EQ(bad, 0);
}

TEST(TokPretokenize, RegexNamesRoundTrip) {
  for (const PreTokenizer p : {PreTokenizer::kGpt2, PreTokenizer::kCl100k}) {
    PreTokenizer q{};
    ASSERT_TRUE(lockstep::tok::pre_tokenizer_from_regex(lockstep::tok::pre_tokenizer_regex(p), q));
    EXPECT_EQ(p, q);
  }
  PreTokenizer q{};
  EXPECT_FALSE(lockstep::tok::pre_tokenizer_from_regex("\\w+", q));
}

}  // namespace
