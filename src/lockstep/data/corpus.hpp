// Corpus preparation: text (a file, a folder, or the embedded Jane Austen
// novels) -> documents -> a train/validation split by documents -> a byte-level
// BPE vocabulary trained on the training split -> token shards (shards.hpp).
//
// Everything is a pure function of the text and the options, so the prepared
// files are cached under a key that hashes both: a second run with the same
// corpus and settings re-uses them, and a resumed run that finds the cache gone
// rebuilds exactly the same files.
//
//   text ──split_documents──> documents (paragraphs grouped to >= doc_bytes, never
//                             spanning two files or two books; byte-exact substrings)
//        ──split_train_val──> Philox-seeded Fisher–Yates shuffle of the document
//                             indices; the first ceil(val_fraction·n) are validation
//        ──train_bpe────────> tokenizer.json (trained on the training documents only)
//        ──encode + EOS─────> train.tokens, val.tokens
//
// Cache layout (cache_dir/corpus-<key>/):
//   tokenizer.json   Hugging Face tokenizer.json (tok/bpe.hpp's writer)
//   train.tokens     training documents in their original order, each + <|endoftext|>
//   val.tokens       validation documents likewise
//   corpus.json      what it is: source, counts of documents/bytes/tokens, the options, the key
// corpus.json is written last: a directory without it is incomplete and rebuilt.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::data {

// One text document with a name for messages ("pride.txt", "austen:emma").
struct TextSource {
  std::string name;
  std::string text;
};

// The six novels of data/janeaustenr/Rdata.rdb (rdata.hpp), one TextSource per
// book, in the package's order. Project Gutenberg's hard line wraps are undone
// (reflow_paragraphs), so a paragraph is one line.
std::vector<TextSource> load_austen(const std::string& rdb_path);

// Where the embedded corpus lives: $LOCKSTEP_DATA_DIR/janeaustenr/Rdata.rdb,
// else data/janeaustenr/Rdata.rdb in the nearest ancestor of the running
// executable's directory that has it (build/release/lockstep -> the source
// tree), else the same under the current directory. Throws
// std::runtime_error saying how to get it (scripts/setup.sh) when none exists.
std::string find_austen_rdb();

// A text file, or every regular file under a folder (recursively, names
// starting with '.' skipped, sorted by relative path). Files containing a NUL
// byte are refused (not text). Throws std::runtime_error naming the path when
// it is missing, unreadable, or holds no text at all.
std::vector<TextSource> load_text_path(const std::string& path);

// Joins the lines of each paragraph with one space: lines are separated by
// '\n'; a paragraph is a run of non-blank lines; paragraphs are separated by one
// blank line ("\n\n") in the result; leading/trailing blank lines and trailing
// spaces of lines are dropped. Used for the Austen text only.
std::string reflow_paragraphs(const std::vector<std::string>& lines);

// Cuts text into documents of at least min_bytes (the last may be shorter): a
// document ends after a blank-line run (one or more "\n" after a "\n") once it
// holds >= min_bytes, or — for text without blank lines — after any line end
// once it holds >= 4·min_bytes, or at the end of the text. The documents are
// consecutive substrings: their concatenation is exactly `text`. min_bytes 0
// cuts at every line end.
std::vector<std::string_view> split_documents(std::string_view text, std::size_t min_bytes);

// The validation document indices of n documents: a Fisher–Yates shuffle of
// 0..n-1 driven by Philox(seed, stream kSplitStream, i) (j = floor(u32 · (i+1) / 2^32)
// for i = n-1 down to 1), of which the first ceil(val_fraction · n) — clamped to
// [1, n-1] when n >= 2 and val_fraction > 0 — are validation. Returned sorted.
// Requires n >= 2 when val_fraction > 0.
inline constexpr std::uint64_t kSplitStream = 0x73706c6974ull;  // "split"
std::vector<std::size_t> validation_indices(std::size_t n, double val_fraction, std::uint64_t seed);

struct CorpusOptions {
  std::string data;               // file or folder; "" = the embedded Austen novels
  std::string austen_rdb;         // "" = find_austen_rdb()
  std::string cache_dir;          // where corpus-<key>/ is made
  std::int32_t vocab_size = 1024; // BPE vocabulary: 256 bytes + merges + <|endoftext|>
  double val_fraction = 0.05;
  std::size_t doc_bytes = 8192;
  std::uint64_t split_seed = 0x5eed;  // the split does not follow the training seed
  void validate() const;          // throws std::invalid_argument naming the flag
};

struct PreparedCorpus {
  std::string dir;                // cache_dir/corpus-<key>
  std::string train_shard, val_shard, tokenizer_json;
  std::uint64_t key = 0;          // the cache key (corpus text + options)
  std::string source;             // "austen:/path/Rdata.rdb" or the --data path
  std::uint64_t train_documents = 0, val_documents = 0;
  std::uint64_t train_bytes = 0, val_bytes = 0;
  std::uint64_t train_tokens = 0, val_tokens = 0;  // including one <|endoftext|> per document
  std::int32_t vocab_size = 0;    // of the trained tokenizer (<= the requested size)
  std::uint64_t tokenizer_fingerprint = 0;  // XXH3-64 of tokenizer.json's bytes
  bool reused = false;            // found in the cache
};

// Prepares (or finds in the cache) the shards and the tokenizer. `log`
// receives one line per stage. Throws std::runtime_error naming the input on
// unusable data (too little text to split, ...).
PreparedCorpus prepare_corpus(const CorpusOptions& opt,
                              const std::function<void(const std::string&)>& log = {});

// Reads corpus.json of a prepared directory back (throws if absent/malformed).
PreparedCorpus read_prepared(const std::string& dir);

}  // namespace lockstep::data
