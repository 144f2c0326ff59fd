#include "lockstep/tok/unicode.hpp"

#include <array>
#include <string>

namespace lockstep::tok::unicode {

namespace {

// The slow path: which generated range holds cp (binary search).
CpClass class_by_search(std::uint32_t cp) {
  std::size_t lo = 0, hi = kCpRangeCount;
  while (lo < hi) {
    const std::size_t mid = lo + (hi - lo) / 2;
    if (kCpRanges[mid].hi < cp) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  if (lo < kCpRangeCount && kCpRanges[lo].lo <= cp) return static_cast<CpClass>(kCpRanges[lo].cls);
  return kOther;
}

// The first 2048 code points (ASCII, Latin, Greek, Cyrillic, ...) by table:
// they are most of the text these tokenizers see.
constexpr std::uint32_t kTableSize = 0x800;
const std::array<std::uint8_t, kTableSize>& small_table() {
  static const std::array<std::uint8_t, kTableSize> t = [] {
    std::array<std::uint8_t, kTableSize> a{};
    for (std::uint32_t c = 0; c < kTableSize; ++c) a[c] = class_by_search(c);
    return a;
  }();
  return t;
}

}  // namespace

CpClass class_of(std::uint32_t cp) {
  if (cp < kTableSize) return static_cast<CpClass>(small_table()[cp]);
  if (cp == kInvalid) return kOther;
  return class_by_search(cp);
}

Cp decode_at(std::string_view s, std::size_t i) {
  const auto b = [&](std::size_t k) { return static_cast<std::uint8_t>(s[k]); };
  const std::uint8_t c0 = b(i);
  if (c0 < 0x80) return {c0, 1, static_cast<std::uint8_t>(class_of(c0))};
  const Cp invalid{kInvalid, 1, kOther};
  std::size_t len = 0;
  std::uint32_t cp = 0, min = 0;
  if (c0 >= 0xC2 && c0 <= 0xDF) {
    len = 2, cp = c0 & 0x1Fu, min = 0x80;
  } else if (c0 >= 0xE0 && c0 <= 0xEF) {
    len = 3, cp = c0 & 0x0Fu, min = 0x800;
  } else if (c0 >= 0xF0 && c0 <= 0xF4) {
    len = 4, cp = c0 & 0x07u, min = 0x10000;
  } else {
    return invalid;  // continuation byte, C0/C1 (overlong), F5..FF
  }
  if (i + len > s.size()) return invalid;
  for (std::size_t k = 1; k < len; ++k) {
    const std::uint8_t ck = b(i + k);
    if ((ck & 0xC0u) != 0x80u) return invalid;
    cp = (cp << 6) | (ck & 0x3Fu);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return invalid;
  return {cp, static_cast<std::uint8_t>(len), static_cast<std::uint8_t>(class_of(cp))};
}

void append_utf8(std::uint32_t cp, std::string& out) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string escape_bytes(std::string_view s, std::size_t max_bytes, bool escape_backslash) {
  static const char* const hex = "0123456789abcdef";
  std::string out;
  for (std::size_t i = 0; i < s.size();) {
    if (out.size() >= max_bytes) {
      out += "...";
      break;
    }
    const Cp c = decode_at(s, i);
    const bool control = c.cp < 0x20 || c.cp == 0x7F || (c.cp >= 0x80 && c.cp < 0xA0);
    if (c.cp == '\\' && escape_backslash) {
      out += "\\\\";
    } else if (c.cp == kInvalid || control) {
      for (std::size_t k = i; k < i + c.len; ++k) {  // a C1 control is two bytes
        const auto b = static_cast<unsigned char>(s[k]);
        out += "\\x";
        out += hex[b >> 4];
        out += hex[b & 15];
      }
    } else {
      out.append(s.substr(i, c.len));
    }
    i += c.len;
  }
  return out;
}

}  // namespace lockstep::tok::unicode
