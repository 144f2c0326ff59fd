// BPE training: the fast trainer equals the plain reference merge for merge,
// is deterministic, round-trips through tokenizer.json, and its tokenizer
// reproduces the training segmentation; speed on a few MB of text.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>
#include <unistd.h>

#include "lockstep/data/rdata.hpp"
#include "lockstep/tok/bpe.hpp"
#include "lockstep/tok/bpe_train.hpp"

namespace {

using namespace lockstep::tok;

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif

// Text made of random "words" over a few syllables (Zipf-like: low syllable
// indices are frequent), with digits, punctuation, newlines and some UTF-8.
std::string synthetic_text(std::uint32_t seed, std::size_t bytes) {
  static const char* const syl[] = {"th", "e", "an", "d", "in", "g", "er", "s", "qu", "ick", "o", "a", "re", "é",
                                    "ü", "日", "本", "ка", "!", "1", "42", "'s"};
  std::mt19937 rng(seed);
  std::string s;
  while (s.size() < bytes) {
    const int n = 1 + static_cast<int>(rng() % 4);
    s += (rng() % 10 == 0) ? "\n" : " ";
    for (int k = 0; k < n; ++k) {
      const double u = std::uniform_real_distribution<double>(0, 1)(rng);
      s += syl[static_cast<std::size_t>(u * u * std::size(syl))];
    }
  }
  return s;
}

std::string random_bytes(std::mt19937& rng, std::size_t n) {
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng() % 256);
  return s;
}

std::vector<std::pair<std::int32_t, std::int32_t>> pairs_of(const BpeTokenizer& t) {
  std::vector<std::pair<std::int32_t, std::int32_t>> out;
  for (const BpeMerge& m : t.merges()) out.emplace_back(m.left, m.right);
  return out;
}

TEST(TokTrain, FastTrainerEqualsReference) {
  const std::string a = synthetic_text(1, kSanitized ? 6000 : 30000), b = synthetic_text(2, 5000);
  const std::string_view docs[] = {a, b};
  int configs = 0, mismatches = 0;
  for (const PreTokenizer pre : {PreTokenizer::kGpt2, PreTokenizer::kCl100k}) {
    for (const std::uint64_t min_count : {1u, 2u}) {
      BpeTrainOptions opt;
      opt.pre = pre;
      opt.min_count = min_count;
      // min_count 1 runs until pairs occur once (a larger budget); 2 stops earlier.
      opt.vocab_size = kSanitized ? 400 : (min_count == 1 ? 1600 : 800);
      BpeTrainStats st;
      const BpeTokenizer fast = train_bpe(docs, opt, &st);
      const auto ref = train_bpe_merges_reference(docs, opt);
      ++configs;
      if (pairs_of(fast) != ref) {
        ++mismatches;
        ADD_FAILURE() << "merges differ for " << pre_tokenizer_name(pre) << " min_count " << min_count;
      }
      EXPECT_GT(ref.size(), 100u);
      // Encoding the corpus reproduces the training segmentation exactly.
      const std::size_t encoded = fast.encode(a).size() + fast.encode(b).size();
      EXPECT_EQ(encoded, st.tokens_after);
      std::printf("%s min_count %llu: %llu pieces (%llu unique), %zu merges, corpus -> %llu tokens (encode: %zu)\n",
                  std::string(pre_tokenizer_name(pre)).c_str(), static_cast<unsigned long long>(min_count),
                  static_cast<unsigned long long>(st.pieces), static_cast<unsigned long long>(st.unique_pieces),
                  ref.size(), static_cast<unsigned long long>(st.tokens_after), encoded);
    }
  }
  std::printf("fast vs reference trainer: %d configurations, %d mismatches\n", configs, mismatches);
}

TEST(TokTrain, DeterministicSizedAndRoundTrips) {
  const std::string corpus = synthetic_text(3, kSanitized ? 20000 : 200000);
  BpeTrainOptions opt;
  // The small sanitizer corpus runs out of pairs seen twice before 1000.
  opt.vocab_size = kSanitized ? 600 : 1000;
  opt.specials = {"<|endoftext|>", "<|pad|>"};
  const BpeTokenizer t1 = train_bpe(corpus, opt), t2 = train_bpe(corpus, opt);
  EXPECT_EQ(t1.vocab_size(), opt.vocab_size);
  EXPECT_EQ(pairs_of(t1), pairs_of(t2));
  EXPECT_EQ(t1.tokens(), t2.tokens());
  EXPECT_EQ(t1.eos(), opt.vocab_size - 2);
  EXPECT_EQ(t1.special_tokens().size(), 2u);
  // encode then decode is the identity on random bytes (invalid UTF-8 too).
  std::mt19937 rng(9);
  int bad = 0;
  const int n = kSanitized ? 200 : 2000;
  for (int k = 0; k < n; ++k) {
    const std::string s = k % 2 ? random_bytes(rng, rng() % 300) : synthetic_text(static_cast<std::uint32_t>(k), 200);
    bad += t1.decode(t1.encode(s)) != s;
  }
  std::printf("trained vocab 1000: %d random round trips, %d mismatches\n", n, bad);
  EXPECT_EQ(bad, 0);
}

TEST(TokTrain, TokenizerJsonRoundTrip) {
  const std::string corpus = synthetic_text(4, kSanitized ? 20000 : 100000);
  for (const PreTokenizer pre : {PreTokenizer::kGpt2, PreTokenizer::kCl100k}) {
    BpeTrainOptions opt;
    opt.vocab_size = 700;
    opt.pre = pre;
    const BpeTokenizer t = train_bpe(corpus, opt);
    const std::filesystem::path path =
        std::filesystem::temp_directory_path() / ("lockstep_tok_" + std::to_string(::getpid()) + ".json");
    save_hf_tokenizer_json(t, path);
    const BpeTokenizer u = load_hf_tokenizer_json(path);
    std::filesystem::remove(path);
    EXPECT_EQ(u.tokens(), t.tokens());
    EXPECT_EQ(pairs_of(u), pairs_of(t));
    EXPECT_EQ(u.options().pre, pre);
    EXPECT_EQ(u.eos(), t.eos());
    std::mt19937 rng(11);
    int bad = 0;
    for (int k = 0; k < 500; ++k) {
      const std::string s = synthetic_text(static_cast<std::uint32_t>(100 + k), 300) + random_bytes(rng, 20);
      bad += u.encode(s) != t.encode(s);
      bad += u.decode(u.encode(s)) != s;
    }
    std::printf("tokenizer.json round trip (%s): %zu tokens, %zu merges, 500 texts, %d mismatches\n",
                std::string(pre_tokenizer_name(pre)).c_str(), u.tokens().size(), u.merges().size(), bad);
    EXPECT_EQ(bad, 0);
  }
}

// A few MB of English to an 8k vocabulary: Jane Austen when data/janeaustenr
// is present (scripts/setup.sh), else synthetic text.
TEST(TokTrain, SpeedOnAFewMegabytes) {
  std::string corpus;
  const std::filesystem::path rdb = std::filesystem::path(LOCKSTEP_SOURCE_DIR) / "data/janeaustenr/Rdata.rdb";
  const char* source = "janeaustenr";
  if (std::filesystem::exists(rdb)) {
    for (const auto& book : lockstep::data::read_rdb(rdb.string())) {
      for (const std::string& line : book) corpus += line + "\n";
    }
  } else {
    source = "synthetic text";
    corpus = synthetic_text(5, 4 << 20);
  }
  if (kSanitized) corpus.resize(300000);
  BpeTrainOptions opt;
  opt.vocab_size = kSanitized ? 2048 : 8192;
  BpeTrainStats st;
  const auto t0 = std::chrono::steady_clock::now();
  const BpeTokenizer tok = train_bpe(corpus, opt, &st);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto t1 = std::chrono::steady_clock::now();
  const std::vector<std::int32_t> ids = tok.encode(corpus);
  const double e = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  std::printf("train on %s: %zu bytes, %llu pieces (%llu unique) -> vocab %d (%llu merges) in %.2f s; "
              "encode: %zu tokens (%.2f bytes/token) in %.3f s = %.2f M tokens/s\n",
              source, corpus.size(), static_cast<unsigned long long>(st.pieces),
              static_cast<unsigned long long>(st.unique_pieces), tok.vocab_size(),
              static_cast<unsigned long long>(st.merges), s, ids.size(),
              static_cast<double>(corpus.size()) / static_cast<double>(ids.size()), e,
              static_cast<double>(ids.size()) / e / 1e6);
  EXPECT_EQ(tok.vocab_size(), opt.vocab_size);
  EXPECT_EQ(ids.size(), st.tokens_after);
  EXPECT_EQ(tok.decode(ids), corpus);
  if (!kSanitized) {
    EXPECT_LT(s, 60.0);
  }
}

}  // namespace
