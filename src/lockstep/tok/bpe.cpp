#include "lockstep/tok/bpe.hpp"

#include <queue>
#include <stdexcept>

namespace lockstep::tok {

namespace {
[[noreturn]] void bad(const std::string& what) { throw std::invalid_argument("BpeTokenizer: " + what); }
}  // namespace

BpeTokenizer::BpeTokenizer(std::vector<std::string> tokens, std::vector<bool> present,
                           std::vector<BpeMerge> merges, std::vector<SpecialToken> specials,
                           std::optional<std::int32_t> bos, std::optional<std::int32_t> eos,
                           BpeOptions opt)
    : tokens_(std::move(tokens)), is_token_(std::move(present)), merges_(std::move(merges)),
      opt_(std::move(opt)) {
  if (tokens_.size() != is_token_.size()) bad("tokens and is_token differ in length");
  if (tokens_.size() > 0x7FFFFFFFu) bad("too many tokens");
  is_special_.assign(tokens_.size(), false);
  for (const SpecialToken& s : specials) {
    if (!is_token(s.id) || tokens_[static_cast<std::size_t>(s.id)] != s.text || s.text.empty()) {
      bad("special token '" + s.text + "' (id " + std::to_string(s.id) + ") is not in the vocabulary");
    }
    is_special_[static_cast<std::size_t>(s.id)] = true;
  }
  specials_ = std::move(specials);
  for (const auto& id : {bos, eos}) {
    if (id && !is_token(*id)) bad("bos/eos id " + std::to_string(*id) + " is not a token");
  }
  bos_ = bos;
  eos_ = eos;
  by_bytes_.reserve(tokens_.size());
  for (std::size_t id = 0; id < tokens_.size(); ++id) {
    if (!is_token_[id] || is_special_[id]) continue;
    if (tokens_[id].empty()) bad("token " + std::to_string(id) + " is empty");
    by_bytes_.emplace(tokens_[id], static_cast<std::int32_t>(id));  // first id wins
  }
  for (int b = 0; b < 256; ++b) {
    const char c = static_cast<char>(b);
    byte_token_[b] = find(std::string_view(&c, 1));
    if (byte_token_[b] < 0) bad("byte " + std::to_string(b) + " has no token (byte-level BPE needs all 256)");
  }
  merge_index_.reserve(merges_.size());
  for (std::size_t k = 0; k < merges_.size(); ++k) {
    const BpeMerge& m = merges_[k];
    for (const std::int32_t id : {m.left, m.right, m.result}) {
      if (!is_token(id) || is_special_[static_cast<std::size_t>(id)]) {
        bad("merge " + std::to_string(k) + " names id " + std::to_string(id) + ", not a normal token");
      }
    }
    const auto& t = tokens_;
    if (t[static_cast<std::size_t>(m.result)] !=
        t[static_cast<std::size_t>(m.left)] + t[static_cast<std::size_t>(m.right)]) {
      bad("merge " + std::to_string(k) + ": result is not the concatenation of its sides");
    }
    // A repeated pair: the later line wins, as in HF tokenizers and GPT-2's
    // encoder.py (both build a map from the list in order).
    merge_index_[key(m.left, m.right)] = static_cast<std::uint32_t>(k);
  }
}

bool BpeTokenizer::is_special(std::int32_t id) const {
  return is_token(id) && is_special_[static_cast<std::size_t>(id)];
}

std::int32_t BpeTokenizer::find(std::string_view bytes) const {
  const auto it = by_bytes_.find(bytes);
  return it == by_bytes_.end() ? -1 : it->second;
}

void BpeTokenizer::merge_simple(std::vector<std::int32_t>& ids) const {
  while (ids.size() >= 2) {
    const BpeMerge* best = nullptr;
    std::size_t at = 0;
    for (std::size_t i = 0; i + 1 < ids.size(); ++i) {
      const BpeMerge* m = find_merge(ids[i], ids[i + 1]);
      if (m != nullptr && (best == nullptr || m->priority < best->priority)) best = m, at = i;
    }
    if (best == nullptr) return;
    ids[at] = best->result;
    ids.erase(ids.begin() + static_cast<std::ptrdiff_t>(at) + 1);
  }
}

void BpeTokenizer::merge_heap(std::vector<std::int32_t>& ids) const {
  // Symbols form a linked list over their starting positions; positions only
  // ever lose symbols (the right side of a merge), so position order is text
  // order and "leftmost" is "smallest left position".
  const std::int32_t n = static_cast<std::int32_t>(ids.size());
  std::vector<std::int32_t> next(ids.size()), prev(ids.size());
  for (std::int32_t i = 0; i < n; ++i) next[static_cast<std::size_t>(i)] = i + 1, prev[static_cast<std::size_t>(i)] = i - 1;
  struct Cand {
    std::uint32_t priority;
    std::int32_t left, right, left_id, right_id, result;
    bool operator>(const Cand& o) const {
      return priority != o.priority ? priority > o.priority : left > o.left;
    }
  };
  std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> queue;
  const auto at = [&](std::int32_t i) -> std::int32_t& { return ids[static_cast<std::size_t>(i)]; };
  const auto consider = [&](std::int32_t l, std::int32_t r) {
    if (l < 0 || r >= n) return;
    if (const BpeMerge* m = find_merge(at(l), at(r))) queue.push({m->priority, l, r, at(l), at(r), m->result});
  };
  for (std::int32_t i = 0; i + 1 < n; ++i) consider(i, i + 1);
  constexpr std::int32_t kDead = -1;
  while (!queue.empty()) {
    const Cand c = queue.top();
    queue.pop();
    // Stale when either side was merged away or changed since it was queued.
    if (at(c.left) != c.left_id || next[static_cast<std::size_t>(c.left)] != c.right ||
        at(c.right) != c.right_id) {
      continue;
    }
    at(c.left) = c.result;
    at(c.right) = kDead;
    const std::int32_t after = next[static_cast<std::size_t>(c.right)];
    next[static_cast<std::size_t>(c.left)] = after;
    if (after < n) prev[static_cast<std::size_t>(after)] = c.left;
    consider(prev[static_cast<std::size_t>(c.left)], c.left);
    consider(c.left, after);
  }
  std::size_t w = 0;
  for (std::int32_t i = 0; i < n; i = next[static_cast<std::size_t>(i)]) ids[w++] = at(i);
  ids.resize(w);
}

void BpeTokenizer::encode_piece(std::string_view piece, std::vector<std::int32_t>& out) const {
  if (piece.size() == 1) {
    out.push_back(byte_token_[static_cast<std::uint8_t>(piece[0])]);
    return;
  }
  if (opt_.ignore_merges) {
    if (const std::int32_t id = find(piece); id >= 0) {
      out.push_back(id);
      return;
    }
  }
  std::vector<std::int32_t> ids(piece.size());
  for (std::size_t i = 0; i < piece.size(); ++i) ids[i] = byte_token_[static_cast<std::uint8_t>(piece[i])];
  // The plain loop is faster on the short pieces that make up ordinary text;
  // the heap keeps a long piece (a run of symbols, a long number) from being
  // quadratic.
  constexpr std::size_t kHeapFrom = 48;
  if (ids.size() < kHeapFrom) {
    merge_simple(ids);
  } else {
    merge_heap(ids);
  }
  out.insert(out.end(), ids.begin(), ids.end());
}

void BpeTokenizer::pre_tokenize(std::string_view text, std::vector<std::string_view>& out) const {
  if (opt_.regex) {
    opt_.regex->split(text, out);
  } else {
    tok::pre_tokenize(opt_.pre, text, out);
  }
}

std::vector<std::int32_t> BpeTokenizer::encode(std::string_view text) const {
  std::string prefixed;
  if (opt_.add_prefix_space && !text.empty() && text[0] != ' ') {
    prefixed.resize(text.size() + 1);
    prefixed[0] = ' ';
    text.copy(prefixed.data() + 1, text.size());
    text = prefixed;
  }
  std::vector<std::int32_t> out;
  out.reserve(text.size() / 3 + 1);
  // Repeated pieces (common words) are encoded once per call: the cache maps a
  // piece to where its ids first went in `out`.
  std::unordered_map<std::string_view, std::pair<std::size_t, std::size_t>> cache;
  const auto piece_ids = [&](std::string_view piece) {
    if (piece.size() == 1) {
      out.push_back(byte_token_[static_cast<std::uint8_t>(piece[0])]);
      return;
    }
    const auto [it, fresh] = cache.try_emplace(piece, out.size(), 0);
    if (fresh) {
      encode_piece(piece, out);
      it->second.second = out.size() - it->second.first;
    } else {
      const auto [from, count] = it->second;
      for (std::size_t k = 0; k < count; ++k) {
        const std::int32_t id = out[from + k];  // copy: push_back may reallocate
        out.push_back(id);
      }
    }
  };
  if (opt_.regex) {
    std::vector<std::string_view> pieces;
    opt_.regex->split(text, pieces);
    for (const std::string_view piece : pieces) piece_ids(piece);
    return out;
  }
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t len = pre_token_length(opt_.pre, text, i);
    piece_ids(text.substr(i, len));
    i += len;
  }
  return out;
}

std::string BpeTokenizer::decode(std::span<const std::int32_t> ids) const {
  std::string out;
  for (const std::int32_t id : ids) {
    if (!is_token(id)) {
      throw std::out_of_range(opt_.name + ": decode: id " + std::to_string(id) + " is not a token");
    }
    out += tokens_[static_cast<std::size_t>(id)];
  }
  return out;
}

}  // namespace lockstep::tok
