#include "lockstep/tok/tokenizer.hpp"

#include <stdexcept>
#include <string>

namespace lockstep::tok {

std::vector<std::int32_t> Tokenizer::encode_with_specials(std::string_view text) const {
  std::vector<std::int32_t> out;
  split_specials(
      text, specials_,
      [&](std::string_view segment) {
        const std::vector<std::int32_t> ids = encode(segment);
        out.insert(out.end(), ids.begin(), ids.end());
      },
      [&](std::int32_t id) { out.push_back(id); });
  return out;
}

std::vector<std::int32_t> Tokenizer::encode_prompt(std::string_view text) const {
  std::vector<std::int32_t> out;
  if (add_bos()) out.push_back(*bos_);
  const std::vector<std::int32_t> ids = encode_with_specials(text);
  out.insert(out.end(), ids.begin(), ids.end());
  return out;
}

ByteTokenizer::ByteTokenizer(std::vector<std::string> special_texts,
                             std::optional<std::size_t> bos_index,
                             std::optional<std::size_t> eos_index) {
  for (std::size_t k = 0; k < special_texts.size(); ++k) {
    specials_.push_back({std::move(special_texts[k]), static_cast<std::int32_t>(256 + k)});
  }
  const auto id_of = [&](std::optional<std::size_t> k) -> std::optional<std::int32_t> {
    if (!k) return std::nullopt;
    if (*k >= specials_.size()) throw std::invalid_argument("ByteTokenizer: bos/eos index out of range");
    return static_cast<std::int32_t>(256 + *k);
  };
  bos_ = id_of(bos_index);
  eos_ = id_of(eos_index);
}

std::int32_t ByteTokenizer::vocab_size() const {
  return static_cast<std::int32_t>(256 + specials_.size());
}

std::vector<std::int32_t> ByteTokenizer::encode(std::string_view text) const {
  std::vector<std::int32_t> ids(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) ids[i] = static_cast<std::uint8_t>(text[i]);
  return ids;
}

std::string ByteTokenizer::decode(std::span<const std::int32_t> ids) const {
  std::string out;
  out.reserve(ids.size());
  for (const std::int32_t id : ids) {
    if (id >= 0 && id < 256) {
      out.push_back(static_cast<char>(id));
    } else if (id >= 256 && id < vocab_size()) {
      out += specials_[static_cast<std::size_t>(id - 256)].text;
    } else {
      throw std::out_of_range("ByteTokenizer::decode: id " + std::to_string(id) + " is not a token");
    }
  }
  return out;
}

}  // namespace lockstep::tok
