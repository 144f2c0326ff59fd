// Corpus preparation: documents, the seeded split, the trained tokenizer,
// the shards, and the cache.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include "../common/sample_text.hpp"
#include "lockstep/data/corpus.hpp"
#include "lockstep/data/shards.hpp"
#include "lockstep/tok/bpe.hpp"

namespace fs = std::filesystem;
using namespace lockstep::data;

namespace {

fs::path temp_dir(const std::string& name) {
  const fs::path p = fs::temp_directory_path() / ("lockstep_corpus_test_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

void write(const fs::path& p, const std::string& s) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << s;
}

// A small English-like text of `paragraphs` paragraphs.
std::string sample_text(int paragraphs, int salt = 0) { return lockstep::test::sample_text(paragraphs, 12345u + static_cast<unsigned>(salt)); }

}  // namespace

TEST(Corpus, ReflowJoinsParagraphLines) {
  EXPECT_EQ(reflow_paragraphs({"", "CHAPTER I", "", "", "It is a truth", "universally acknowledged,  ", "",
                               "that a single man", ""}),
            "CHAPTER I\n\nIt is a truth universally acknowledged,\n\nthat a single man\n");
  EXPECT_EQ(reflow_paragraphs({}), "");
  EXPECT_EQ(reflow_paragraphs({"", "  ", ""}), "");
}

TEST(Corpus, DocumentsAreConsecutiveAndCutAtBlankLines) {
  const std::string text = sample_text(200);
  for (std::size_t min_bytes : {0u, 1u, 100u, 1000u, 5000u, 1000000u}) {
    const auto docs = split_documents(text, min_bytes);
    std::string joined;
    for (std::size_t i = 0; i < docs.size(); ++i) {
      joined += docs[i];
      if (i + 1 < docs.size()) {
        EXPECT_GE(docs[i].size(), min_bytes);
        // Cut after a blank-line run, or after a line end once 4·min_bytes long.
        EXPECT_TRUE(docs[i].ends_with("\n\n") || (docs[i].ends_with("\n") && docs[i].size() >= 4 * min_bytes))
            << "doc " << i << " min " << min_bytes;
      }
    }
    EXPECT_EQ(joined, text) << "min_bytes " << min_bytes;
    std::printf("split_documents(min %zu): %zu documents\n", min_bytes, docs.size());
  }
  // Text without blank lines is still cut (at line ends, after 4·min_bytes).
  std::string lines;
  for (int i = 0; i < 1000; ++i) lines += "a line of text without a blank line after it\n";
  const auto docs = split_documents(lines, 1000);
  EXPECT_GT(docs.size(), 5u);
  for (std::size_t i = 0; i + 1 < docs.size(); ++i) EXPECT_GE(docs[i].size(), 4000u);
}

TEST(Corpus, ValidationSplitIsASeededShuffle) {
  const auto a = validation_indices(1000, 0.05, 7);
  const auto b = validation_indices(1000, 0.05, 7);
  const auto c = validation_indices(1000, 0.05, 8);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_EQ(a.size(), 50u);
  EXPECT_TRUE(std::is_sorted(a.begin(), a.end()));
  EXPECT_EQ(std::set<std::size_t>(a.begin(), a.end()).size(), a.size());
  // Spread over the whole range (a shuffle, not a prefix).
  EXPECT_LT(a.front(), 200u);
  EXPECT_GT(a.back(), 800u);
  EXPECT_EQ(validation_indices(2, 0.05, 1).size(), 1u);    // at least one
  EXPECT_EQ(validation_indices(3, 0.9, 1).size(), 2u);     // at most n-1
  EXPECT_THROW(validation_indices(1, 0.05, 1), std::runtime_error);

  // Each index is equally likely to be held out: over 2000 seeds with n = 10
  // and one held out, every index is chosen 200 ± 4.5σ (σ = √(2000·0.1·0.9) ≈ 13.4).
  std::map<std::size_t, int> counts;
  for (std::uint64_t s = 0; s < 2000; ++s) counts[validation_indices(10, 0.1, s)[0]]++;
  for (std::size_t i = 0; i < 10; ++i) {
    EXPECT_NEAR(counts[i], 200, 60) << "index " << i;
    std::printf("held out index %zu: %d of 2000\n", i, counts[i]);
  }
}

TEST(Corpus, PreparesShardsAndTokenizerAndReusesTheCache) {
  const fs::path dir = temp_dir("prepare");
  write(dir / "text" / "b.txt", sample_text(120, 1));
  write(dir / "text" / "a.txt", sample_text(80, 2));
  write(dir / "text" / ".hidden", "ignored");
  CorpusOptions o;
  o.data = (dir / "text").string();
  o.cache_dir = (dir / "cache").string();
  o.vocab_size = 300;
  o.doc_bytes = 2048;
  o.val_fraction = 0.1;
  std::vector<std::string> log;
  const PreparedCorpus p = prepare_corpus(o, [&](const std::string& s) { log.push_back(s); });
  EXPECT_FALSE(p.reused);
  EXPECT_LE(p.vocab_size, 300);
  EXPECT_GT(p.val_documents, 0u);
  EXPECT_GT(p.train_documents, p.val_documents);

  // The shards decode back to the documents, each followed by <|endoftext|>.
  const auto tok = lockstep::tok::load_hf_tokenizer_json(p.tokenizer_json);
  ASSERT_TRUE(tok.eos().has_value());
  std::string all_text;
  std::uint64_t bytes = 0;
  for (const std::string& path : {p.train_shard, p.val_shard}) {
    const Shard s(path);
    EXPECT_EQ(s.header().tokenizer_fingerprint, p.tokenizer_fingerprint);
    EXPECT_EQ(s.header().vocab_size, static_cast<std::uint64_t>(p.vocab_size));
    for (std::uint64_t d = 0; d < s.header().n_documents; ++d) {
      const std::uint64_t b = s.document_start(d);
      const std::uint64_t e = d + 1 < s.header().n_documents ? s.document_start(d + 1) : s.size();
      std::vector<std::int32_t> ids(e - b);
      s.read(b, e - b, ids.data());
      ASSERT_EQ(ids.back(), *tok.eos());
      ids.pop_back();
      const std::string text = tok.decode(ids);
      EXPECT_EQ(text.find("<|endoftext|>"), std::string::npos);
      bytes += text.size();
      all_text += text;
    }
  }
  EXPECT_EQ(bytes, p.train_bytes + p.val_bytes);
  const std::string a = sample_text(80, 2), b = sample_text(120, 1);
  EXPECT_EQ(all_text.size(), a.size() + b.size());

  // Same inputs: the cache. Different settings or text: a new key.
  const PreparedCorpus again = prepare_corpus(o);
  EXPECT_TRUE(again.reused);
  EXPECT_EQ(again.key, p.key);
  EXPECT_EQ(again.dir, p.dir);
  CorpusOptions o2 = o;
  o2.vocab_size = 280;
  const PreparedCorpus other = prepare_corpus(o2);
  EXPECT_FALSE(other.reused);
  EXPECT_NE(other.key, p.key);
  write(dir / "text" / "a.txt", sample_text(80, 3));
  const PreparedCorpus changed = prepare_corpus(o);
  EXPECT_FALSE(changed.reused);
  EXPECT_NE(changed.key, p.key);
  // An incomplete cache directory (no corpus.json) is rebuilt, not used.
  fs::remove(fs::path(changed.dir) / "corpus.json");
  EXPECT_FALSE(prepare_corpus(o).reused);
  for (const auto& l : log) std::printf("%s\n", l.c_str());
  fs::remove_all(dir);
}

TEST(Corpus, RefusesUnusableInputWithClearMessages) {
  const fs::path dir = temp_dir("bad");
  CorpusOptions o;
  o.cache_dir = (dir / "cache").string();
  o.data = (dir / "missing").string();
  try {
    prepare_corpus(o);
    FAIL() << "no throw";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("does not exist"), std::string::npos) << e.what();
  }
  write(dir / "bin.dat", std::string("abc\0def", 7));
  o.data = (dir / "bin.dat").string();
  try {
    prepare_corpus(o);
    FAIL() << "no throw";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("NUL"), std::string::npos) << e.what();
  }
  write(dir / "tiny.txt", "one short line\n");
  o.data = (dir / "tiny.txt").string();
  try {
    prepare_corpus(o);
    FAIL() << "no throw";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("too little text"), std::string::npos) << e.what();
  }
  o.vocab_size = 100;
  EXPECT_THROW(prepare_corpus(o), std::invalid_argument);
  fs::remove_all(dir);
}

TEST(Corpus, TheEmbeddedAustenCorpus) {
  std::string rdb;
  try {
    rdb = find_austen_rdb();
  } catch (const std::runtime_error& e) {
    GTEST_SKIP() << e.what();
  }
  const auto books = load_austen(rdb);
  ASSERT_EQ(books.size(), 6u);
  std::size_t bytes = 0;
  for (const auto& b : books) {
    bytes += b.text.size();
    std::printf("%-32s %8zu bytes\n", b.name.c_str(), b.text.size());
    // Reflowed: no paragraph keeps Gutenberg's hard wrap ("\n" between two non-blank lines).
    EXPECT_EQ(b.text.find("of\nthe"), std::string::npos) << b.name;
  }
  std::printf("austen: %zu bytes\n", bytes);
  EXPECT_GT(bytes, 4'000'000u);
  std::size_t docs = 0;
  for (const auto& b : books) docs += split_documents(b.text, 8192).size();
  std::printf("austen: %zu documents of >= 8 KiB\n", docs);
  EXPECT_GT(docs, 400u);
}
