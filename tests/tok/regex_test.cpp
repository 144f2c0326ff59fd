// The general regex pre-tokenizer (tok/regex_split.hpp, PCRE2): the same
// pieces as the hand-written matchers for their regexes, tiling on any bytes,
// Oniguruma's empty-match and word-boundary rules, the Unicode rewrite, and
// clear refusals. Its agreement with Hugging Face tokenizers for every named
// pre-tokenizer is tests/tok/hf_crosscheck_test.cpp.
#include <gtest/gtest.h>

#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "lockstep/tok/pretokenize.hpp"
#include "lockstep/tok/regex_split.hpp"
#include "lockstep/tok/unicode.hpp"
#include "testdata.hpp"

namespace {

using namespace lockstep::tok;

#if defined(__SANITIZE_ADDRESS__)
constexpr int kCases = 400;
#else
constexpr int kCases = 4000;
#endif

std::vector<std::string> split(const RegexSplitter& s, std::string_view text) {
  std::vector<std::string_view> v;
  s.split(text, v);
  return {v.begin(), v.end()};
}

// Valid UTF-8 of the kinds the regexes care about, random code points included.
std::string random_text(std::mt19937& rng) {
  static const char* const units[] = {"a", "Z", "the", " ", "  ", "\n", "\r\n", "\t", "'s", "'LL", "'ſ", "1", "234",
                                      "5678", "!", "...", "é", "ß", "Привет", "世界", "١٢٣", "Ⅻ", "½", "😀", "\xC2\xA0",
                                      "\xE3\x80\x80", "\u0301", "\u200d", "_", "/"};
  std::string s;
  const int n = static_cast<int>(rng() % 30);
  for (int k = 0; k < n; ++k) {
    if (rng() % 6 == 0) {
      std::uint32_t cp = rng() % 0x110000;
      if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0x41;
      unicode::append_utf8(cp, s);
    } else {
      s += units[rng() % std::size(units)];
    }
  }
  return s;
}

TEST(TokRegex, Pcre2PathEqualsTheHandWrittenMatchers) {
  LOCKSTEP_REQUIRE_PCRE2();
  std::mt19937 rng(4242);
  for (const PreTokenizer p : {PreTokenizer::kGpt2, PreTokenizer::kCl100k}) {
    const RegexSplitter splitter({std::string(pre_tokenizer_regex(p))});
    int bad = 0;
    for (int k = 0; k < kCases; ++k) {
      const std::string text = random_text(rng);
      std::vector<std::string_view> hand;
      pre_tokenize(p, text, hand);
      if (split(splitter, text) != std::vector<std::string>(hand.begin(), hand.end()) && ++bad <= 3) {
        ADD_FAILURE() << pre_tokenizer_name(p) << ": differ on \"" << unicode::escape_bytes(text) << "\"";
      }
    }
    std::printf("PCRE2 vs hand-written %s: %d random texts, %d differ\n", std::string(pre_tokenizer_name(p)).c_str(),
                kCases, bad);
    EXPECT_EQ(bad, 0);
  }
}

// Every named pre-tokenizer's pieces tile any byte string, none empty.
TEST(TokRegex, EveryNamedPreTokenizerTilesRandomBytes) {
  LOCKSTEP_REQUIRE_PCRE2();
  std::mt19937 rng(7);
  int names = 0;
  for (const std::string& name : pre_tokenizer_names()) {
    const NamedPreTokenizer spec = *pre_tokenizer_by_name(name);
    if (spec.regexes.empty()) continue;
    ++names;
    const RegexSplitter splitter(spec.regexes);
    for (int k = 0; k < kCases / 20; ++k) {
      std::string text = random_text(rng);
      if (k % 2) {
        for (int j = 0; j < 8; ++j) text.insert(rng() % (text.size() + 1), 1, static_cast<char>(rng() % 256));
      }
      std::string joined;
      bool empty_piece = false;
      for (const std::string& piece : split(splitter, text)) joined += piece, empty_piece |= piece.empty();
      ASSERT_EQ(joined, text) << name;
      ASSERT_FALSE(empty_piece) << name;
    }
  }
  EXPECT_GT(names, 20);
}

TEST(TokRegex, KnownAnswers) {
  LOCKSTEP_REQUIRE_PCRE2();
  using V = std::vector<std::string>;
  // Lookahead-only matches are cut points; an empty match where the last one
  // ended is skipped (Oniguruma's iterator): SuperBPE's groups of three.
  const RegexSplitter superbpe(pre_tokenizer_by_name("superbpe")->regexes);
  EXPECT_EQ(split(superbpe, "x1234567 12"), (V{"x", "1", "234", "567", " ", "12"}));
  // \b over Oniguruma's word characters: a combining mark after the digits
  // is a word character, so no boundary follows them and tiny_aya's digit
  // regex does not match; o200k's \p{N}{1,3} splits them from the left.
  const RegexSplitter aya(pre_tokenizer_by_name("tiny_aya")->regexes);
  EXPECT_EQ(split(aya, "1234567"), (V{"1", "234", "567"}));
  EXPECT_EQ(split(aya, "1234567\u0301"), (V{"123", "456", "7", "\u0301"}));
  // Invalid UTF-8 bytes are pieces of their own.
  const RegexSplitter gpt2({std::string(pre_tokenizer_regex(PreTokenizer::kGpt2))});
  EXPECT_EQ(split(gpt2, "ab\xFF" "cd \xC3"), (V{"ab", "\xFF", "cd", " ", "\xC3"}));
  EXPECT_EQ(split(gpt2, ""), V{});
  // A Sequence: each regex cuts the pieces of the one before.
  const RegexSplitter seq({R"(\p{N})", std::string(pre_tokenizer_regex(PreTokenizer::kGpt2))});
  EXPECT_EQ(split(seq, "ab 123 cd"), (V{"ab", " ", "1", "2", "3", " cd"}));
}

TEST(TokRegex, UnicodeClassesAreSpelledOut) {
  const std::string p = pcre2_pattern_for(R"([^\s\p{L}]+|\p{Lu}\P{N}\d\S\w\b\p{Han}\\p{L}\Q\p{L}\E)");
  EXPECT_EQ(p.find("\\p{L}]"), std::string::npos);
  EXPECT_NE(p.find("\\x{41}-\\x{5A}"), std::string::npos);  // A-Z among the letters
  EXPECT_NE(p.find("\\p{Han}"), std::string::npos);         // a script: PCRE2's own
  EXPECT_NE(p.find("\\\\p{L}"), std::string::npos);         // an escaped backslash stays text
  EXPECT_NE(p.find("\\Q\\p{L}\\E"), std::string::npos);     // quoted text stays
  EXPECT_EQ(p.find("\\x{D800}"), std::string::npos);        // no surrogates
  // A code point assigned in Unicode 15/16 (PCRE2 10.42 has 14): a letter.
  LOCKSTEP_REQUIRE_PCRE2();
  const RegexSplitter letters({R"(\p{L}+)"});
  EXPECT_EQ(split(letters, "a\U0003134Ab"), std::vector<std::string>{"a\U0003134Ab"});  // CJK Ext. H (15.0)
}

TEST(TokRegex, BadPatternsAreRefusedClearly) {
  LOCKSTEP_REQUIRE_PCRE2();
  const auto message = [](std::vector<std::string> p) -> std::string {
    try {
      RegexSplitter s(std::move(p));
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "";
  };
  const std::string unclosed = message({"(ab\x01"});
  EXPECT_NE(unclosed.find("regex '(ab\\x01' does not compile (PCRE2: "), std::string::npos) << unclosed;
  EXPECT_NE(message({R"(\p{L)"}).find("without a closing }"), std::string::npos);
  EXPECT_NE(message({"\xFF"}).find("does not compile"), std::string::npos);  // not UTF-8
  EXPECT_NE(message({}).find("at least one pattern"), std::string::npos);
}

TEST(TokRegex, EscapeBytes) {
  EXPECT_EQ(unicode::escape_bytes("ab"), "ab");
  EXPECT_EQ(unicode::escape_bytes(std::string("a\0b", 3)), "a\\x00b");
  EXPECT_EQ(unicode::escape_bytes("\x7F\xFF\\é\xC2\x85"), "\\x7f\\xff\\\\é\\xc2\\x85");
  EXPECT_EQ(unicode::escape_bytes(std::string(300, 'x'), 10), std::string(10, 'x') + "...");
}

}  // namespace
