// The general regex pre-tokenizer on arbitrary patterns and text: the input
// is up to three patterns, each ended by a NUL byte, then the text. A
// pattern PCRE2 cannot compile is std::invalid_argument; a match that hits
// PCRE2's limits is std::runtime_error; otherwise the pieces must tile the
// text with none empty.
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "lockstep/tok/regex_split.hpp"

extern "C" int LLVMFuzzerTestOneInput(const unsigned char* data, std::size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> patterns;
  while (patterns.size() < 3) {
    const std::size_t nul = in.find('\0');
    if (nul == std::string_view::npos) break;
    patterns.emplace_back(in.substr(0, nul));
    in.remove_prefix(nul + 1);
  }
  try {
    (void)lockstep::tok::pcre2_pattern_for(in);
    const lockstep::tok::RegexSplitter splitter(patterns);
    std::vector<std::string_view> pieces;
    splitter.split(in, pieces);
    std::string joined;
    for (const std::string_view p : pieces) {
      if (p.empty()) __builtin_trap();
      joined += p;
    }
    if (joined != in) __builtin_trap();
  } catch (const std::invalid_argument&) {
  } catch (const std::runtime_error&) {
  }
  return 0;
}
