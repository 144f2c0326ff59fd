// The tokenizer interface, and the simplest tokenizer: one token per byte.
//
// Every tokenizer maps text (arbitrary bytes) to token ids and back. encode()
// treats its input as ordinary text: a special token's text inside it (say
// "<|endoftext|>") is encoded as the characters it is made of, so training
// data cannot inject control tokens. encode_with_specials() recognises the
// special tokens' texts first and emits their ids.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace lockstep::tok {

// A map from token text to id that owns its keys (so a tokenizer holding one
// stays valid when it is moved: views into its own strings would not, for
// short strings live inside the string object) and is searched by
// string_view.
struct TextHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using TextIndex = std::unordered_map<std::string, std::int32_t, TextHash, std::equal_to<>>;

struct SpecialToken {
  std::string text;
  std::int32_t id;
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Short description, e.g. "bpe:cl100k_base" or "bytes".
  virtual std::string name() const = 0;
  // One more than the largest id (ids below it may be unassigned holes).
  virtual std::int32_t vocab_size() const = 0;
  // Ordinary text to ids.
  virtual std::vector<std::int32_t> encode(std::string_view text) const = 0;
  // Ids to bytes. Throws std::out_of_range for an id that is not a token.
  virtual std::string decode(std::span<const std::int32_t> ids) const = 0;

  // Text in which special tokens' texts are recognised (longest first,
  // leftmost): the text between them goes through encode().
  virtual std::vector<std::int32_t> encode_with_specials(std::string_view text) const;

  // Whether the model expects BOS before a prompt (GGUF
  // tokenizer.ggml.add_bos_token, a tokenizer.json TemplateProcessing that
  // starts with BOS, llama.cpp's default for the pre-tokenizer's name).
  bool add_bos() const { return add_bos_ && bos_.has_value(); }
  void set_add_bos(bool on) { add_bos_ = on; }
  // A prompt as the model sees it: BOS first when add_bos(), then the text
  // with its special tokens recognised.
  std::vector<std::int32_t> encode_prompt(std::string_view text) const;

  std::optional<std::int32_t> bos() const { return bos_; }
  std::optional<std::int32_t> eos() const { return eos_; }
  const std::vector<SpecialToken>& special_tokens() const { return specials_; }

 protected:
  std::optional<std::int32_t> bos_, eos_;
  bool add_bos_ = false;
  std::vector<SpecialToken> specials_;
};

// Splits text at special tokens' texts (longest match first at each
// position, leftmost occurrence first); calls text_fn(segment) for the text
// between them and special_fn(id) for each special token.
template <class TextFn, class SpecialFn>
void split_specials(std::string_view text, const std::vector<SpecialToken>& specials,
                    TextFn&& text_fn, SpecialFn&& special_fn);

// Token i is byte i (0..255); optional special tokens follow at 256, 257, ...
// decode(encode(x)) == x for every byte string x.
class ByteTokenizer final : public Tokenizer {
 public:
  // special_texts become ids 256, 257, ...; "<|endoftext|>"-like names are
  // not interpreted: set bos/eos with the indices into special_texts.
  explicit ByteTokenizer(std::vector<std::string> special_texts = {},
                         std::optional<std::size_t> bos_index = std::nullopt,
                         std::optional<std::size_t> eos_index = std::nullopt);
  std::string name() const override { return "bytes"; }
  std::int32_t vocab_size() const override;
  std::vector<std::int32_t> encode(std::string_view text) const override;
  std::string decode(std::span<const std::int32_t> ids) const override;
};

// ---------------------------------------------------------------------------

template <class TextFn, class SpecialFn>
void split_specials(std::string_view text, const std::vector<SpecialToken>& specials,
                    TextFn&& text_fn, SpecialFn&& special_fn) {
  bool first_byte[256] = {};  // only positions starting like a special are tried
  for (const SpecialToken& s : specials) {
    if (!s.text.empty()) first_byte[static_cast<unsigned char>(s.text[0])] = true;
  }
  std::size_t start = 0, i = 0;
  while (i < text.size()) {
    if (!first_byte[static_cast<unsigned char>(text[i])]) {
      ++i;
      continue;
    }
    const SpecialToken* best = nullptr;
    for (const SpecialToken& s : specials) {
      if (!s.text.empty() && text.substr(i, s.text.size()) == s.text &&
          (best == nullptr || s.text.size() > best->text.size())) {
        best = &s;
      }
    }
    if (best == nullptr) {
      ++i;
      continue;
    }
    if (i > start) text_fn(text.substr(start, i - start));
    special_fn(best->id);
    i += best->text.size();
    start = i;
  }
  if (start < text.size()) text_fn(text.substr(start));
}

}  // namespace lockstep::tok
