// Real vocabularies against their published expected encodings:
//   - tokenizers/TestPlans.txt (r50k_base, cl100k_base; from gpt-tokenizer),
//     through the tiktoken rank files and through GPT-2's encoder.json +
//     vocab.bpe (GPT-2's vocabulary is r50k_base);
//   - llama.cpp's vocab tests (gguf-vocab/*.inp/.out) for gpt-2 and
//     llama-spm, through the GGUF files' metadata.
// Plus properties on random input: decode(encode(x)) == x, the heap merge
// loop equals the plain one, and encoding speed.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <random>
#include <unistd.h>

#include "lockstep/data/rdata.hpp"
#include "lockstep/io/gguf.hpp"
#include "lockstep/tok/bpe.hpp"
#include "lockstep/tok/gguf_vocab.hpp"
#include "lockstep/tok/regex_split.hpp"
#include "lockstep/tok/spm.hpp"
#include "../common/run_command.hpp"
#include "lockstep/tok/unicode.hpp"
#include "testdata.hpp"

namespace {

using namespace lockstep::tok;
using namespace lockstep::tok::testing;

#if defined(__SANITIZE_ADDRESS__)
constexpr int kRandomCases = 300;
#else
constexpr int kRandomCases = 3000;
#endif

// Runs every case, prints the counts, fails on any mismatch (showing the
// first few).
void check_cases(const Tokenizer& tok, const std::vector<Case>& cases, const char* what) {
  int mismatches = 0, roundtrip_bad = 0;
  for (const Case& c : cases) {
    const std::vector<std::int32_t> got = tok.encode(c.text);
    if (got != c.ids) {
      if (++mismatches <= 5) {
        ADD_FAILURE() << what << ": text \"" << c.text << "\"\n  want " << show(c.ids) << "\n  got  " << show(got);
      }
    }
    if (tok.decode(got) != c.text) ++roundtrip_bad;
  }
  std::printf("%s (%s): %zu cases, %d mismatches, %d decode mismatches\n", what, tok.name().c_str(), cases.size(),
              mismatches, roundtrip_bad);
  EXPECT_GT(cases.size(), 40u);
  EXPECT_EQ(mismatches, 0);
  EXPECT_EQ(roundtrip_bad, 0);
}

// Random text of the kinds that stress pre-tokenizers: letters of several
// scripts, digits, punctuation, whitespace runs, emoji, apostrophes.
std::string random_text(std::mt19937& rng, std::size_t n_units) {
  static const char* const units[] = {
      "a", "e", "t", "s", "the", "and", " ", " ", "  ", "\n", "\n\n", "\t", "\r\n", "'", "'s", "'t", "'re", "'LL",
      "'ſ", "1", "23", "4567", "!", "?", ",", ".", "...", "-", "(", ")", "\"", "é", "ß", "Ä", "ñ", "Привет", "мир",
      "こんにちは", "世界", "안녕", "١٢٣", "Ⅻ", "½", "😀", "🇪🇸", "👍🏽", "\xC2\xA0", "\xE3\x80\x80", "\xE2\x80\x83",
      "http://x.y/z?q=1", "<|endoftext|>", "__init__", "$", "€", "©", "\u0301", "कि", "ـ"};
  std::string s;
  for (std::size_t k = 0; k < n_units; ++k) s += units[rng() % std::size(units)];
  return s;
}

std::string random_bytes(std::mt19937& rng, std::size_t n) {
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng() % 4 == 0 ? rng() % 256 : " ae\n'1\xC3\xA9\xF0"[rng() % 10]);
  return s;
}

// decode(encode(x)) == x on random text and random (often invalid UTF-8)
// bytes.
void check_round_trip(const Tokenizer& tok, bool bytes_too) {
  std::mt19937 rng(12345);
  int bad = 0;
  for (int k = 0; k < kRandomCases; ++k) {
    const std::string s = (bytes_too && k % 2) ? random_bytes(rng, rng() % 200) : random_text(rng, rng() % 40);
    if (tok.decode(tok.encode(s)) != s) ++bad;
  }
  std::printf("%s: %d random round trips, %d mismatches\n", tok.name().c_str(), kRandomCases, bad);
  EXPECT_EQ(bad, 0);
}

// The heap merge loop (long pieces) must give exactly the plain loop's result.
void check_merge_loops(const BpeTokenizer& tok) {
  std::mt19937 rng(777);
  int bad = 0;
  std::size_t merged_away = 0;
  for (int k = 0; k < kRandomCases / 3; ++k) {
    std::string piece = k % 2 ? random_text(rng, 1 + rng() % 60) : random_bytes(rng, 1 + rng() % 400);
    std::vector<std::int32_t> a(piece.size()), b;
    for (std::size_t i = 0; i < piece.size(); ++i) a[i] = tok.find(piece.substr(i, 1));
    b = a;
    tok.merge_simple(a);
    tok.merge_heap(b);
    merged_away += piece.size() - a.size();
    if (a != b) ++bad;
  }
  std::printf("%s: %d pieces through both merge loops (%zu merges), %d mismatches\n", tok.name().c_str(),
              kRandomCases / 3, merged_away, bad);
  EXPECT_GT(merged_away, 1000u);
  EXPECT_EQ(bad, 0);
}

std::filesystem::path tk(const char* f) { return testdata() / "tokenizers" / f; }
std::filesystem::path gv(const char* f) { return testdata() / "gguf-vocab" / f; }

// The vocab GGUF to test: the shared copy when it is intact, else the copy
// rebuilt by tests/tok/repair_vocab_gguf.py (the shared copies were damaged
// by a UTF-8 round trip; see tests/fixtures/tok/README.md).
std::filesystem::path vocab_gguf(const char* name) {
  const std::filesystem::path shared = gv(name);
  try {
    lockstep::io::gguf_read(shared);
    return shared;
  } catch (const std::runtime_error&) {
    return std::filesystem::path(LOCKSTEP_SOURCE_DIR) / "tests/fixtures/tok" / name;
  }
}

TEST(TokVocab, R50kTiktokenMatchesTestPlans) {
  LOCKSTEP_REQUIRE_FILE(tk("r50k_base.tiktoken"));
  const BpeTokenizer tok = load_r50k_base(tk("r50k_base.tiktoken"));
  EXPECT_EQ(tok.vocab_size(), 50257);
  EXPECT_EQ(tok.eos(), 50256);
  check_cases(tok, test_plans("r50k_base"), "TestPlans r50k_base");
  check_round_trip(tok, true);
  check_merge_loops(tok);
}

TEST(TokVocab, Cl100kTiktokenMatchesTestPlans) {
  LOCKSTEP_REQUIRE_FILE(tk("cl100k_base.tiktoken"));
  const BpeTokenizer tok = load_cl100k_base(tk("cl100k_base.tiktoken"));
  EXPECT_EQ(tok.vocab_size(), 100277);
  EXPECT_FALSE(tok.is_token(100256));  // a hole between the ranks and the specials
  check_cases(tok, test_plans("cl100k_base"), "TestPlans cl100k_base");
  check_round_trip(tok, true);
  check_merge_loops(tok);
  // Special tokens are text to encode(), tokens to encode_with_specials().
  const std::string s = "a<|endoftext|>b";
  EXPECT_EQ(tok.encode_with_specials(s), (std::vector<std::int32_t>{64, 100257, 65}));
  EXPECT_GT(tok.encode(s).size(), 3u);
  EXPECT_EQ(tok.decode(tok.encode_with_specials(s)), s);
}

TEST(TokVocab, Gpt2EncoderJsonMatchesTestPlans) {
  LOCKSTEP_REQUIRE_FILE(tk("gpt2/encoder.json"));
  const BpeTokenizer tok = load_gpt2(tk("gpt2/encoder.json"), tk("gpt2/vocab.bpe"));
  EXPECT_EQ(tok.vocab_size(), 50257);
  EXPECT_EQ(tok.merges().size(), 50000u);
  EXPECT_EQ(tok.bos(), 50256);
  check_cases(tok, test_plans("r50k_base"), "TestPlans r50k_base via encoder.json");
  check_round_trip(tok, true);
  check_merge_loops(tok);
}

TEST(TokVocab, GgufGpt2MatchesLlamaCppVocabTest) {
  LOCKSTEP_REQUIRE_FILE(gv("ggml-vocab-gpt-2.gguf.inp"));
  const std::filesystem::path file = vocab_gguf("ggml-vocab-gpt-2.gguf");
  std::printf("vocab file: %s\n", file.c_str());
  const auto tok = load_gguf_tokenizer(file);
  EXPECT_EQ(tok->vocab_size(), 50257);
  check_cases(*tok, llama_vocab_cases(gv("ggml-vocab-gpt-2.gguf.inp")), "llama.cpp vocab test gpt-2");
  check_round_trip(*tok, true);
  // The same vocabulary as encoder.json: every token's bytes agree.
  if (std::filesystem::exists(tk("gpt2/encoder.json"))) {
    const BpeTokenizer ref = load_gpt2(tk("gpt2/encoder.json"), tk("gpt2/vocab.bpe"));
    const auto& bpe = dynamic_cast<const BpeTokenizer&>(*tok);
    int differ = 0;
    for (std::int32_t id = 0; id < ref.vocab_size(); ++id) differ += bpe.tokens()[id] != ref.tokens()[id];
    std::printf("gguf gpt-2 vs encoder.json: %d tokens, %d differ\n", ref.vocab_size(), differ);
    EXPECT_EQ(differ, 0);
  }
}

TEST(TokVocab, GgufLlamaSpmMatchesLlamaCppVocabTest) {
  LOCKSTEP_REQUIRE_FILE(gv("ggml-vocab-llama-spm.gguf.inp"));
  const std::filesystem::path file = vocab_gguf("ggml-vocab-llama-spm.gguf");
  std::printf("vocab file: %s\n", file.c_str());
  const auto tok = load_gguf_tokenizer(file);
  EXPECT_EQ(tok->vocab_size(), 32000);
  EXPECT_EQ(tok->bos(), 1);
  EXPECT_EQ(tok->eos(), 2);
  check_cases(*tok, llama_vocab_cases(gv("ggml-vocab-llama-spm.gguf.inp")), "llama.cpp vocab test llama-spm");
  check_round_trip(*tok, false);  // SPM: valid UTF-8 text round-trips (bytes would too, but "▁" would not)
  // encode_with_specials: "<s>" is BOS; the text after it gets the space prefix again.
  const std::vector<std::int32_t> a = tok->encode_with_specials("<s>Hello");
  const std::vector<std::int32_t> b = tok->encode("Hello");
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(a[0], 1);
  EXPECT_EQ(std::vector<std::int32_t>(a.begin() + 1, a.end()), b);
}

// LLaMA-3 (the BitNet b1.58 2B4T tokenizer) from its tokenizer.json against
// llama.cpp's llama-bpe vocab test (46 texts; its .gguf is not shipped).
TEST(TokVocab, Llama3TokenizerJsonMatchesLlamaCppVocabTest) {
  LOCKSTEP_REQUIRE_FILE(testdata() / "llama3/tokenizer.json");
  const BpeTokenizer tok = load_hf_tokenizer_json(testdata() / "llama3/tokenizer.json");
  EXPECT_EQ(tok.vocab_size(), 128256);
  EXPECT_TRUE(tok.options().ignore_merges);
  check_cases(tok, llama_vocab_cases(gv("ggml-vocab-llama-bpe.gguf.inp")), "llama.cpp vocab test llama-bpe via tokenizer.json");
  check_round_trip(tok, true);
}

// llama.cpp's ggml-vocab-llama-bpe.gguf is not shipped: the same vocabulary
// is written from LLaMA-3's tokenizer.json by PyPI's `gguf` (llama.cpp's own
// writer; tests/tok/make_vocab_gguf.py), read back through GGUF metadata
// (tokenizer.ggml.pre = "llama-bpe") and run against the vocab test's 46
// expected encodings, and against the tokenizer.json loader on random text.
TEST(TokVocab, GgufLlamaBpeMatchesLlamaCppVocabTest) {
  LOCKSTEP_REQUIRE_FILE(testdata() / "llama3/tokenizer.json");
  const std::string python = LOCKSTEP_PYTHON;
  if (python.empty()) GTEST_SKIP() << "no Python interpreter found at configure time";
  const std::filesystem::path out =
      std::filesystem::temp_directory_path() / ("lockstep_llama_bpe_" + std::to_string(::getpid()) + ".gguf");
  int status = 0;
  const std::string log = lockstep::test::run_command(
      "'" + python + "' '" + LOCKSTEP_SOURCE_DIR + "/tests/tok/make_vocab_gguf.py' '" +
          (testdata() / "llama3/tokenizer.json").string() + "' '" + out.string() +
          "' --pre llama-bpe --bos 128000 --eos 128001 --add-bos",
      &status);
  if (status == 3) GTEST_SKIP() << "python `gguf` is not installed (pip install -r tests/requirements.txt)";
  ASSERT_EQ(status, 0) << log;
  std::printf("%s", log.c_str());
  const auto tok = load_gguf_tokenizer(out);
  std::filesystem::remove(out);
  EXPECT_EQ(tok->vocab_size(), 128256);
  EXPECT_EQ(tok->bos(), 128000);
  EXPECT_TRUE(tok->add_bos());
  const auto& bpe = dynamic_cast<const BpeTokenizer&>(*tok);
  EXPECT_TRUE(bpe.options().ignore_merges);
  EXPECT_EQ(bpe.options().pre, PreTokenizer::kCl100k);
  check_cases(*tok, llama_vocab_cases(gv("ggml-vocab-llama-bpe.gguf.inp")), "llama.cpp vocab test llama-bpe via GGUF");
  check_round_trip(*tok, true);
  // The prompt form: BOS, then the text with <|eot_id|> recognised.
  const std::vector<std::int32_t> prompt = tok->encode_prompt("Hi<|eot_id|>");
  ASSERT_EQ(prompt.size(), 3u);
  EXPECT_EQ(prompt[0], 128000);
  EXPECT_EQ(prompt[2], 128009);
  // The two loaders of one vocabulary agree on random text.
  const BpeTokenizer json_tok = load_hf_tokenizer_json(testdata() / "llama3/tokenizer.json");
  std::mt19937 rng(99);
  int differ = 0;
  for (int k = 0; k < kRandomCases; ++k) {
    const std::string s = k % 2 ? random_bytes(rng, rng() % 200) : random_text(rng, rng() % 40);
    differ += tok->encode(s) != json_tok.encode(s);
  }
  std::printf("llama-bpe GGUF vs tokenizer.json: %d random texts, %d differ\n", kRandomCases, differ);
  EXPECT_EQ(differ, 0);
}

// An unknown tokenizer.ggml.pre is refused, naming it (non-printable bytes
// escaped) and listing the names that are known. The gpt-2 vocab file with
// its 5-byte name "gpt-2" overwritten by "gp\x01-x" in place.
TEST(TokVocab, GgufUnknownPreTokenizerIsRefusedClearly) {
  const std::filesystem::path file = vocab_gguf("ggml-vocab-gpt-2.gguf");
  LOCKSTEP_REQUIRE_FILE(file);
  std::string bytes = slurp(file);
  const std::string key = "tokenizer.ggml.pre";
  const std::size_t at = bytes.find(key);
  ASSERT_NE(at, std::string::npos);
  const std::size_t value = at + key.size() + 4 + 8;  // type u32, length u64
  ASSERT_EQ(bytes.substr(value, 5), "gpt-2");
  bytes.replace(value, 5, std::string("gp\x01-x", 5));
  const auto g = lockstep::io::gguf_parse(
      std::span(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size()), "patched.gguf");
  try {
    tokenizer_from_gguf(g);
    ADD_FAILURE() << "an unknown pre-tokenizer was accepted";
  } catch (const std::runtime_error& e) {
    const std::string msg = e.what();
    std::printf("%s\n", msg.substr(0, 200).c_str());
    EXPECT_NE(msg.find("patched.gguf: tokenizer.ggml.pre: unknown pre-tokenizer 'gp\\x01-x'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("llama-bpe"), std::string::npos);
    EXPECT_NE(msg.find("qwen2"), std::string::npos);
    EXPECT_EQ(msg.find('\x01'), std::string::npos);
  }
  // Every known name builds a tokenizer from this vocabulary.
  int built = 0;
  for (const std::string& name : pre_tokenizer_names()) {
    if (!regex_pre_tokenizers_available() && !pre_tokenizer_by_name(name)->regexes.empty()) continue;
    std::string b = slurp(file);
    const std::size_t len_at = b.find(key) + key.size() + 4;
    std::string len(8, '\0');
    for (int i = 0; i < 8; ++i) len[static_cast<std::size_t>(i)] = static_cast<char>((name.size() >> (8 * i)) & 0xFF);
    b.replace(len_at, 8 + 5, len + name);
    const auto gg = lockstep::io::gguf_parse(std::span(reinterpret_cast<const unsigned char*>(b.data()), b.size()), name);
    const auto t = tokenizer_from_gguf(gg);
    const std::string text = "Hello world 12345 'll\n\n  x";
    EXPECT_EQ(t->decode(t->encode(text)), text) << name;
    ++built;
  }
  std::printf("%d pre-tokenizer names build a tokenizer\n", built);
  EXPECT_GT(built, regex_pre_tokenizers_available() ? 60 : 25);
}

// The damaged shared copies (if still damaged) are refused with the file and
// offset named, never crash or load garbage.
TEST(TokVocab, DamagedSharedGgufIsRejectedClearly) {
  int rejected = 0;
  for (const char* name : {"ggml-vocab-gpt-2.gguf", "ggml-vocab-llama-spm.gguf"}) {
    if (!std::filesystem::exists(gv(name))) continue;
    try {
      lockstep::io::gguf_read(gv(name));
    } catch (const std::runtime_error& e) {
      const std::string msg = e.what();
      std::printf("%s\n", msg.c_str());
      EXPECT_NE(msg.find(name), std::string::npos);
      EXPECT_NE(msg.find(": offset "), std::string::npos);
      ++rejected;
    }
  }
  if (rejected == 0) GTEST_SKIP() << "the shared vocab GGUFs are intact (or absent)";
}

// Encoding speed on English prose: Jane Austen (data/janeaustenr, fetched by
// scripts/setup.sh) when present, else the vocab test texts repeated.
TEST(TokVocab, EncodeSpeed) {
  LOCKSTEP_REQUIRE_FILE(tk("cl100k_base.tiktoken"));
  std::string corpus;
  const std::filesystem::path rdb = std::filesystem::path(LOCKSTEP_SOURCE_DIR) / "data/janeaustenr/Rdata.rdb";
  const char* source = "janeaustenr";
  if (std::filesystem::exists(rdb)) {
    for (const auto& book : lockstep::data::read_rdb(rdb.string())) {
      for (const std::string& line : book) corpus += line + "\n";
    }
  } else {
    source = "repeated test texts";
    for (const Case& c : test_plans("cl100k_base")) corpus += c.text + "\n";
    while (corpus.size() < (4u << 20)) corpus += corpus;
  }
#if defined(__SANITIZE_ADDRESS__)
  corpus.resize(std::min<std::size_t>(corpus.size(), 200000));
#endif
  std::vector<BpeTokenizer> toks = {load_cl100k_base(tk("cl100k_base.tiktoken")), load_r50k_base(tk("r50k_base.tiktoken"))};
  if (std::filesystem::exists(testdata() / "llama3/tokenizer.json")) {
    toks.push_back(load_hf_tokenizer_json(testdata() / "llama3/tokenizer.json"));  // LLaMA-3 / BitNet 2B4T
  }
  // The general (PCRE2) path: cl100k's ranks under o200k's regex.
  if (regex_pre_tokenizers_available()) toks.push_back(load_tiktoken(tk("cl100k_base.tiktoken"), PreTokenizer::kGpt2, {}, "bpe:cl100k-ranks+o200k-regex",
                               std::make_shared<const RegexSplitter>(std::vector<std::string>{std::string(o200k_regex())})));
  for (const auto& tok : toks) {
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<std::int32_t> ids = tok.encode(corpus);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("%s on %s: %zu bytes -> %zu tokens in %.3f s: %.2f M tokens/s, %.1f MB/s\n", tok.name().c_str(),
                source, corpus.size(), ids.size(), s, static_cast<double>(ids.size()) / s / 1e6,
                static_cast<double>(corpus.size()) / s / 1e6);
    EXPECT_EQ(tok.decode(ids), corpus);
  }
}

// LLaMA-3's encoding is not quadratic in a long piece: one run of letters
// (a single pre-tokenizer piece that is no token) of n and 8n bytes; the
// time grows about 8x (the heap merge loop, O(n log n)), far from 64x. Best of
// three, to ride out a busy machine.
TEST(TokVocab, Llama3LongPieceIsNotQuadratic) {
  LOCKSTEP_REQUIRE_FILE(testdata() / "llama3/tokenizer.json");
  const BpeTokenizer tok = load_hf_tokenizer_json(testdata() / "llama3/tokenizer.json");
  std::mt19937 rng(3);
  const auto seconds = [&](std::size_t n) {
    std::string piece(n, 'a');
    for (char& c : piece) c = static_cast<char>('a' + rng() % 26);
    double best = 1e9;
    for (int rep = 0; rep < 3; ++rep) {
      const auto t0 = std::chrono::steady_clock::now();
      const std::vector<std::int32_t> ids = tok.encode(piece);
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      EXPECT_EQ(tok.decode(ids), piece);
    }
    return best;
  };
  const std::size_t n = 25000;
  const double t1 = seconds(n), t8 = seconds(8 * n);
  std::printf("LLaMA-3, one piece of random letters: %zu bytes %.4f s, %zu bytes %.4f s (x%.1f for x8)\n", n, t1,
              8 * n, t8, t8 / t1);
  EXPECT_LT(t8 / t1, 24.0);
}

// Malformed vocabulary files fail with a message naming the file and place.
TEST(TokVocab, MalformedFilesThrowClearErrors) {
  const auto expect_error = [](auto&& fn, const std::string& needle) {
    try {
      fn();
      ADD_FAILURE() << "no exception; wanted one mentioning " << needle;
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  std::string bytes;
  for (int b = 0; b < 256; ++b) {
    std::string one(1, static_cast<char>(b)), b64;
    static const char* tbl = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned v = static_cast<unsigned char>(b);
    b64 = std::string{tbl[v >> 2], tbl[(v & 3) << 4], '=', '='};
    bytes += b64 + " " + std::to_string(b) + "\n";
  }
  // A valid minimal file parses; each corruption names its line.
  EXPECT_EQ(parse_tiktoken(bytes, "mini", PreTokenizer::kGpt2, {}, "mini").vocab_size(), 256);
  expect_error([&] { parse_tiktoken(bytes + "Q!== 256\n", "mini", PreTokenizer::kGpt2, {}, "m"); }, "mini: line 257: invalid base64");
  expect_error([&] { parse_tiktoken(bytes + "QUI= x\n", "mini", PreTokenizer::kGpt2, {}, "m"); }, "line 257: invalid rank");
  // A hole is allowed (p50k_base has one); a rank far past the others is not.
  EXPECT_EQ(parse_tiktoken(bytes + "QUI= 300\n", "mini", PreTokenizer::kGpt2, {}, "m").vocab_size(), 301);
  expect_error([&] { parse_tiktoken(bytes + "QUI= 9999999\n", "mini", PreTokenizer::kGpt2, {}, "m"); }, "line 257: rank 9999999 out of range");
  expect_error([&] { parse_tiktoken(bytes + "QUI= 300\n", "mini", PreTokenizer::kGpt2, {{"<|x|>", 300}}, "m"); }, "'<|x|>' id 300 collides with a rank");
  expect_error([&] { parse_tiktoken(bytes, "mini", PreTokenizer::kGpt2, {{"<|\x01|>", 7}}, "m"); }, "'<|\\x01|>' id 7 collides");
  expect_error([&] { parse_tiktoken(bytes + "QQ== 256\n", "mini", PreTokenizer::kGpt2, {}, "m"); }, "appears twice");
  expect_error([&] { parse_tiktoken(bytes + "QUI= 1x\n", "mini", PreTokenizer::kGpt2, {}, "m"); }, "line 257: invalid rank");
  expect_error([&] { parse_tiktoken(bytes.substr(0, bytes.rfind('\n', bytes.find(" 200\n")) + 1), "mini", PreTokenizer::kGpt2, {}, "m"); }, "has no token");
  expect_error([&] { parse_gpt2("{\"a\": 0", "", "dir"); }, "dir/encoder.json: offset");
  expect_error([&] { parse_gpt2("{\"a\": 0}", "#version: 0.2\na b c\n", "dir"); }, "dir/vocab.bpe: line 2");
  expect_error([&] { parse_gpt2("{\"a\": 0, \"b\": 1}", "a b\n", "dir"); }, "line 1: merge result is not in the vocabulary");
  expect_error([&] { parse_hf_tokenizer_json("{\"model\": {\"type\": \"Unigram\"}}", "t.json"); }, "t.json: model.type");
  expect_error([&] { parse_hf_tokenizer_json("[1,2]", "t.json"); }, "t.json: not a JSON object");
  // Found by fuzz/fuzz_tokenizer_json: a number overflowing a double is
  // nlohmann's out_of_range, not parse_error; it must still be runtime_error.
  expect_error([&] { parse_hf_tokenizer_json("22E922E9", "t.json"); }, "t.json: invalid JSON");
  expect_error([&] { parse_gpt2("{\"a\": 1E400}", "", "dir"); }, "dir/encoder.json: invalid JSON");
}

}  // namespace
