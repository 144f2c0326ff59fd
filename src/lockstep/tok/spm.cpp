#include "lockstep/tok/spm.hpp"

#include <queue>
#include <stdexcept>

namespace lockstep::tok {

namespace {
constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581 LOWER ONE EIGHTH BLOCK "▁"

// Bytes of the UTF-8 character a lead byte announces, by its high nibble, as
// llama.cpp's unicode_len_utf8 (a stray continuation byte counts as 1).
std::size_t utf8_len(unsigned char c) {
  static constexpr std::size_t lookup[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return lookup[c >> 4];
}

// The byte a "<0xNN>" piece stands for, or -1.
int byte_piece_value(std::string_view p) {
  const auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  if (p.size() != 6 || p.substr(0, 3) != "<0x" || p[5] != '>' || hex(p[3]) < 0 || hex(p[4]) < 0) return -1;
  return hex(p[3]) * 16 + hex(p[4]);
}
}  // namespace

SpmTokenizer::SpmTokenizer(std::vector<std::string> pieces, std::vector<float> scores,
                           std::vector<TokenType> types, std::optional<std::int32_t> bos,
                           std::optional<std::int32_t> eos, std::optional<std::int32_t> unk,
                           bool add_space_prefix, std::string name)
    : pieces_(std::move(pieces)), scores_(std::move(scores)), types_(std::move(types)), unk_(unk),
      add_space_prefix_(add_space_prefix), name_(std::move(name)) {
  const auto bad = [](const std::string& what) { throw std::invalid_argument("SpmTokenizer: " + what); };
  if (scores_.size() != pieces_.size() || types_.size() != pieces_.size()) bad("pieces, scores and types differ in length");
  if (pieces_.size() > 0x7FFFFFFFu) bad("too many pieces");
  const auto valid = [&](std::optional<std::int32_t> id) {
    return !id || (*id >= 0 && static_cast<std::size_t>(*id) < pieces_.size());
  };
  if (!valid(bos) || !valid(eos) || !valid(unk)) bad("bos/eos/unk id out of range");
  bos_ = bos;
  eos_ = eos;
  for (int b = 0; b < 256; ++b) byte_token_[b] = -1;
  for (std::size_t id = 0; id < pieces_.size(); ++id) {
    const std::string& p = pieces_[id];
    const auto sid = static_cast<std::int32_t>(id);
    switch (types_[id]) {
      case TokenType::kByte: {
        const int v = byte_piece_value(p);
        if (v < 0) bad("byte token " + std::to_string(id) + " is not <0xNN>");
        byte_token_[v] = sid;
        break;
      }
      case TokenType::kControl: case TokenType::kUnknown: case TokenType::kUserDefined:
        if (!p.empty()) specials_.push_back({p, sid});
        if (types_[id] == TokenType::kUserDefined) by_text_.emplace(p, sid);
        break;
      case TokenType::kNormal: case TokenType::kUndefined: case TokenType::kUnused:
        if (p.empty()) bad("piece " + std::to_string(id) + " is empty");
        by_text_.emplace(p, sid);  // the first of equal pieces wins
        break;
      default:
        bad("piece " + std::to_string(id) + " has an unknown token type");
    }
  }
}

std::int32_t SpmTokenizer::piece_id(std::string_view text) const {
  const auto it = by_text_.find(text);
  return it == by_text_.end() ? -1 : it->second;
}

void SpmTokenizer::encode_segment(std::string_view raw, bool space_prefix, std::vector<std::int32_t>& out) const {
  std::string text;
  text.reserve(raw.size() + 8);
  if (space_prefix) text += kSpace;
  for (const char c : raw) {
    if (c == ' ') {
      text += kSpace;
    } else {
      text.push_back(c);
    }
  }
  // Symbols: [start, start+len) of text, in a linked list.
  struct Sym {
    std::size_t start, len;
    std::int32_t prev, next;
  };
  std::vector<Sym> sym;
  for (std::size_t off = 0; off < text.size();) {
    const std::size_t len = std::min(utf8_len(static_cast<unsigned char>(text[off])), text.size() - off);
    const auto i = static_cast<std::int32_t>(sym.size());
    sym.push_back({off, len, i - 1, off + len == text.size() ? -1 : i + 1});
    off += len;
  }
  struct Bigram {
    float score;
    std::int32_t left, right;
    std::size_t size;
    // Highest score first, then leftmost.
    bool operator<(const Bigram& o) const { return score != o.score ? score < o.score : left > o.left; }
  };
  std::priority_queue<Bigram> queue;
  const auto try_add = [&](std::int32_t l, std::int32_t r) {
    if (l < 0 || r < 0) return;
    const Sym& a = sym[static_cast<std::size_t>(l)];
    const Sym& b = sym[static_cast<std::size_t>(r)];
    const std::int32_t id = piece_id(std::string_view(text).substr(a.start, a.len + b.len));
    if (id < 0) return;
    queue.push({scores_[static_cast<std::size_t>(id)], l, r, a.len + b.len});
  };
  for (std::size_t i = 1; i < sym.size(); ++i) try_add(static_cast<std::int32_t>(i - 1), static_cast<std::int32_t>(i));
  while (!queue.empty()) {
    const Bigram bg = queue.top();
    queue.pop();
    Sym& l = sym[static_cast<std::size_t>(bg.left)];
    Sym& r = sym[static_cast<std::size_t>(bg.right)];
    // Stale: a side was merged away or grew since this pair was queued.
    if (l.len == 0 || r.len == 0 || l.len + r.len != bg.size) continue;
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) sym[static_cast<std::size_t>(r.next)].prev = bg.left;
    try_add(l.prev, bg.left);
    try_add(bg.left, l.next);
  }
  for (std::int32_t i = sym.empty() ? -1 : 0; i != -1; i = sym[static_cast<std::size_t>(i)].next) {
    const Sym& s = sym[static_cast<std::size_t>(i)];
    const std::string_view piece = std::string_view(text).substr(s.start, s.len);
    if (const std::int32_t id = piece_id(piece); id >= 0) {
      out.push_back(id);
      continue;
    }
    // Not a piece (only single characters can be): its bytes.
    for (const char c : piece) {
      std::int32_t id = byte_token_[static_cast<unsigned char>(c)];
      if (id < 0) id = unk_.value_or(-1);
      if (id < 0) throw std::runtime_error(name_ + ": byte has no token and there is no <unk>");
      out.push_back(id);
    }
  }
}

std::vector<std::int32_t> SpmTokenizer::encode(std::string_view text) const {
  std::vector<std::int32_t> out;
  if (!text.empty()) encode_segment(text, add_space_prefix_, out);
  return out;
}

std::vector<std::int32_t> SpmTokenizer::encode_with_specials(std::string_view text) const {
  std::vector<std::int32_t> out;
  bool prev_special = true;  // the start of the input counts as "after a special"
  split_specials(
      text, specials_,
      [&](std::string_view segment) {
        encode_segment(segment, add_space_prefix_ && prev_special, out);
        prev_special = false;
      },
      [&](std::int32_t id) {
        out.push_back(id);
        prev_special = true;
      });
  return out;
}

std::string SpmTokenizer::decode(std::span<const std::int32_t> ids) const {
  std::string out;
  for (std::size_t k = 0; k < ids.size(); ++k) {
    const std::int32_t id = ids[k];
    if (id < 0 || id >= vocab_size()) {
      throw std::out_of_range(name_ + ": decode: id " + std::to_string(id) + " is not a token");
    }
    const std::string& p = pieces_[static_cast<std::size_t>(id)];
    const TokenType t = types_[static_cast<std::size_t>(id)];
    if (t == TokenType::kByte) {
      out.push_back(static_cast<char>(byte_piece_value(p)));
      continue;
    }
    std::string text;
    for (std::size_t i = 0; i < p.size();) {
      if (p.compare(i, kSpace.size(), kSpace) == 0) {
        text.push_back(' ');
        i += kSpace.size();
      } else {
        text.push_back(p[i++]);
      }
    }
    // The prefix space encode() added is not part of the text.
    if (k == 0 && add_space_prefix_ && !text.empty() && text[0] == ' ' &&
        (t == TokenType::kNormal || t == TokenType::kUndefined || t == TokenType::kUnused)) {
      text.erase(0, 1);
    }
    out += text;
  }
  return out;
}

}  // namespace lockstep::tok
