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
#include <unistd.h>

#include "lockstep/tok/bpe.hpp"
#include "lockstep/tok/bpe_train.hpp"
#include "testdata.hpp"

namespace {

using namespace lockstep::tok;
using namespace lockstep::tok::testing;

#if defined(__SANITIZE_ADDRESS__)
constexpr int kTexts = 300;
#else
constexpr int kTexts = 2000;
#endif

TEST(TokHf, AgreesWithHuggingFaceTokenizersOnRandomText) {
  LOCKSTEP_REQUIRE_FILE(testdata() / "tokenizers/cl100k_base.tiktoken");
  LOCKSTEP_REQUIRE_FILE(testdata() / "tokenizers/gpt2/encoder.json");
  const std::string python = LOCKSTEP_PYTHON;
  if (python.empty()) GTEST_SKIP() << "no Python interpreter found at configure time";

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

  const std::string cmd = "'" + python + "' '" + LOCKSTEP_SOURCE_DIR + "/tests/tok/hf_crosscheck.py' --testdata '" +
                          testdata().string() + "' --out '" + out.string() + "' --trained '" +
                          trained_json.string() + "' --n " + std::to_string(kTexts);
  const int rc = std::system(cmd.c_str());
  std::filesystem::remove(trained_json);
  if (WIFEXITED(rc) && WEXITSTATUS(rc) == 3) GTEST_SKIP() << "python `tokenizers` is not installed (pip install -r tests/requirements.txt)";
  ASSERT_TRUE(WIFEXITED(rc) && WEXITSTATUS(rc) == 0) << "hf_crosscheck.py failed: " << cmd;

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
    const std::vector<std::int32_t> want = rec["ids"];
    Count& c = counts[name];
    ++c.cases;
    const BpeTokenizer& tok = name == "gpt2" ? gpt2 : name == "cl100k" ? cl100k : trained;
    // HF splits added tokens out of the text: that is encode_with_specials
    // for the trained vocabulary (the two reference ones have no added tokens
    // in HF, so "<|endoftext|>" is text there, as in our encode()).
    const std::vector<std::int32_t> got = name == "trained" ? tok.encode_with_specials(text) : tok.encode(text);
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
  EXPECT_EQ(counts.size(), 3u);
}

}  // namespace
