// Locating and parsing the shared tokenizer test data (../shared/testdata).
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "lockstep/tok/regex_split.hpp"

namespace lockstep::tok::testing {

inline std::filesystem::path testdata() { return LOCKSTEP_SHARED_TESTDATA; }

// GTEST_SKIP()s the calling test (via the macro below) when `p` is missing.
#define LOCKSTEP_REQUIRE_FILE(p)                                                                   \
  do {                                                                                             \
    if (!std::filesystem::exists(p)) GTEST_SKIP() << "test data missing: " << (p).string();       \
  } while (0)

// GTEST_SKIP()s the calling test in a build without PCRE2 (the regex
// pre-tokenizers are then unavailable; scripts/setup.sh installs libpcre2-dev).
#define LOCKSTEP_REQUIRE_PCRE2()                                                                   \
  do {                                                                                             \
    if (!::lockstep::tok::regex_pre_tokenizers_available())                                        \
      GTEST_SKIP() << "this build has no PCRE2: regex pre-tokenizers unavailable";                 \
  } while (0)

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

struct Case {
  std::string text;
  std::vector<std::int32_t> ids;
};

// tokenizers/TestPlans.txt: blocks "EncodingName: X" / "Sample: text" /
// "Encoded: [ids]"; the cases of one encoding.
inline std::vector<Case> test_plans(const std::string& encoding) {
  const std::string all = slurp(testdata() / "tokenizers/TestPlans.txt");
  std::vector<Case> out;
  std::istringstream in(all);
  std::string line, name;
  Case c;
  while (std::getline(in, line)) {
    if (line.rfind("EncodingName: ", 0) == 0) {
      name = line.substr(14);
    } else if (line.rfind("Sample:", 0) == 0) {
      c.text = line.size() > 8 ? line.substr(8) : "";
    } else if (line.rfind("Encoded: [", 0) == 0) {
      c.ids.clear();
      std::string body = line.substr(10);
      for (char& ch : body) {
        if (ch == ',' || ch == ']') ch = ' ';
      }
      std::istringstream nums(body);
      std::int32_t v;
      while (nums >> v) c.ids.push_back(v);
      if (name == encoding) out.push_back(c);
    }
  }
  return out;
}

// gguf-vocab/NAME.gguf.inp + .out (llama.cpp's vocab tests): texts separated
// by "\n__ggml_vocab_test__\n", one line of ids per text.
inline std::vector<Case> llama_vocab_cases(const std::filesystem::path& inp) {
  const std::string text = slurp(inp);
  std::filesystem::path outp = inp;
  outp.replace_extension(".out");
  const std::string ids = slurp(outp);
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<Case> out;
  for (std::size_t pos = 0; pos < text.size();) {
    std::size_t end = text.find(sep, pos);
    if (end == std::string::npos) end = text.size();
    out.push_back({text.substr(pos, end - pos), {}});
    pos = end + sep.size();
  }
  std::istringstream in(ids);
  std::string line;
  for (std::size_t k = 0; std::getline(in, line); ++k) {
    if (k >= out.size()) {
      ADD_FAILURE() << "more id lines than texts in " << outp;
      break;
    }
    std::istringstream nums(line);
    std::int32_t v;
    while (nums >> v) out[k].ids.push_back(v);
  }
  return out;
}

inline std::string show(const std::vector<std::int32_t>& ids) {
  std::string s = "[";
  for (std::size_t i = 0; i < ids.size(); ++i) s += (i ? ", " : "") + std::to_string(ids[i]);
  return s + "]";
}

}  // namespace lockstep::tok::testing
