// The code-point tables and the UTF-8 decoder the pre-tokenizers stand on.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "lockstep/tok/unicode.hpp"

namespace u = lockstep::tok::unicode;

TEST(TokUnicode, TablesAreSortedDisjointAndVersioned) {
  EXPECT_STREQ(u::kUnicodeVersion, "16.0.0");  // HF tokenizers 0.23 (Oniguruma 6.9.10); regenerate with scripts/gen_unicode_tables.py
  ASSERT_GT(u::kCpRangeCount, 500u);
  for (std::size_t i = 0; i < u::kCpRangeCount; ++i) {
    EXPECT_LE(u::kCpRanges[i].lo, u::kCpRanges[i].hi);
    EXPECT_GE(u::kCpRanges[i].cls, 1);
    EXPECT_LE(u::kCpRanges[i].cls, 3);
    if (i > 0) {
      EXPECT_LT(u::kCpRanges[i - 1].hi, u::kCpRanges[i].lo) << i;
    }
  }
  std::printf("unicode %s: %zu ranges\n", u::kUnicodeVersion, u::kCpRangeCount);
}

TEST(TokUnicode, KnownClasses) {
  struct Case {
    std::uint32_t cp;
    u::CpClass cls;
  };
  const Case cases[] = {
      {'a', u::kLetter},    {'Z', u::kLetter},     {'0', u::kNumber},      {'9', u::kNumber},
      {' ', u::kSpace},     {'\t', u::kSpace},     {'\n', u::kSpace},      {'\r', u::kSpace},
      {0x0B, u::kSpace},    {0x0C, u::kSpace},     {0x1C, u::kOther},      {0x85, u::kSpace},
      {0xA0, u::kSpace},    {0x1680, u::kSpace},   {0x2007, u::kSpace},    {0x200B, u::kOther},
      {0x2028, u::kSpace},  {0x3000, u::kSpace},   {'\'', u::kOther},      {'!', u::kOther},
      {0xAA, u::kLetter},   {0xB2, u::kNumber},    {0xBD, u::kNumber},     {0xE9, u::kLetter},
      {0x0660, u::kNumber}, {0x0905, u::kLetter},  {0x0903, u::kOther},    {0x2165, u::kNumber},
      {0x4E16, u::kLetter}, {0xAC00, u::kLetter},  {0x1F600, u::kOther},   {0x1F1EA, u::kOther},
      {0x0378, u::kOther},  {0x20000, u::kLetter}, {0x10FFFF, u::kOther},  {0x017F, u::kLetter},
      {0x0300, u::kOther},  {0x3007, u::kNumber},  {0xFF10, u::kNumber},   {0x02C6, u::kLetter},
  };
  int bad = 0;
  for (const Case& c : cases) {
    if (u::class_of(c.cp) != c.cls) {
      ++bad;
      ADD_FAILURE() << std::hex << "U+" << c.cp << " class " << int(u::class_of(c.cp)) << " want " << int(c.cls);
    }
  }
  std::printf("known classes: %zu cases, %d mismatches\n", std::size(cases), bad);
}

// Every scalar value round-trips through append_utf8 / decode_at; surrogates,
// overlong forms, stray and truncated bytes decode as single invalid bytes.
TEST(TokUnicode, Utf8DecodeExhaustive) {
  std::uint64_t checked = 0, bad = 0;
  for (std::uint32_t cp = 0; cp <= 0x10FFFF; ++cp) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    std::string s;
    u::append_utf8(cp, s);
    const u::Cp c = u::decode_at(s, 0);
    ++checked;
    if (c.cp != cp || c.len != s.size() || c.cls != u::class_of(cp)) ++bad;
    // Truncated: every proper prefix of a multi-byte sequence is invalid.
    for (std::size_t n = 1; n < s.size(); ++n) {
      const u::Cp t = u::decode_at(std::string_view(s).substr(0, n), 0);
      if (t.cp != u::kInvalid || t.len != 1) ++bad;
    }
  }
  const std::string invalid[] = {"\x80", "\xBF", "\xC0\x80", "\xC1\xBF", "\xE0\x80\x80", "\xE0\x9F\xBF",
                                 "\xED\xA0\x80", "\xED\xBF\xBF", "\xF0\x80\x80\x80", "\xF0\x8F\xBF\xBF",
                                 "\xF4\x90\x80\x80", "\xF5\x80\x80\x80", "\xFF", "\xFE", "\xC3\x28"};
  for (const std::string& s : invalid) {
    const u::Cp c = u::decode_at(s, 0);
    ++checked;
    if (c.cp != u::kInvalid || c.len != 1 || c.cls != u::kOther) {
      ++bad;
      ADD_FAILURE() << "accepted an invalid sequence of " << s.size() << " bytes";
    }
  }
  std::printf("utf8: %llu sequences checked, %llu mismatches\n", static_cast<unsigned long long>(checked),
              static_cast<unsigned long long>(bad));
  EXPECT_EQ(bad, 0u);
}
