// Code points and their classes, as the pre-tokenizer regexes see them.
//
// The regexes of GPT-2 and cl100k/LLaMA-3 need three classes: letters
// (\p{L}), numbers (\p{N}) and white space (\s). Everything else is kOther.
// The tables are generated from Unicode data by scripts/gen_unicode_tables.py
// (unicode_tables.cpp says which Unicode version).
//
// Input text is arbitrary bytes. A byte that does not start a well-formed
// UTF-8 sequence (stray continuation byte, overlong form, surrogate, value
// above U+10FFFF, truncated sequence) is one "code point" of its own, of class
// kOther, one byte long. Well-formed text is decoded exactly as a regex engine
// over UTF-8 would.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace lockstep::tok::unicode {

enum CpClass : std::uint8_t { kOther = 0, kLetter = 1, kNumber = 2, kSpace = 3 };

struct CpRange {
  std::uint32_t lo, hi;
  std::uint8_t cls;
};

extern const char* const kUnicodeVersion;  // of the generated tables, e.g. "14.0.0"
extern const CpRange kCpRanges[];          // sorted, disjoint; classes != kOther
extern const std::size_t kCpRangeCount;

// Marks an invalid byte in Cp::cp (no code point has this value).
inline constexpr std::uint32_t kInvalid = 0xFFFFFFFFu;

struct Cp {
  std::uint32_t cp;   // the code point, or kInvalid for a lone invalid byte
  std::uint8_t len;   // bytes it occupies (1..4)
  std::uint8_t cls;   // CpClass
};

// The class of a code point (binary search over kCpRanges; ASCII by table).
CpClass class_of(std::uint32_t cp);

// Decodes the code point starting at byte offset i of s (i < s.size()).
Cp decode_at(std::string_view s, std::size_t i);

// Appends the UTF-8 encoding of cp (cp <= 0x10FFFF, not a surrogate).
void append_utf8(std::uint32_t cp, std::string& out);

}  // namespace lockstep::tok::unicode
