// Byte-level BPE: a vocabulary of byte strings, a priority for each merge of
// two adjacent tokens, and a pre-tokenizer that cuts text into pieces.
//
// Encoding a piece (the rule of GPT-2's encoder.py, tiktoken and Hugging Face
// tokenizers alike): start from one token per byte; repeatedly merge the
// adjacent pair whose merge has the lowest priority value, the leftmost such
// pair on ties; stop when no adjacent pair is a merge.
//   - merges lists (vocab.bpe, tokenizer.json, GGUF): priority = line index;
//   - rank files (tiktoken): a pair (a, b) merges when the bytes a+b are a
//     token, with priority = that token's rank.
// With ignore_merges (tiktoken; LLaMA-3's tokenizer.json) a piece that is a
// token as a whole is emitted directly.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "lockstep/tok/pretokenize.hpp"
#include "lockstep/tok/regex_split.hpp"
#include "lockstep/tok/tokenizer.hpp"

namespace lockstep::tok {

struct BpeMerge {
  std::int32_t left, right, result;
  std::uint32_t priority;  // lower merges first
};

struct BpeOptions {
  std::string name = "bpe";
  PreTokenizer pre = PreTokenizer::kGpt2;
  // When set, these regexes split the text (the general path) and `pre` is
  // not used.
  std::shared_ptr<const RegexSplitter> regex;
  bool ignore_merges = false;     // a piece that is a token is emitted whole
  bool add_prefix_space = false;  // HF ByteLevel(add_prefix_space): " " before text not starting with one
};

class BpeTokenizer final : public Tokenizer {
 public:
  // tokens[id] = the token's bytes ("" with present[id] false for an
  // unassigned id); specials are listed separately and must name ids whose
  // tokens[] hold their text. Every single byte must be a token. merges name
  // token ids; a merge's result must be the concatenation of its two sides.
  // Throws std::invalid_argument on an inconsistent vocabulary.
  BpeTokenizer(std::vector<std::string> tokens, std::vector<bool> present,
               std::vector<BpeMerge> merges, std::vector<SpecialToken> specials,
               std::optional<std::int32_t> bos, std::optional<std::int32_t> eos, BpeOptions opt);

  std::string name() const override { return opt_.name; }
  std::int32_t vocab_size() const override { return static_cast<std::int32_t>(tokens_.size()); }
  std::vector<std::int32_t> encode(std::string_view text) const override;
  std::string decode(std::span<const std::int32_t> ids) const override;

  // One pre-tokenized piece to ids (appended to out).
  void encode_piece(std::string_view piece, std::vector<std::int32_t>& out) const;
  // The pre-tokenizer's pieces of text (appended to out).
  void pre_tokenize(std::string_view text, std::vector<std::string_view>& out) const;

  const BpeOptions& options() const { return opt_; }
  const std::vector<std::string>& tokens() const { return tokens_; }
  bool is_token(std::int32_t id) const {
    return id >= 0 && id < vocab_size() && is_token_[static_cast<std::size_t>(id)];
  }
  bool is_special(std::int32_t id) const;
  const std::vector<BpeMerge>& merges() const { return merges_; }
  // The id of a normal (non-special) token with these bytes, or -1.
  std::int32_t find(std::string_view bytes) const;

  // The two merge loops, exposed for tests. Both rewrite ids in place to the
  // merged result and must agree: merge_simple is the plain reference (scan
  // every pair for the lowest priority; O(n^2)); merge_heap does the same with
  // a priority queue over a linked list (O(n log n)), used for long pieces.
  void merge_simple(std::vector<std::int32_t>& ids) const;
  void merge_heap(std::vector<std::int32_t>& ids) const;

 private:
  static std::uint64_t key(std::int32_t a, std::int32_t b) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) | static_cast<std::uint32_t>(b);
  }
  const BpeMerge* find_merge(std::int32_t a, std::int32_t b) const {
    const auto it = merge_index_.find(key(a, b));
    return it == merge_index_.end() ? nullptr : &merges_[it->second];
  }

  std::vector<std::string> tokens_;
  std::vector<bool> is_token_;
  std::vector<bool> is_special_;
  std::vector<BpeMerge> merges_;
  std::unordered_map<std::uint64_t, std::uint32_t> merge_index_;  // (left,right) -> merges_ index
  TextIndex by_bytes_;                                            // normal tokens
  std::int32_t byte_token_[256];
  BpeOptions opt_;
};

// ---------------------------------------------------------------------------
// GPT-2's byte-level alphabet: vocab files spell each byte as one printable
// code point ('Ġ' for a space). byte_level_encode maps bytes to that text;
// byte_level_decode maps it back and returns false on a character outside the
// alphabet.
std::string byte_level_encode(std::string_view bytes);
bool byte_level_decode(std::string_view text, std::string& bytes);

// ---------------------------------------------------------------------------
// Loaders. Each throws std::runtime_error naming the file and the line or
// byte offset of the first problem. The parse_* forms read from memory
// (`source` names it in messages).

// tiktoken rank file: one "base64(token bytes) rank" per line, each rank and
// each token once; ranks may leave holes. Specials take their given ids (in a
// hole or above the ranks, never on a rank). `regex`, when given, splits the
// text instead of `pre`.
BpeTokenizer parse_tiktoken(std::string_view data, std::string_view source, PreTokenizer pre,
                            std::vector<SpecialToken> specials, std::string name,
                            std::shared_ptr<const RegexSplitter> regex = nullptr);
BpeTokenizer load_tiktoken(const std::filesystem::path& path, PreTokenizer pre,
                           std::vector<SpecialToken> specials, std::string name,
                           std::shared_ptr<const RegexSplitter> regex = nullptr);
// OpenAI's encodings, with their special tokens and pre-tokenizers.
BpeTokenizer load_r50k_base(const std::filesystem::path& rank_file);
BpeTokenizer load_p50k_base(const std::filesystem::path& rank_file);  // hole at 50256
BpeTokenizer load_cl100k_base(const std::filesystem::path& rank_file);
BpeTokenizer load_o200k_base(const std::filesystem::path& rank_file);  // o200k's regex (PCRE2)
// One of the four above by its tiktoken name; throws std::runtime_error
// listing the names for another.
BpeTokenizer load_openai_encoding(const std::filesystem::path& rank_file, std::string_view encoding);

// GPT-2's encoder.json (byte-level token text -> id) + vocab.bpe (merges).
BpeTokenizer parse_gpt2(std::string_view encoder_json, std::string_view vocab_bpe, std::string_view source);
BpeTokenizer load_gpt2(const std::filesystem::path& encoder_json, const std::filesystem::path& vocab_bpe);

// Hugging Face tokenizer.json with a byte-level BPE model (ByteLevel
// pre-tokenizer, or Split on the GPT-2 / cl100k regex then ByteLevel).
BpeTokenizer parse_hf_tokenizer_json(std::string_view json, std::string_view source);
BpeTokenizer load_hf_tokenizer_json(const std::filesystem::path& path);
// Writes tok as a tokenizer.json that Hugging Face tokenizers loads and
// encodes identically (the format lockstep saves trained vocabularies in).
std::string to_hf_tokenizer_json(const BpeTokenizer& tok);
void save_hf_tokenizer_json(const BpeTokenizer& tok, const std::filesystem::path& path);

// The whole file as bytes; throws std::runtime_error naming it if unreadable.
std::string read_file(const std::filesystem::path& path);

}  // namespace lockstep::tok
