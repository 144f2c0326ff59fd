// Agreement with Hugging Face `tokenizers` (PyPI; pinned in
// tests/requirements.txt) on random text: tests/tok/hf_crosscheck.py encodes
// random texts (mixed scripts, whitespace runs, digits, emoji, random code
// points) with GPT-2 (encoder.json + vocab.bpe), cl100k_base and a vocabulary
// lockstep trained and saved as tokenizer.json; this test encodes the same
// texts and compares ids and pre-tokenizer pieces. Skips when Python or
// `tokenizers` is missing.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <unistd.h>

#include "lockstep/tok/bpe.hpp"
#include "lockstep/tok/bpe_train.hpp"
#include "lockstep/tok/regex_split.hpp"
#include "testdata.hpp"

namespace {

using namespace lockstep::tok;
using namespace lockstep::tok::testing;

#if defined(__SANITIZE_ADDRESS__)
constexpr int kTexts = 300;
#else
constexpr int kTexts = 3000;
#endif

std::string base64(std::string_view bytes) {
  static const char* const tbl = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (std::size_t i = 0; i < bytes.size(); i += 3) {
    std::uint32_t v = static_cast<std::uint8_t>(bytes[i]) << 16;
    if (i + 1 < bytes.size()) v |= static_cast<std::uint32_t>(static_cast<std::uint8_t>(bytes[i + 1])) << 8;
    if (i + 2 < bytes.size()) v |= static_cast<std::uint8_t>(bytes[i + 2]);
    out += tbl[(v >> 18) & 63];
    out += tbl[(v >> 12) & 63];
    out += i + 1 < bytes.size() ? tbl[(v >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? tbl[v & 63] : '=';
  }
  return out;
}

TEST(TokHf, AgreesWithHuggingFaceTokenizersOnRandomText) {
  LOCKSTEP_REQUIRE_FILE(testdata() / "tokenizers/cl100k_base.tiktoken");
  LOCKSTEP_REQUIRE_FILE(testdata() / "tokenizers/gpt2/encoder.json");
  const std::string python = LOCKSTEP_PYTHON;
  if (python.empty()) GTEST_SKIP() << "no Python interpreter found at configure time";
  LOCKSTEP_REQUIRE_PCRE2();

  // A vocabulary lockstep trains and saves; HF must load it and agree.
  std::string corpus;
  for (const Case& c : test_plans("cl100k_base")) corpus += c.text + "\n";
  for (const Case& c : test_plans("r50k_base")) corpus += c.text + " ";
  std::mt19937 rng(1);
  static const char* words[] = {"the ", "cat ", "sat ", "on ", "mat ", "1234 ", "don't ", "Ünïcödé ", "日本 ", "\n"};
  while (corpus.size() < 200000) corpus += words[rng() % std::size(words)];
  BpeTrainOptions opt;
  opt.vocab_size = 2000;
  const BpeTokenizer trained = train_bpe(corpus, opt);
  const std::string tag = std::to_string(::getpid());
  const std::filesystem::path dir = std::filesystem::temp_directory_path();
  const std::filesystem::path trained_json = dir / ("lockstep_hf_trained_" + tag + ".json");
  const std::filesystem::path out = dir / ("lockstep_hf_out_" + tag + ".jsonl");
  save_hf_tokenizer_json(trained, trained_json);

  // The regex pre-tokenizers: every distinct regex list of the GGUF names,
  // and the two hand-written regexes through the general path.
  nlohmann::json regex_sets = nlohmann::json::object();
  std::map<std::string, std::shared_ptr<const RegexSplitter>> splitters;
  std::set<std::vector<std::string>> seen;
  const auto add_set = [&](const std::string& name, const std::vector<std::string>& regexes) {
    if (!seen.insert(regexes).second) return;
    regex_sets[name] = regexes;
    splitters[name] = std::make_shared<const RegexSplitter>(regexes);
  };
  add_set("pcre2-gpt2", {std::string(pre_tokenizer_regex(PreTokenizer::kGpt2))});
  add_set("pcre2-cl100k", {std::string(pre_tokenizer_regex(PreTokenizer::kCl100k))});
  for (const std::string& name : pre_tokenizer_names()) {
    const NamedPreTokenizer spec = *pre_tokenizer_by_name(name);
    if (!spec.regexes.empty()) add_set(name, spec.regexes);
  }
  const std::filesystem::path sets_json = dir / ("lockstep_hf_regex_sets_" + tag + ".json");
  std::ofstream(sets_json) << regex_sets.dump();
  // A rank file with a hole at 50256 (as p50k_base): r50k_base's ranks, then
  // runs of spaces that are not yet tokens at 50257, 50258, ...
  const std::filesystem::path holed = dir / ("lockstep_hf_holed_" + tag + ".tiktoken");
  {
    const BpeTokenizer r50k = load_r50k_base(testdata() / "tokenizers/r50k_base.tiktoken");
    std::string file = slurp(testdata() / "tokenizers/r50k_base.tiktoken");
    if (!file.empty() && file.back() != '\n') file += '\n';
    int rank = 50257;
    for (std::size_t k = 2; k <= 25; ++k) {
      for (const char c : {' ', '\t', '\n'}) {
        const std::string run(k, c);
        if (r50k.find(run) >= 0) continue;
        file += base64(run) + " " + std::to_string(rank++) + "\n";
      }
    }
    std::ofstream(holed, std::ios::binary) << file;
  }

  const std::string cmd = "'" + python + "' '" + LOCKSTEP_SOURCE_DIR + "/tests/tok/hf_crosscheck.py' --testdata '" +
                          testdata().string() + "' --out '" + out.string() + "' --trained '" +
                          trained_json.string() + "' --llama3 '" + (testdata() / "llama3/tokenizer.json").string() +
                          "' --regex-sets '" + sets_json.string() + "' --tiktoken-holed '" + holed.string() +
                          "' --n " + std::to_string(kTexts);
  const int rc = std::system(cmd.c_str());
  std::filesystem::remove(trained_json);
  std::filesystem::remove(sets_json);
  if (WIFEXITED(rc) && WEXITSTATUS(rc) == 3) GTEST_SKIP() << "python `tokenizers` is not installed (pip install -r tests/requirements.txt)";
  if (WIFEXITED(rc) && WEXITSTATUS(rc) == 4) GTEST_SKIP() << "python `tiktoken` is not installed (pip install -r tests/requirements.txt)";
  ASSERT_TRUE(WIFEXITED(rc) && WEXITSTATUS(rc) == 0) << "hf_crosscheck.py failed: " << cmd;
  const BpeTokenizer llama3 = load_hf_tokenizer_json(testdata() / "llama3/tokenizer.json");
  const BpeTokenizer holed_tok = load_p50k_base(holed);
  std::filesystem::remove(holed);
  EXPECT_FALSE(holed_tok.is_special(50255));
  EXPECT_TRUE(holed_tok.is_special(50256));
  const BpeTokenizer o200k_on_cl100k = load_tiktoken(
      testdata() / "tokenizers/cl100k_base.tiktoken", PreTokenizer::kGpt2, {}, "o200k-regex-on-cl100k",
      std::make_shared<const RegexSplitter>(std::vector<std::string>{std::string(o200k_regex())}));

  const BpeTokenizer gpt2 = load_gpt2(testdata() / "tokenizers/gpt2/encoder.json", testdata() / "tokenizers/gpt2/vocab.bpe");
  const BpeTokenizer cl100k = load_cl100k_base(testdata() / "tokenizers/cl100k_base.tiktoken");
  struct Count {
    int cases = 0, id_mismatches = 0, piece_mismatches = 0, decode_mismatches = 0;
  };
  std::map<std::string, Count> counts;
  std::ifstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    const nlohmann::json rec = nlohmann::json::parse(line);
    const std::string name = rec["tok"];
    const std::string text = rec["text"];
    if (name == "o200k-regex") {  // tiktoken's own o200k_base pattern
      EXPECT_EQ(text, o200k_regex());
      continue;
    }
    if (name.rfind("regex:", 0) == 0) {  // pre-tokenization alone
      Count& c = counts[name];
      ++c.cases;
      std::vector<std::string_view> pv;
      splitters.at(name.substr(6))->split(text, pv);
      const std::vector<std::string> mine(pv.begin(), pv.end());
      const std::vector<std::string> theirs = rec["pieces"];
      if (mine != theirs && ++c.piece_mismatches <= 3) {
        ADD_FAILURE() << name << ": pieces differ on " << nlohmann::json(text).dump() << "\n  hf   "
                      << nlohmann::json(theirs).dump() << "\n  ours "
                      << nlohmann::json(mine).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      }
      continue;
    }
    const std::vector<std::int32_t> want = rec["ids"];
    Count& c = counts[name];
    ++c.cases;
    const BpeTokenizer& tok = name == "gpt2"             ? gpt2
                              : name == "cl100k"         ? cl100k
                              : name == "llama3"         ? llama3
                              : name == "tiktoken-holed" ? holed_tok
                              : name == "tiktoken-o200k" ? o200k_on_cl100k
                                                         : trained;
    // HF splits added tokens out of the text: that is encode_with_specials
    // for the trained vocabulary (the two reference ones have no added tokens
    // in HF, so "<|endoftext|>" is text there, as in our encode()).
    const bool specials = name == "trained" || name == "llama3";  // HF's added tokens are split out first
    const std::vector<std::int32_t> got = specials ? tok.encode_with_specials(text) : tok.encode(text);
    if (rec.contains("ids_special")) {  // tiktoken with <|endoftext|> allowed: in the hole at 50256
      const std::vector<std::int32_t> want_special = rec["ids_special"];
      c.id_mismatches += tok.encode_with_specials(text) != want_special;
    }
    if (got != want && ++c.id_mismatches <= 3) {
      ADD_FAILURE() << name << ": text " << nlohmann::json(text).dump() << "\n  hf   " << show(want) << "\n  ours " << show(got);
    }
    c.decode_mismatches += tok.decode(got) != text;
    if (rec.contains("pieces")) {
      std::vector<std::string_view> pv;
      pre_tokenize(tok.options().pre, text, pv);
      const std::vector<std::string> mine(pv.begin(), pv.end());
      const std::vector<std::string> theirs = rec["pieces"];
      if (mine != theirs && ++c.piece_mismatches <= 3) {
        std::size_t k = 0;
        while (k < mine.size() && k < theirs.size() && mine[k] == theirs[k]) ++k;
        ADD_FAILURE() << name << ": pre-tokenization differs on " << nlohmann::json(text).dump() << " at piece " << k
                      << ": hf " << nlohmann::json(std::vector<std::string>(theirs.begin() + static_cast<std::ptrdiff_t>(k), theirs.begin() + static_cast<std::ptrdiff_t>(std::min(theirs.size(), k + 3)))).dump()
                      << " ours " << nlohmann::json(std::vector<std::string>(mine.begin() + static_cast<std::ptrdiff_t>(k), mine.begin() + static_cast<std::ptrdiff_t>(std::min(mine.size(), k + 3)))).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      }
    }
  }
  std::filesystem::remove(out);
  for (const auto& [name, c] : counts) {
    std::printf("HF tokenizers vs lockstep, %s: %d random texts, %d id mismatches, %d pre-tokenizer mismatches, "
                "%d decode mismatches\n", name.c_str(), c.cases, c.id_mismatches, c.piece_mismatches, c.decode_mismatches);
    EXPECT_EQ(c.cases, kTexts);
    EXPECT_EQ(c.id_mismatches, 0);
    EXPECT_EQ(c.piece_mismatches, 0);
    EXPECT_EQ(c.decode_mismatches, 0);
  }
  EXPECT_EQ(counts.size(), 6u + splitters.size());
}

}  // namespace
