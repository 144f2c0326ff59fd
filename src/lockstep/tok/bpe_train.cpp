#include "lockstep/tok/bpe_train.hpp"

#include <algorithm>
#include <map>
#include <queue>
#include <stdexcept>
#include <unordered_map>

namespace lockstep::tok {

namespace {

using Pair = std::pair<std::int32_t, std::int32_t>;

std::uint64_t key_of(std::int32_t a, std::int32_t b) {
  return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) | static_cast<std::uint32_t>(b);
}
Pair pair_of(std::uint64_t k) { return {static_cast<std::int32_t>(k >> 32), static_cast<std::int32_t>(k & 0xFFFFFFFFu)}; }

struct Word {
  std::vector<std::int32_t> syms;
  std::uint64_t count;
};

// Unique pieces with their counts, in first-appearance order (deterministic).
std::vector<Word> count_pieces(std::span<const std::string_view> docs, PreTokenizer pre, BpeTrainStats& st) {
  std::unordered_map<std::string_view, std::size_t> index;
  std::vector<Word> words;
  for (const std::string_view doc : docs) {
    for (std::size_t i = 0; i < doc.size();) {
      const std::size_t n = pre_token_length(pre, doc, i);
      const std::string_view piece = doc.substr(i, n);
      i += n;
      ++st.pieces;
      const auto [it, fresh] = index.try_emplace(piece, words.size());
      if (fresh) {
        Word w{std::vector<std::int32_t>(piece.size()), 0};
        for (std::size_t k = 0; k < piece.size(); ++k) w.syms[k] = static_cast<std::uint8_t>(piece[k]);
        words.push_back(std::move(w));
      }
      ++words[it->second].count;
    }
  }
  st.unique_pieces = words.size();
  return words;
}

// Replaces every occurrence of (a, b), left to right, by c. True if any.
bool merge_word(std::vector<std::int32_t>& s, std::int32_t a, std::int32_t b, std::int32_t c) {
  std::size_t w = 0;
  bool any = false;
  for (std::size_t r = 0; r < s.size();) {
    if (r + 1 < s.size() && s[r] == a && s[r + 1] == b) {
      s[w++] = c;
      r += 2;
      any = true;
    } else {
      s[w++] = s[r++];
    }
  }
  s.resize(w);
  return any;
}

// The vocabulary as it grows: ids -> bytes, bytes -> id.
struct Vocab {
  std::vector<std::string> tokens;
  std::unordered_map<std::string, std::int32_t> by_bytes;
  Vocab() {
    for (int b = 0; b < 256; ++b) add(std::string(1, static_cast<char>(b)));
  }
  std::int32_t add(std::string bytes) {
    const auto id = static_cast<std::int32_t>(tokens.size());
    by_bytes.emplace(bytes, id);
    tokens.push_back(std::move(bytes));
    return id;
  }
  // The id for the merge of a and b: an existing token with those bytes, or a new one.
  std::int32_t merged(std::int32_t a, std::int32_t b) {
    std::string bytes = tokens[static_cast<std::size_t>(a)] + tokens[static_cast<std::size_t>(b)];
    const auto it = by_bytes.find(bytes);
    return it != by_bytes.end() ? it->second : add(std::move(bytes));
  }
};

std::size_t merge_budget(const BpeTrainOptions& opt) {
  const std::int64_t n = static_cast<std::int64_t>(opt.vocab_size) - 256 - static_cast<std::int64_t>(opt.specials.size());
  if (n < 0) throw std::invalid_argument("train_bpe: vocab_size is below 256 + the special tokens");
  return static_cast<std::size_t>(n);
}

BpeTokenizer finish(Vocab& v, const std::vector<Pair>& merge_pairs, const std::vector<std::int32_t>& results,
                    const BpeTrainOptions& opt) {
  std::vector<BpeMerge> merges;
  for (std::size_t k = 0; k < merge_pairs.size(); ++k) {
    merges.push_back({merge_pairs[k].first, merge_pairs[k].second, results[k], static_cast<std::uint32_t>(k)});
  }
  std::vector<SpecialToken> specials;
  for (const std::string& s : opt.specials) {
    if (s.empty()) throw std::invalid_argument("train_bpe: empty special token");
    specials.push_back({s, static_cast<std::int32_t>(v.tokens.size())});
    v.tokens.push_back(s);
  }
  std::vector<bool> is_token(v.tokens.size(), true);
  std::optional<std::int32_t> bos, eos;
  if (!specials.empty()) bos = eos = specials.front().id;
  BpeOptions bo;
  bo.name = opt.name;
  bo.pre = opt.pre;
  return BpeTokenizer(std::move(v.tokens), std::move(is_token), std::move(merges), std::move(specials), bos, eos, bo);
}

}  // namespace

BpeTokenizer train_bpe(std::span<const std::string_view> documents, const BpeTrainOptions& opt, BpeTrainStats* stats) {
  const std::size_t budget = merge_budget(opt);
  BpeTrainStats st;
  std::vector<Word> words = count_pieces(documents, opt.pre, st);
  Vocab v;

  // pair -> weighted count, pair -> words that contain (or contained) it.
  std::unordered_map<std::uint64_t, std::int64_t> count;
  std::unordered_map<std::uint64_t, std::vector<std::uint32_t>> where;
  for (std::uint32_t w = 0; w < words.size(); ++w) {
    const auto& s = words[w].syms;
    for (std::size_t i = 0; i + 1 < s.size(); ++i) {
      const std::uint64_t k = key_of(s[i], s[i + 1]);
      count[k] += static_cast<std::int64_t>(words[w].count);
      auto& list = where[k];
      if (list.empty() || list.back() != w) list.push_back(w);
    }
  }
  // Max-heap on (count, then smallest pair). Entries go stale as counts
  // change; every increase pushes a fresh entry and a stale top is re-pushed
  // with its current count, so the first up-to-date top is the true best.
  struct Entry {
    std::int64_t count;
    std::uint64_t key;
    bool operator<(const Entry& o) const { return count != o.count ? count < o.count : key > o.key; }
  };
  std::priority_queue<Entry> heap;
  {
    std::vector<std::uint64_t> keys;  // push in key order: the heap's content then does not depend on hashing
    keys.reserve(count.size());
    for (const auto& kv : count) keys.push_back(kv.first);
    std::sort(keys.begin(), keys.end());
    for (const std::uint64_t k : keys) heap.push({count[k], k});
  }

  std::vector<Pair> merge_pairs;
  std::vector<std::int32_t> results;
  std::vector<std::uint32_t> seen(words.size(), 0);  // merge stamp per word (dedupes `where` lists)
  std::unordered_map<std::uint64_t, std::int64_t> delta;
  while (merge_pairs.size() < budget && !heap.empty()) {
    const Entry top = heap.top();
    heap.pop();
    const std::int64_t cur = count[top.key];
    if (cur != top.count) {
      if (cur > 0) heap.push({cur, top.key});
      continue;
    }
    if (cur <= 0 || static_cast<std::uint64_t>(cur) < opt.min_count) break;
    const auto [a, b] = pair_of(top.key);
    const std::int32_t c = v.merged(a, b);
    merge_pairs.emplace_back(a, b);
    results.push_back(c);
    const auto stamp = static_cast<std::uint32_t>(merge_pairs.size());
    delta.clear();
    std::vector<std::uint32_t> list = std::move(where[top.key]);
    where.erase(top.key);
    for (const std::uint32_t w : list) {
      if (seen[w] == stamp) continue;
      seen[w] = stamp;
      auto& s = words[w].syms;
      const auto wc = static_cast<std::int64_t>(words[w].count);
      std::vector<std::int32_t> before = s;
      if (!merge_word(s, a, b, c)) continue;  // a stale entry: the word no longer has the pair
      for (std::size_t i = 0; i + 1 < before.size(); ++i) delta[key_of(before[i], before[i + 1])] -= wc;
      for (std::size_t i = 0; i + 1 < s.size(); ++i) {
        const std::uint64_t k = key_of(s[i], s[i + 1]);
        delta[k] += wc;
        if (s[i] == c || s[i + 1] == c) {
          auto& wl = where[k];
          if (wl.empty() || wl.back() != w) wl.push_back(w);
        }
      }
    }
    // Apply the net changes; push entries for pairs that grew (in key order).
    std::vector<std::uint64_t> grown;
    for (const auto& [k, d] : delta) {
      if (d == 0) continue;
      count[k] += d;
      if (d > 0) grown.push_back(k);
    }
    std::sort(grown.begin(), grown.end());
    for (const std::uint64_t k : grown) heap.push({count[k], k});
  }
  st.merges = merge_pairs.size();
  for (const Word& w : words) st.tokens_after += w.count * w.syms.size();
  if (stats) *stats = st;
  return finish(v, merge_pairs, results, opt);
}

BpeTokenizer train_bpe(std::string_view corpus, const BpeTrainOptions& opt, BpeTrainStats* stats) {
  const std::string_view docs[] = {corpus};
  return train_bpe(std::span<const std::string_view>(docs), opt, stats);
}

std::vector<Pair> train_bpe_merges_reference(std::span<const std::string_view> documents, const BpeTrainOptions& opt) {
  const std::size_t budget = merge_budget(opt);
  BpeTrainStats st;
  std::vector<Word> words = count_pieces(documents, opt.pre, st);
  Vocab v;
  std::vector<Pair> merges;
  while (merges.size() < budget) {
    std::map<Pair, std::uint64_t> count;  // ordered: ties resolve to the smallest pair
    for (const Word& w : words) {
      for (std::size_t i = 0; i + 1 < w.syms.size(); ++i) count[{w.syms[i], w.syms[i + 1]}] += w.count;
    }
    const std::pair<const Pair, std::uint64_t>* best = nullptr;
    for (const auto& e : count) {
      if (best == nullptr || e.second > best->second) best = &e;
    }
    if (best == nullptr || best->second < opt.min_count) break;
    const auto [a, b] = best->first;
    const std::int32_t c = v.merged(a, b);
    merges.emplace_back(a, b);
    for (Word& w : words) merge_word(w.syms, a, b, c);
  }
  return merges;
}

}  // namespace lockstep::tok
