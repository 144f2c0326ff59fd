#include "lockstep/tok/gguf_vocab.hpp"

#include <stdexcept>
#include <unordered_map>

#include "lockstep/tok/bpe.hpp"
#include "lockstep/tok/spm.hpp"
#include "lockstep/tok/unicode.hpp"

namespace lockstep::tok {

namespace {

[[noreturn]] void fail(const io::GgufFile& g, const std::string& key, const std::string& what) {
  throw std::runtime_error(g.source + ": " + key + ": " + what);
}

std::optional<std::int32_t> id_key(const io::GgufFile& g, const char* key, std::size_t n) {
  const io::GgufValue* v = g.find(key);
  if (v == nullptr) return std::nullopt;
  const std::int64_t id = v->as_int();
  if (id < 0 || static_cast<std::uint64_t>(id) >= n) return std::nullopt;  // llama.cpp: -1 / absent
  return static_cast<std::int32_t>(id);
}

bool flag_key(const io::GgufFile& g, const char* key, bool dflt) {
  const io::GgufValue* v = g.find(key);
  return v == nullptr ? dflt : v->as_bool();
}

std::vector<TokenType> token_types(const io::GgufFile& g, std::size_t n) {
  std::vector<TokenType> types(n, TokenType::kNormal);
  if (const io::GgufValue* v = g.find("tokenizer.ggml.token_type")) {
    const std::vector<std::int64_t> t = v->ints();
    if (t.size() != n) fail(g, "tokenizer.ggml.token_type", "length differs from tokenizer.ggml.tokens");
    for (std::size_t i = 0; i < n; ++i) {
      if (t[i] < 0 || t[i] > 6) fail(g, "tokenizer.ggml.token_type", "invalid type " + std::to_string(t[i]));
      types[i] = static_cast<TokenType>(t[i]);
    }
  }
  return types;
}

std::unique_ptr<Tokenizer> gpt2_from_gguf(const io::GgufFile& g, const std::vector<std::string>& texts) {
  const std::size_t n = texts.size();
  const std::vector<TokenType> types = token_types(g, n);
  BpeOptions opt;
  // llama.cpp reads a missing name as "default" (with a warning).
  const std::string pre = g.find("tokenizer.ggml.pre") ? g.at("tokenizer.ggml.pre").as_string() : "default";
  const std::optional<NamedPreTokenizer> named = pre_tokenizer_by_name(pre);
  if (!named) {
    std::string known;
    for (const std::string& name : pre_tokenizer_names()) known += (known.empty() ? "" : ", ") + name;
    fail(g, "tokenizer.ggml.pre", "unknown pre-tokenizer '" + unicode::escape_bytes(pre) + "' (known: " + known + ")");
  }
  opt.pre = named->hand_written;
  if (!named->regexes.empty()) {
    try {
      opt.regex = std::make_shared<const RegexSplitter>(named->regexes);
    } catch (const std::invalid_argument& e) {
      fail(g, "tokenizer.ggml.pre", e.what());
    }
  }
  opt.ignore_merges = named->ignore_merges;
  opt.name = "gguf:" + pre;
  std::vector<std::string> tokens(n);
  std::vector<bool> is_token(n, true);
  std::vector<SpecialToken> specials;
  std::unordered_map<std::string, std::int32_t> by_text;  // byte-level text of normal tokens -> id
  for (std::size_t id = 0; id < n; ++id) {
    const auto sid = static_cast<std::int32_t>(id);
    switch (types[id]) {
      case TokenType::kControl: case TokenType::kUserDefined: case TokenType::kUnknown:
        if (texts[id].empty()) fail(g, "tokenizer.ggml.tokens", "special token " + std::to_string(id) + " is empty");
        tokens[id] = texts[id];
        specials.push_back({texts[id], sid});
        break;
      case TokenType::kByte:
        fail(g, "tokenizer.ggml.token_type", "byte tokens in a byte-level BPE vocabulary");
      default:
        if (!byte_level_decode(texts[id], tokens[id]) || tokens[id].empty()) {
          fail(g, "tokenizer.ggml.tokens", "token " + std::to_string(id) + " is not byte-level text");
        }
        by_text.emplace(texts[id], sid);
    }
  }
  std::vector<BpeMerge> merges;
  if (const io::GgufValue* mv = g.find("tokenizer.ggml.merges")) {
    const std::vector<std::string>& ms = mv->strings();
    merges.reserve(ms.size());
    for (std::size_t k = 0; k < ms.size(); ++k) {
      const std::string& m = ms[k];
      const std::size_t sp = m.find(' ', 1);
      const std::string where = "tokenizer.ggml.merges[" + std::to_string(k) + "]";
      if (sp == std::string::npos) fail(g, where, "expected \"a b\"");
      const auto l = by_text.find(m.substr(0, sp)), r = by_text.find(m.substr(sp + 1));
      const auto res = by_text.find(m.substr(0, sp) + m.substr(sp + 1));
      if (l == by_text.end() || r == by_text.end() || res == by_text.end()) {
        fail(g, where, "a side or the result is not a normal token");
      }
      merges.push_back({l->second, r->second, res->second, static_cast<std::uint32_t>(k)});
    }
  }
  try {
    auto tok = std::make_unique<BpeTokenizer>(std::move(tokens), std::move(is_token), std::move(merges),
                                              std::move(specials), id_key(g, "tokenizer.ggml.bos_token_id", n),
                                              id_key(g, "tokenizer.ggml.eos_token_id", n), opt);
    tok->set_add_bos(flag_key(g, "tokenizer.ggml.add_bos_token", named->add_bos));
    return tok;
  } catch (const std::invalid_argument& e) {
    fail(g, "tokenizer.ggml", e.what());
  }
}

std::unique_ptr<Tokenizer> spm_from_gguf(const io::GgufFile& g, std::vector<std::string> texts) {
  const std::size_t n = texts.size();
  std::vector<TokenType> types = token_types(g, n);
  std::vector<float> scores;
  if (const io::GgufValue* s = g.find("tokenizer.ggml.scores")) {
    scores = s->f32s();
    if (scores.size() != n) fail(g, "tokenizer.ggml.scores", "length differs from tokenizer.ggml.tokens");
  } else {
    fail(g, "tokenizer.ggml.scores", "missing (a llama vocabulary needs scores)");
  }
  bool add_space_prefix = true;  // llama.cpp's default for SPM
  if (const io::GgufValue* a = g.find("tokenizer.ggml.add_space_prefix")) add_space_prefix = a->as_bool();
  try {
    auto tok = std::make_unique<SpmTokenizer>(std::move(texts), std::move(scores), std::move(types),
                                              id_key(g, "tokenizer.ggml.bos_token_id", n),
                                              id_key(g, "tokenizer.ggml.eos_token_id", n),
                                              id_key(g, "tokenizer.ggml.unknown_token_id", n), add_space_prefix,
                                              "gguf:llama-spm");
    tok->set_add_bos(flag_key(g, "tokenizer.ggml.add_bos_token", true));  // llama.cpp's SPM default
    return tok;
  } catch (const std::invalid_argument& e) {
    fail(g, "tokenizer.ggml", e.what());
  }
}

}  // namespace

std::unique_ptr<Tokenizer> tokenizer_from_gguf(const io::GgufFile& g) {
  try {
    const std::string& model = g.at("tokenizer.ggml.model").as_string();
    const std::vector<std::string>& texts = g.at("tokenizer.ggml.tokens").strings();
    if (texts.empty() || texts.size() > 0x7FFFFFFFu) fail(g, "tokenizer.ggml.tokens", "empty or too large");
    if (model == "gpt2") return gpt2_from_gguf(g, texts);
    if (model == "llama") return spm_from_gguf(g, texts);
    fail(g, "tokenizer.ggml.model", "unsupported tokenizer model '" + unicode::escape_bytes(model) + "' (known: gpt2, llama)");
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    if (what.rfind(g.source, 0) == 0) throw;
    throw std::runtime_error(g.source + ": " + what);  // GgufValue's messages name only the key
  }
}

std::unique_ptr<Tokenizer> load_gguf_tokenizer(const std::filesystem::path& path) {
  return tokenizer_from_gguf(io::gguf_read(path));
}

}  // namespace lockstep::tok
