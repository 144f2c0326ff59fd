// Training a byte-level BPE vocabulary on a corpus.
//
// The corpus is pre-tokenized (GPT-2 or cl100k regex) into pieces; pieces are
// counted; each piece starts as its bytes (ids 0..255 = byte values). Then,
// until the vocabulary is full: count every adjacent pair of symbols over all
// pieces (weighted by the piece's count), take the most frequent pair — ties
// go to the smallest (left id, right id) — and replace its occurrences in
// every piece, left to right, by a new symbol with id 256, 257, ... Merges
// whose result is a byte string that is already a token reuse that token's
// id. Special tokens follow the merges. The result depends on nothing but the
// corpus and the options.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "lockstep/tok/bpe.hpp"

namespace lockstep::tok {

struct BpeTrainOptions {
  std::int32_t vocab_size = 4096;  // total, including the 256 bytes and the specials
  PreTokenizer pre = PreTokenizer::kCl100k;
  std::vector<std::string> specials = {"<|endoftext|>"};  // ids after the merges; the first is BOS and EOS
  std::uint64_t min_count = 2;  // stop when the best pair occurs fewer times
  std::string name = "bpe:trained";
};

struct BpeTrainStats {
  std::uint64_t pieces = 0;         // pre-tokenized pieces in the corpus
  std::uint64_t unique_pieces = 0;
  std::uint64_t merges = 0;
  std::uint64_t tokens_after = 0;   // tokens the corpus is, after all merges
};

// documents are pre-tokenized separately (no piece spans two of them).
BpeTokenizer train_bpe(std::span<const std::string_view> documents, const BpeTrainOptions& opt,
                       BpeTrainStats* stats = nullptr);
BpeTokenizer train_bpe(std::string_view corpus, const BpeTrainOptions& opt, BpeTrainStats* stats = nullptr);

// The same rule, written plainly: recount every pair after every merge
// (O(merges x corpus)). Returns the merges as (left, right) ids; for tests.
std::vector<std::pair<std::int32_t, std::int32_t>> train_bpe_merges_reference(
    std::span<const std::string_view> documents, const BpeTrainOptions& opt);

}  // namespace lockstep::tok
