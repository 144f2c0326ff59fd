#include "lockstep/tok/regex_split.hpp"

#if LOCKSTEP_HAVE_PCRE2
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#endif

#include <algorithm>
#include <map>
#include <stdexcept>
#include <utility>

#include "lockstep/tok/unicode.hpp"

namespace lockstep::tok {

namespace {

using Ranges = std::vector<std::pair<std::uint32_t, std::uint32_t>>;

// Adjacent runs merged; surrogates (which PCRE2 refuses in UTF mode and
// which never occur in valid UTF-8) left out.
void add_range(Ranges& r, std::uint32_t lo, std::uint32_t hi) {
  if (lo <= 0xDFFF && hi >= 0xD800) {
    if (lo < 0xD800) add_range(r, lo, 0xD7FF);
    if (hi > 0xDFFF) add_range(r, 0xE000, hi);
    return;
  }
  if (!r.empty() && r.back().second + 1 == lo) {
    r.back().second = hi;
  } else {
    r.emplace_back(lo, hi);
  }
}

Ranges complement(const Ranges& r) {
  Ranges out;
  std::uint32_t next = 0;
  for (const auto& [lo, hi] : r) {
    if (lo > next) add_range(out, next, lo - 1);
    next = hi + 1;
  }
  if (next <= 0x10FFFF) add_range(out, next, 0x10FFFF);
  return out;
}

// The sets the rewrite knows: general categories by their one- and two-letter
// names (and L& / LC), "s" (White_Space, as the hand-written matchers) and
// "d" (Nd).
const std::map<std::string, Ranges, std::less<>>& class_sets() {
  static const std::map<std::string, Ranges, std::less<>> sets = [] {
    std::map<std::string, Ranges, std::less<>> m;
    for (std::size_t k = 0; k < unicode::kCategoryRunCount; ++k) {
      const unicode::CategoryRun& run = unicode::kCategoryRuns[k];
      const std::string name = unicode::kCategoryNames[run.cat];
      add_range(m[name], run.lo, run.hi);
      add_range(m[name.substr(0, 1)], run.lo, run.hi);
      if (name == "Lu" || name == "Ll" || name == "Lt") {
        add_range(m["L&"], run.lo, run.hi);
        add_range(m["LC"], run.lo, run.hi);
      }
    }
    for (std::size_t k = 0; k < unicode::kCpRangeCount; ++k) {
      if (unicode::kCpRanges[k].cls == unicode::kSpace) {
        add_range(m["s"], unicode::kCpRanges[k].lo, unicode::kCpRanges[k].hi);
      }
    }
    m["d"] = m["Nd"];
    // Oniguruma's Unicode \w (measured against HF): Alphabetic (L,
    // Nl, Other_Alphabetic), Mark, Nd, Pc, not Join_Control. PCRE2 10.42's \w is
    // L and N only, so \b would differ before a combining mark or after ⒍.
    // Other_Alphabetic outside the marks: circled and squared Latin letters.
    // Below U+0100 Oniguruma uses its ISO-8859-1 table instead, which also
    // counts the superscript digits and the fractions (² ³ ¹ ¼ ½ ¾) as word
    // characters.
    Ranges w;
    for (std::size_t k = 0; k < unicode::kCategoryRunCount; ++k) {
      const unicode::CategoryRun& run = unicode::kCategoryRuns[k];
      const std::string_view cat = unicode::kCategoryNames[run.cat];
      if (cat[0] == 'L' || cat[0] == 'M' || cat == "Nl" || cat == "Nd" || cat == "Pc") add_range(w, run.lo, run.hi);
    }
    for (const auto& [lo, hi] : Ranges{{0xB2, 0xB3}, {0xB9, 0xB9}, {0xBC, 0xBE}, {0x24B6, 0x24E9}, {0x1F130, 0x1F149}, {0x1F150, 0x1F169},
                                       {0x1F170, 0x1F189}}) {
      w.emplace_back(lo, hi);
    }
    std::sort(w.begin(), w.end());
    Ranges merged;
    for (const auto& [lo, hi] : w) {
      if (!merged.empty() && merged.back().second + 1 >= lo) {
        merged.back().second = std::max(merged.back().second, hi);
      } else {
        merged.emplace_back(lo, hi);
      }
    }
    w = merged;
    m["w"] = w;
    return m;
  }();
  return sets;
}

void append_hex(std::uint32_t cp, std::string& out) {
  static const char* const digits = "0123456789ABCDEF";
  out += "\\x{";
  bool started = false;
  for (int shift = 20; shift >= 0; shift -= 4) {
    const std::uint32_t d = (cp >> shift) & 0xF;
    if (d != 0 || started || shift == 0) out.push_back(digits[d]), started = true;
  }
  out += '}';
}

void append_ranges(const Ranges& r, std::string& out) {
  for (const auto& [lo, hi] : r) {
    append_hex(lo, out);
    if (hi != lo) {
      out += '-';
      append_hex(hi, out);
    }
  }
}

#if LOCKSTEP_HAVE_PCRE2
std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  if (pcre2_get_error_message(code, buf, sizeof buf) < 0) return "error " + std::to_string(code);
  return reinterpret_cast<const char*>(buf);
}
#endif

}  // namespace

std::string pcre2_pattern_for(std::string_view p) {
  std::string out;
  out.reserve(p.size());
  bool in_class = false;
  std::size_t class_start = 0;  // index in p just after '[' or "[^"
  for (std::size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c != '\\') {
      if (!in_class && c == '[') {
        in_class = true;
        out += c;
        if (i + 1 < p.size() && p[i + 1] == '^') out += p[++i];
        class_start = i + 1;
        continue;
      }
      if (in_class && c == '[' && i + 1 < p.size() && p[i + 1] == ':') {  // POSIX [:name:]
        const std::size_t end = p.find(":]", i + 2);
        if (end != std::string_view::npos) {
          out.append(p.substr(i, end + 2 - i));
          i = end + 1;
          continue;
        }
      }
      if (in_class && c == ']' && i != class_start) in_class = false;
      out += c;
      continue;
    }
    if (i + 1 >= p.size()) {  // a trailing backslash: PCRE2 reports it
      out += c;
      continue;
    }
    const char e = p[i + 1];
    if (e == 'Q') {  // \Q...\E: literal text, nothing to rewrite
      const std::size_t end = p.find("\\E", i + 2);
      const std::size_t stop = end == std::string_view::npos ? p.size() : end + 2;
      out.append(p.substr(i, stop - i));
      i = stop - 1;
      continue;
    }
    std::string name;
    bool negate = false;
    std::size_t consumed = 2;
    if (e == 'p' || e == 'P') {
      negate = e == 'P';
      if (i + 2 < p.size() && p[i + 2] == '{') {
        const std::size_t close = p.find('}', i + 3);
        if (close == std::string_view::npos) throw std::invalid_argument("\\p{ without a closing }");
        name = std::string(p.substr(i + 3, close - i - 3));
        consumed = close + 1 - i;
        if (!name.empty() && name[0] == '^') negate = !negate, name.erase(0, 1);
      } else if (i + 2 < p.size()) {
        name = std::string(1, p[i + 2]);
        consumed = 3;
      }
    } else if (e == 's' || e == 'S' || e == 'd' || e == 'D' || e == 'w' || e == 'W') {
      name = std::string(1, static_cast<char>(e | 0x20));
      negate = e == 'S' || e == 'D' || e == 'W';
    } else if (!in_class && (e == 'b' || e == 'B')) {
      // A word boundary over Oniguruma's \w (above).
      std::string w = "[";
      append_ranges(class_sets().at("w"), w);
      w += ']';
      out += e == 'b' ? "(?:(?<=" + w + ")(?!" + w + ")|(?<!" + w + ")(?=" + w + "))"
                      : "(?:(?<=" + w + ")(?=" + w + ")|(?<!" + w + ")(?!" + w + "))";
      ++i;
      continue;
    }
    const auto& sets = class_sets();
    const auto it = name.empty() ? sets.end() : sets.find(name);
    if (it == sets.end()) {  // not ours: PCRE2's own meaning
      out.append(p.substr(i, 2));
      ++i;
      continue;
    }
    if (in_class) {
      append_ranges(negate ? complement(it->second) : it->second, out);
    } else {
      out += negate ? "[^" : "[";
      append_ranges(it->second, out);
      out += ']';
    }
    i += consumed - 1;
  }
  return out;
}

#if LOCKSTEP_HAVE_PCRE2

bool regex_pre_tokenizers_available() { return true; }

struct RegexSplitter::Compiled {
  pcre2_code* code = nullptr;
  ~Compiled() { pcre2_code_free(code); }
};

RegexSplitter::RegexSplitter(std::vector<std::string> patterns) : patterns_(std::move(patterns)) {
  if (patterns_.empty()) throw std::invalid_argument("a regex pre-tokenizer needs at least one pattern");
  for (const std::string& p : patterns_) {
    std::string rewritten;
    try {
      rewritten = pcre2_pattern_for(p);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument("regex '" + unicode::escape_bytes(p) + "': " + e.what());
    }
    int err = 0;
    PCRE2_SIZE err_at = 0;
    auto c = std::make_unique<Compiled>();
    c->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(rewritten.data()), rewritten.size(),
                            PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE, &err, &err_at, nullptr);
    if (c->code == nullptr) {
      throw std::invalid_argument("regex '" + unicode::escape_bytes(p) + "' does not compile (PCRE2: " +
                                  pcre2_message(err) + ", at offset " + std::to_string(err_at) +
                                  " of its rewritten form)");
    }
    // JIT where the library has it; the interpreter gives the same matches.
    pcre2_jit_compile(c->code, PCRE2_JIT_COMPLETE);
    compiled_.push_back(std::move(c));
  }
}

RegexSplitter::~RegexSplitter() = default;

namespace {

// Per thread: the match data (sized for the largest pattern) and a JIT stack
// large enough for long runs of letters under the group-repeating patterns.
struct MatchScratch {
  pcre2_match_data* data = nullptr;
  pcre2_match_context* context = nullptr;
  pcre2_jit_stack* stack = nullptr;
  MatchScratch() {
    data = pcre2_match_data_create(64, nullptr);
    context = pcre2_match_context_create(nullptr);
    stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
    if (data == nullptr || context == nullptr || stack == nullptr) throw std::bad_alloc();
    pcre2_jit_stack_assign(context, nullptr, stack);
  }
  ~MatchScratch() {
    pcre2_jit_stack_free(stack);
    pcre2_match_context_free(context);
    pcre2_match_data_free(data);
  }
};

// Bytes of the UTF-8 character starting at s[i] (s valid UTF-8).
std::size_t char_len(std::string_view s, std::size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  return c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
}

}  // namespace

void RegexSplitter::split_valid(std::string_view text, std::vector<std::string_view>& out) const {
  thread_local MatchScratch scratch;
  std::vector<std::string_view> pieces{text}, next;
  for (std::size_t k = 0; k < compiled_.size(); ++k) {
    next.clear();
    pcre2_code* code = compiled_[k]->code;
    for (const std::string_view piece : pieces) {
      const auto subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
      std::size_t prev = 0, from = 0;
      bool have_last = false;
      std::size_t last_end = 0;
      while (from <= piece.size()) {
        const int rc = pcre2_match(code, subject, piece.size(), from, PCRE2_NO_UTF_CHECK, scratch.data, scratch.context);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
          throw std::runtime_error("regex '" + unicode::escape_bytes(patterns_[k]) + "': PCRE2 match failed: " +
                                   pcre2_message(rc));
        }
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(scratch.data);
        const std::size_t s = ov[0], e = ov[1];
        // Oniguruma's iterator (HF): an empty match where the last match
        // ended is not taken; the search moves on one character.
        if (s == e && have_last && last_end == e) {
          if (from >= piece.size()) break;
          from += char_len(piece, from);
          continue;
        }
        if (s > prev) next.push_back(piece.substr(prev, s - prev));
        if (e > s) next.push_back(piece.substr(s, e - s));
        prev = e;
        from = e;
        have_last = true;
        last_end = e;
      }
      if (prev < piece.size()) next.push_back(piece.substr(prev));
    }
    pieces.swap(next);
  }
  out.insert(out.end(), pieces.begin(), pieces.end());
}

void RegexSplitter::split(std::string_view text, std::vector<std::string_view>& out) const {
  std::size_t run = 0, i = 0;
  while (i < text.size()) {
    const unicode::Cp c = unicode::decode_at(text, i);
    if (c.cp != unicode::kInvalid) {
      i += c.len;
      continue;
    }
    if (i > run) split_valid(text.substr(run, i - run), out);
    out.push_back(text.substr(i, 1));
    run = ++i;
  }
  if (i > run) split_valid(text.substr(run, i - run), out);
}

#else  // no PCRE2 in this build

bool regex_pre_tokenizers_available() { return false; }

struct RegexSplitter::Compiled {};

RegexSplitter::RegexSplitter(std::vector<std::string> patterns) : patterns_(std::move(patterns)) {
  throw std::invalid_argument("regex pre-tokenizer '" + unicode::escape_bytes(patterns_.empty() ? "" : patterns_[0]) +
                              "': this build has no PCRE2 (install libpcre2-dev, scripts/setup.sh, and reconfigure)");
}
RegexSplitter::~RegexSplitter() = default;
void RegexSplitter::split(std::string_view, std::vector<std::string_view>&) const {}
void RegexSplitter::split_valid(std::string_view, std::vector<std::string_view>&) const {}

#endif

}  // namespace lockstep::tok
