// SentencePiece-style BPE with scores (LLaMA-1/2 "llama" vocabularies in
// GGUF), encoded the way llama.cpp's llm_tokenizer_spm does:
//   - a space is prepended to the text (add_space_prefix) and every ' '
//     becomes U+2581 "▁";
//   - the text starts as one symbol per UTF-8 character; repeatedly the
//     adjacent pair whose concatenation is a vocabulary piece with the
//     highest score is merged (the leftmost on ties);
//   - a final symbol that is not a piece falls back to byte tokens <0xNN>.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "lockstep/tok/tokenizer.hpp"

namespace lockstep::tok {

// llama.cpp's llama_token_type (GGUF tokenizer.ggml.token_type).
enum class TokenType : std::int32_t {
  kUndefined = 0, kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6,
};

class SpmTokenizer final : public Tokenizer {
 public:
  // pieces[id] is the token's text (spaces spelled "▁", bytes "<0xNN>").
  // Throws std::invalid_argument on an inconsistent vocabulary.
  SpmTokenizer(std::vector<std::string> pieces, std::vector<float> scores, std::vector<TokenType> types,
               std::optional<std::int32_t> bos, std::optional<std::int32_t> eos,
               std::optional<std::int32_t> unk, bool add_space_prefix, std::string name);

  std::string name() const override { return name_; }
  std::int32_t vocab_size() const override { return static_cast<std::int32_t>(pieces_.size()); }
  // Plain text: no BOS (add_special_tokens=False, as the llama.cpp vocab tests).
  std::vector<std::int32_t> encode(std::string_view text) const override;
  // As llama.cpp with parse_special: control/user-defined/unknown tokens'
  // texts are recognised; a text segment that follows one (or starts the
  // input) gets the space prefix.
  std::vector<std::int32_t> encode_with_specials(std::string_view text) const override;
  // Pieces with "▁" as spaces, byte tokens as their byte, control tokens as
  // their text; the space the prefix added to the first piece is removed.
  // decode(encode(t)) == t for text without a literal "▁".
  std::string decode(std::span<const std::int32_t> ids) const override;

  const std::vector<std::string>& pieces() const { return pieces_; }
  const std::vector<float>& scores() const { return scores_; }

 private:
  void encode_segment(std::string_view text, bool space_prefix, std::vector<std::int32_t>& out) const;
  std::int32_t piece_id(std::string_view text) const;  // mergeable pieces only, or -1

  std::vector<std::string> pieces_;
  std::vector<float> scores_;
  std::vector<TokenType> types_;
  TextIndex by_text_;                                            // normal/user-defined pieces
  std::int32_t byte_token_[256];                                 // -1 when absent
  std::optional<std::int32_t> unk_;
  bool add_space_prefix_;
  std::string name_;
};

}  // namespace lockstep::tok
