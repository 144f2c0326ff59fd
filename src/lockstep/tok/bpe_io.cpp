// Loading and saving byte-level BPE vocabularies: tiktoken rank files, GPT-2's
// encoder.json + vocab.bpe, Hugging Face tokenizer.json.
#include <array>
#include <charconv>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <unordered_map>

#include "lockstep/tok/bpe.hpp"
#include "lockstep/tok/unicode.hpp"

namespace lockstep::tok {

namespace {

using json = nlohmann::json;

[[noreturn]] void fail(std::string_view source, const std::string& where, const std::string& what) {
  std::string msg(source);
  if (!where.empty()) msg += ": " + where;
  msg += ": " + what;
  throw std::runtime_error(msg);
}

// Ids may leave holes, but not so many that a hostile file makes us allocate
// gigabytes: the largest id must be below (number of tokens + this slack).
constexpr std::size_t kIdSlack = 1 << 16;

// GPT-2's bytes_to_unicode(): printable Latin-1 bytes stand for themselves,
// the other 68 bytes (controls, space, 0x7F-0xA0, 0xAD) are U+0100.. in order.
struct ByteAlphabet {
  std::array<std::uint32_t, 256> to_cp{};
  std::array<std::int16_t, 324> to_byte{};
  ByteAlphabet() {
    to_byte.fill(-1);
    std::uint32_t extra = 256;
    for (std::uint32_t b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      to_cp[b] = printable ? b : extra++;
      to_byte[to_cp[b]] = static_cast<std::int16_t>(b);
    }
  }
};
const ByteAlphabet& alphabet() {
  static const ByteAlphabet a;
  return a;
}

// Strict base64 (standard alphabet, '=' padding only at the end).
bool base64_decode(std::string_view in, std::string& out) {
  out.clear();
  if (in.empty() || in.size() % 4 != 0) return false;
  const auto val = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  for (std::size_t i = 0; i < in.size(); i += 4) {
    const bool last = i + 4 == in.size();
    int v[4];
    int pad = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = in[i + static_cast<std::size_t>(k)];
      if (c == '=' && last && k >= 2) {
        v[k] = 0;
        ++pad;
        continue;
      }
      if (pad > 0) return false;  // data after padding
      v[k] = val(c);
      if (v[k] < 0) return false;
    }
    const std::uint32_t triple = (static_cast<std::uint32_t>(v[0]) << 18) | (static_cast<std::uint32_t>(v[1]) << 12) |
                                 (static_cast<std::uint32_t>(v[2]) << 6) | static_cast<std::uint32_t>(v[3]);
    out.push_back(static_cast<char>((triple >> 16) & 0xFF));
    if (pad < 2) out.push_back(static_cast<char>((triple >> 8) & 0xFF));
    if (pad < 1) out.push_back(static_cast<char>(triple & 0xFF));
  }
  return true;
}

std::string line_where(std::size_t line) { return "line " + std::to_string(line); }

// A vocabulary under construction: ids -> bytes, with holes.
struct VocabBuilder {
  std::vector<std::string> tokens;
  std::vector<bool> is_token;
  std::unordered_map<std::string, std::int32_t> by_bytes;  // normal tokens only

  void put(std::size_t id, std::string bytes) {
    if (id >= tokens.size()) tokens.resize(id + 1), is_token.resize(id + 1, false);
    tokens[id] = std::move(bytes);
    is_token[id] = true;
  }
  std::int32_t find(const std::string& bytes) const {
    const auto it = by_bytes.find(bytes);
    return it == by_bytes.end() ? -1 : it->second;
  }
};

std::optional<std::int32_t> special_id(const std::vector<SpecialToken>& specials,
                                       std::initializer_list<std::string_view> names) {
  for (const std::string_view n : names) {
    for (const SpecialToken& s : specials) {
      if (s.text == n) return s.id;
    }
  }
  return std::nullopt;
}
// Which added tokens are BOS and EOS, by their conventional names (vocab files
// other than GGUF do not say).
std::optional<std::int32_t> guess_bos(const std::vector<SpecialToken>& s) {
  return special_id(s, {"<|begin_of_text|>", "<s>", "<|startoftext|>", "<|endoftext|>"});
}
std::optional<std::int32_t> guess_eos(const std::vector<SpecialToken>& s) {
  return special_id(s, {"<|end_of_text|>", "</s>", "<|endoftext|>"});
}

json parse_json(std::string_view data, std::string_view source) {
  try {
    return json::parse(data.begin(), data.end());
  } catch (const json::parse_error& e) {
    fail(source, "offset " + std::to_string(e.byte), std::string("invalid JSON: ") + e.what());
  } catch (const json::exception& e) {
    // Not only parse_error: a number too large for a double is out_of_range
    // (found by fuzz/fuzz_gpt2).
    fail(source, "", std::string("invalid JSON: ") + e.what());
  }
}

// A merge "a b" (or ["a", "b"]) of byte-level token texts into ids.
BpeMerge resolve_merge(const VocabBuilder& v, std::string_view a_text, std::string_view b_text,
                       std::uint32_t priority, std::string_view source, const std::string& where) {
  std::string a, b;
  if (!byte_level_decode(a_text, a) || !byte_level_decode(b_text, b)) {
    fail(source, where, "merge side is not byte-level text");
  }
  const std::int32_t l = v.find(a), r = v.find(b), res = v.find(a + b);
  if (l < 0 || r < 0) fail(source, where, "merge side is not in the vocabulary");
  if (res < 0) fail(source, where, "merge result is not in the vocabulary");
  return {l, r, res, priority};
}

// Vocabulary object {byte-level text: id}; `literal` holds ids whose text is
// taken as-is (added/special tokens).
void read_vocab_object(const json& obj, VocabBuilder& v, const std::unordered_map<std::int64_t, std::string>& literal,
                       std::string_view source) {
  if (!obj.is_object()) fail(source, "vocab", "not a JSON object");
  const std::size_t limit = obj.size() + literal.size() + kIdSlack;
  for (const auto& item : obj.items()) {
    const std::string& text = item.key();
    const json& idv = item.value();
    if (!idv.is_number_integer()) fail(source, "vocab[\"" + text + "\"]", "id is not an integer");
    const std::int64_t id = idv.get<std::int64_t>();
    if (id < 0 || static_cast<std::uint64_t>(id) >= limit) {
      fail(source, "vocab[\"" + text + "\"]", "id " + std::to_string(id) + " out of range");
    }
    const auto uid = static_cast<std::size_t>(id);
    if (uid < v.tokens.size() && v.is_token[uid] && !literal.count(id)) {
      fail(source, "vocab[\"" + text + "\"]", "id " + std::to_string(id) + " used twice");
    }
    if (literal.count(id)) continue;  // an added token: its text is literal
    std::string bytes;
    if (!byte_level_decode(text, bytes) || bytes.empty()) {
      fail(source, "vocab[\"" + text + "\"]", "token is not byte-level text");
    }
    if (!v.by_bytes.emplace(bytes, static_cast<std::int32_t>(id)).second) {
      fail(source, "vocab[\"" + text + "\"]", "token text appears twice");
    }
    v.put(uid, std::move(bytes));
  }
}

}  // namespace

std::string byte_level_encode(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char c : bytes) unicode::append_utf8(alphabet().to_cp[static_cast<std::uint8_t>(c)], out);
  return out;
}

bool byte_level_decode(std::string_view text, std::string& bytes) {
  bytes.clear();
  for (std::size_t i = 0; i < text.size();) {
    const unicode::Cp c = unicode::decode_at(text, i);
    if (c.cp >= alphabet().to_byte.size() || alphabet().to_byte[c.cp] < 0) return false;
    bytes.push_back(static_cast<char>(alphabet().to_byte[c.cp]));
    i += c.len;
  }
  return true;
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error(path.string() + ": cannot open");
  std::ostringstream ss;
  ss << f.rdbuf();
  if (f.bad()) throw std::runtime_error(path.string() + ": read error");
  return std::move(ss).str();
}

// ---------------------------------------------------------------------------
// tiktoken

BpeTokenizer parse_tiktoken(std::string_view data, std::string_view source, PreTokenizer pre,
                            std::vector<SpecialToken> specials, std::string name,
                            std::shared_ptr<const RegexSplitter> regex) {
  VocabBuilder v;
  std::vector<std::pair<std::uint64_t, std::string>> entries;  // (rank, bytes)
  std::size_t line_no = 0;
  for (std::size_t pos = 0; pos < data.size();) {
    std::size_t eol = data.find('\n', pos);
    if (eol == std::string_view::npos) eol = data.size();
    std::string_view line = data.substr(pos, eol - pos);
    pos = eol + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    const std::size_t sp = line.find(' ');
    if (sp == std::string_view::npos) fail(source, line_where(line_no), "expected 'base64 rank'");
    std::string bytes;
    if (!base64_decode(line.substr(0, sp), bytes)) fail(source, line_where(line_no), "invalid base64");
    const std::string_view rank_text = line.substr(sp + 1);
    std::uint64_t rank = 0;
    const auto [end, ec] = std::from_chars(rank_text.data(), rank_text.data() + rank_text.size(), rank);
    if (ec != std::errc() || end != rank_text.data() + rank_text.size() || rank_text.empty()) {
      fail(source, line_where(line_no), "invalid rank");
    }
    entries.emplace_back(rank, std::move(bytes));
    if (rank >= entries.size() + kIdSlack) fail(source, line_where(line_no), "rank " + std::to_string(rank) + " out of range");
  }
  // Ranks may leave holes (p50k_base has none at 50256, where its
  // <|endoftext|> goes), each rank once, each token once.
  for (auto& [rank, bytes] : entries) {
    if (rank < v.tokens.size() && v.is_token[rank]) fail(source, "", "rank " + std::to_string(rank) + " appears twice");
    if (!v.by_bytes.emplace(bytes, static_cast<std::int32_t>(rank)).second) {
      fail(source, "", "token of rank " + std::to_string(rank) + " (" + unicode::escape_bytes(bytes, 40) + ") appears twice");
    }
    v.put(rank, std::move(bytes));
  }
  const std::size_t n = v.tokens.size();  // one more than the largest rank
  for (const SpecialToken& s : specials) {
    if (s.id < 0 || static_cast<std::size_t>(s.id) >= n + kIdSlack) {
      fail(source, "", "special token '" + unicode::escape_bytes(s.text) + "' id " + std::to_string(s.id) + " out of range");
    }
    if (static_cast<std::size_t>(s.id) < n && v.is_token[static_cast<std::size_t>(s.id)]) {
      fail(source, "", "special token '" + unicode::escape_bytes(s.text) + "' id " + std::to_string(s.id) + " collides with a rank");
    }
  }
  for (const SpecialToken& s : specials) v.put(static_cast<std::size_t>(s.id), s.text);
  // A pair merges when its concatenation is a token; priority = that rank.
  std::vector<BpeMerge> merges;
  for (std::size_t id = 0; id < n; ++id) {
    const std::string& t = v.tokens[id];
    if (!v.is_token[id] || v.find(t) != static_cast<std::int32_t>(id)) continue;  // a hole or a special
    for (std::size_t k = 1; k < t.size(); ++k) {
      const std::int32_t l = v.find(t.substr(0, k)), r = v.find(t.substr(k));
      if (l >= 0 && r >= 0) merges.push_back({l, r, static_cast<std::int32_t>(id), static_cast<std::uint32_t>(id)});
    }
  }
  BpeOptions opt;
  opt.name = std::move(name);
  opt.pre = pre;
  opt.regex = std::move(regex);
  opt.ignore_merges = true;  // tiktoken looks the whole piece up first
  const auto bos = guess_bos(specials), eos = guess_eos(specials);
  try {
    return BpeTokenizer(std::move(v.tokens), std::move(v.is_token), std::move(merges), std::move(specials), bos, eos, opt);
  } catch (const std::invalid_argument& e) {
    fail(source, "", e.what());
  }
}

BpeTokenizer load_tiktoken(const std::filesystem::path& path, PreTokenizer pre,
                           std::vector<SpecialToken> specials, std::string name,
                           std::shared_ptr<const RegexSplitter> regex) {
  return parse_tiktoken(read_file(path), path.string(), pre, std::move(specials), std::move(name), std::move(regex));
}

BpeTokenizer load_p50k_base(const std::filesystem::path& rank_file) {
  // Rank 50256 is a hole in the file: <|endoftext|> takes it.
  return load_tiktoken(rank_file, PreTokenizer::kGpt2, {{"<|endoftext|>", 50256}}, "bpe:p50k_base");
}

BpeTokenizer load_o200k_base(const std::filesystem::path& rank_file) {
  return load_tiktoken(rank_file, PreTokenizer::kGpt2, {{"<|endoftext|>", 199999}, {"<|endofprompt|>", 200018}},
                       "bpe:o200k_base", std::make_shared<const RegexSplitter>(std::vector<std::string>{std::string(o200k_regex())}));
}

BpeTokenizer load_r50k_base(const std::filesystem::path& rank_file) {
  // GPT-2's special token; tiktoken has no BOS, GPT-2 uses <|endoftext|> for both.
  return load_tiktoken(rank_file, PreTokenizer::kGpt2, {{"<|endoftext|>", 50256}}, "bpe:r50k_base");
}

BpeTokenizer load_cl100k_base(const std::filesystem::path& rank_file) {
  return load_tiktoken(rank_file, PreTokenizer::kCl100k,
                       {{"<|endoftext|>", 100257},
                        {"<|fim_prefix|>", 100258},
                        {"<|fim_middle|>", 100259},
                        {"<|fim_suffix|>", 100260},
                        {"<|endofprompt|>", 100276}},
                       "bpe:cl100k_base");
}

BpeTokenizer load_openai_encoding(const std::filesystem::path& rank_file, std::string_view encoding) {
  if (encoding == "r50k_base" || encoding == "gpt2") return load_r50k_base(rank_file);
  if (encoding == "p50k_base") return load_p50k_base(rank_file);
  if (encoding == "cl100k_base") return load_cl100k_base(rank_file);
  if (encoding == "o200k_base") return load_o200k_base(rank_file);
  throw std::runtime_error(rank_file.string() + ": unknown tiktoken encoding '" + unicode::escape_bytes(encoding) +
                           "' (known: r50k_base, p50k_base, cl100k_base, o200k_base)");
}

// ---------------------------------------------------------------------------
// GPT-2 encoder.json + vocab.bpe

BpeTokenizer parse_gpt2(std::string_view encoder_json, std::string_view vocab_bpe, std::string_view source) {
  const std::string enc_src = std::string(source) + "/encoder.json";
  const std::string bpe_src = std::string(source) + "/vocab.bpe";
  const json enc = parse_json(encoder_json, enc_src);
  VocabBuilder v;
  read_vocab_object(enc, v, {}, enc_src);
  std::vector<SpecialToken> specials;
  if (const std::int32_t id = v.find("<|endoftext|>"); id >= 0) {
    specials.push_back({"<|endoftext|>", id});
    v.by_bytes.erase("<|endoftext|>");
  }
  std::vector<BpeMerge> merges;
  std::size_t line_no = 0;
  for (std::size_t pos = 0; pos < vocab_bpe.size();) {
    std::size_t eol = vocab_bpe.find('\n', pos);
    if (eol == std::string_view::npos) eol = vocab_bpe.size();
    std::string_view line = vocab_bpe.substr(pos, eol - pos);
    pos = eol + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty() || (line_no == 1 && line.starts_with("#version"))) continue;
    const std::size_t sp = line.find(' ');
    if (sp == std::string_view::npos || sp == 0 || line.find(' ', sp + 1) != std::string_view::npos) {
      fail(bpe_src, line_where(line_no), "expected two tokens separated by one space");
    }
    merges.push_back(resolve_merge(v, line.substr(0, sp), line.substr(sp + 1),
                                   static_cast<std::uint32_t>(merges.size()), bpe_src, line_where(line_no)));
  }
  BpeOptions opt;
  opt.name = "bpe:gpt2";
  opt.pre = PreTokenizer::kGpt2;
  const auto bos = guess_bos(specials), eos = guess_eos(specials);
  try {
    return BpeTokenizer(std::move(v.tokens), std::move(v.is_token), std::move(merges), std::move(specials), bos, eos, opt);
  } catch (const std::invalid_argument& e) {
    fail(source, "", e.what());
  }
}

BpeTokenizer load_gpt2(const std::filesystem::path& encoder_json, const std::filesystem::path& vocab_bpe) {
  return parse_gpt2(read_file(encoder_json), read_file(vocab_bpe), encoder_json.parent_path().string());
}

// ---------------------------------------------------------------------------
// Hugging Face tokenizer.json

namespace {

bool is_null_or_empty(const json& j, const char* key) {
  if (!j.contains(key) || j[key].is_null()) return true;
  return j[key].is_string() && j[key].get<std::string>().empty();
}

std::string str_at(const json& j, const char* key, std::string_view source, const std::string& where) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_string()) fail(source, where, std::string("expected string \"") + key + "\"");
  return j[key].get<std::string>();
}

bool bool_at(const json& j, const char* key, bool dflt, std::string_view source, const std::string& where) {
  if (!j.contains(key) || j[key].is_null()) return dflt;
  if (!j[key].is_boolean()) fail(source, where, std::string("\"") + key + "\" is not a boolean");
  return j[key].get<bool>();
}

// The pre-tokenizer: ByteLevel alone (GPT-2's regex), or a Sequence of
// Split(regex, Isolated) and Digits(individual_digits) steps closed by a
// ByteLevel (with its own GPT-2 regex as a last step when use_regex is true).
// One step that a hand-written matcher implements uses it; anything else runs
// through RegexSplitter.
void read_pre_tokenizer(const json& pt, BpeOptions& opt, std::string_view source) {
  const std::string pt_type = str_at(pt, "type", source, "pre_tokenizer");
  std::vector<std::string> steps;
  if (pt_type == "ByteLevel") {
    opt.add_prefix_space = bool_at(pt, "add_prefix_space", false, source, "pre_tokenizer");
    if (!bool_at(pt, "use_regex", true, source, "pre_tokenizer")) {
      fail(source, "pre_tokenizer", "ByteLevel without its regex needs a Split before it");
    }
    steps.emplace_back(pre_tokenizer_regex(PreTokenizer::kGpt2));
  } else if (pt_type == "Sequence") {
    if (!pt.contains("pretokenizers") || !pt["pretokenizers"].is_array() || pt["pretokenizers"].size() < 2) {
      fail(source, "pre_tokenizer", "expected Sequence [Split..., ByteLevel]");
    }
    const json& list = pt["pretokenizers"];
    for (std::size_t k = 0; k + 1 < list.size(); ++k) {
      const std::string where = "pre_tokenizer.pretokenizers[" + std::to_string(k) + "]";
      const json& step = list[k];
      const std::string type = str_at(step, "type", source, where);
      if (type == "Digits") {
        if (!bool_at(step, "individual_digits", false, source, where)) {
          fail(source, where, "only Digits(individual_digits=true) is supported");
        }
        steps.emplace_back(R"(\p{N})");  // HF uses Rust's char::is_numeric: N*
        continue;
      }
      if (type != "Split") {
        fail(source, where, "unsupported pre-tokenizer type '" + unicode::escape_bytes(type) + "' (Split, Digits)");
      }
      if (!step.contains("pattern") || !step["pattern"].is_object()) fail(source, where + ".pattern", "missing");
      steps.push_back(str_at(step["pattern"], "Regex", source, where + ".pattern"));
      if (str_at(step, "behavior", source, where) != "Isolated" || bool_at(step, "invert", false, source, where)) {
        fail(source, where, "Split must be Isolated, not inverted");
      }
    }
    const std::string where = "pre_tokenizer.pretokenizers[" + std::to_string(list.size() - 1) + "]";
    const json& bl = list[list.size() - 1];
    if (str_at(bl, "type", source, where) != "ByteLevel") fail(source, where, "expected a ByteLevel pre-tokenizer last");
    opt.add_prefix_space = bool_at(bl, "add_prefix_space", false, source, where);
    if (bool_at(bl, "use_regex", true, source, where)) steps.emplace_back(pre_tokenizer_regex(PreTokenizer::kGpt2));
  } else {
    fail(source, "pre_tokenizer",
         "unsupported pre-tokenizer type '" + unicode::escape_bytes(pt_type) + "' (ByteLevel, Sequence)");
  }
  if (steps.size() == 1 && pre_tokenizer_from_regex(steps[0], opt.pre)) return;
  try {
    opt.regex = std::make_shared<const RegexSplitter>(std::move(steps));
  } catch (const std::invalid_argument& e) {
    fail(source, "pre_tokenizer", e.what());
  }
}

// post_processor: whether it puts BOS before a single sequence
// (TemplateProcessing, alone or in a Sequence). Other processors add no
// token here (ByteLevel only fixes offsets).
bool reads_add_bos(const json& root, const std::vector<SpecialToken>& specials, std::optional<std::int32_t> bos) {
  if (!bos || !root.contains("post_processor") || !root["post_processor"].is_object()) return false;
  const auto template_adds_bos = [&](const json& pp) {
    if (!pp.is_object() || !pp.contains("type") || pp["type"] != "TemplateProcessing") return false;
    if (!pp.contains("single") || !pp["single"].is_array() || pp["single"].empty()) return false;
    const json& first = pp["single"][0];
    if (!first.is_object() || !first.contains("SpecialToken") || !first["SpecialToken"].is_object()) return false;
    const json& st = first["SpecialToken"];
    if (!st.contains("id") || !st["id"].is_string()) return false;
    for (const SpecialToken& s : specials) {
      if (s.id == *bos && s.text == st["id"].get<std::string>()) return true;
    }
    return false;
  };
  const json& pp = root["post_processor"];
  if (pp.contains("type") && pp["type"] == "Sequence" && pp.contains("processors") && pp["processors"].is_array()) {
    for (const json& p : pp["processors"]) {
      if (template_adds_bos(p)) return true;
    }
    return false;
  }
  return template_adds_bos(pp);
}
}  // namespace

BpeTokenizer parse_hf_tokenizer_json(std::string_view data, std::string_view source) {
  const json root = parse_json(data, source);
  if (!root.is_object()) fail(source, "", "not a JSON object");
  if (!root.contains("model") || !root["model"].is_object()) fail(source, "model", "missing");
  const json& model = root["model"];
  if (str_at(model, "type", source, "model") != "BPE") fail(source, "model.type", "only BPE models are supported");
  if (bool_at(model, "byte_fallback", false, source, "model")) fail(source, "model.byte_fallback", "not supported (byte-level BPE)");
  if (!is_null_or_empty(model, "continuing_subword_prefix") || !is_null_or_empty(model, "end_of_word_suffix")) {
    fail(source, "model", "continuing_subword_prefix/end_of_word_suffix are not supported");
  }
  if (model.contains("dropout") && !model["dropout"].is_null()) fail(source, "model.dropout", "BPE dropout is not supported");
  if (root.contains("normalizer") && !root["normalizer"].is_null()) fail(source, "normalizer", "normalizers are not supported");

  BpeOptions opt;
  opt.name = "bpe:tokenizer.json";
  opt.ignore_merges = bool_at(model, "ignore_merges", false, source, "model");
  if (!root.contains("pre_tokenizer") || !root["pre_tokenizer"].is_object()) fail(source, "pre_tokenizer", "missing");
  read_pre_tokenizer(root["pre_tokenizer"], opt, source);

  // Added tokens: literal text at fixed ids.
  std::vector<SpecialToken> specials;
  std::unordered_map<std::int64_t, std::string> literal;
  if (root.contains("added_tokens") && !root["added_tokens"].is_null()) {
    if (!root["added_tokens"].is_array()) fail(source, "added_tokens", "not an array");
    for (std::size_t k = 0; k < root["added_tokens"].size(); ++k) {
      const json& a = root["added_tokens"][k];
      const std::string where = "added_tokens[" + std::to_string(k) + "]";
      if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer()) fail(source, where, "missing integer id");
      const std::int64_t id = a["id"].get<std::int64_t>();
      const std::string text = str_at(a, "content", source, where);
      if (id < 0 || id > 0x7FFFFFFF || text.empty()) fail(source, where, "bad id or empty content");
      if (!literal.emplace(id, text).second) fail(source, where, "id used twice");
      specials.push_back({text, static_cast<std::int32_t>(id)});
    }
  }
  if (!model.contains("vocab")) fail(source, "model.vocab", "missing");
  VocabBuilder v;
  read_vocab_object(model["vocab"], v, literal, source);
  const std::size_t limit = v.tokens.size() + kIdSlack;
  for (const auto& [id, text] : literal) {
    if (static_cast<std::uint64_t>(id) >= limit) fail(source, "added_tokens", "id " + std::to_string(id) + " out of range");
    v.put(static_cast<std::size_t>(id), text);
  }

  std::vector<BpeMerge> merges;
  if (!model.contains("merges") || !model["merges"].is_array()) fail(source, "model.merges", "missing");
  const json& ms = model["merges"];
  for (std::size_t k = 0; k < ms.size(); ++k) {
    const std::string where = "model.merges[" + std::to_string(k) + "]";
    std::string a, b;
    if (ms[k].is_string()) {  // "a b" (tokenizers < 0.20 writes this form)
      const std::string s = ms[k].get<std::string>();
      const std::size_t sp = s.find(' ', 1);
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos) fail(source, where, "expected \"a b\"");
      a = s.substr(0, sp), b = s.substr(sp + 1);
    } else if (ms[k].is_array() && ms[k].size() == 2 && ms[k][0].is_string() && ms[k][1].is_string()) {
      a = ms[k][0].get<std::string>(), b = ms[k][1].get<std::string>();
    } else {
      fail(source, where, "expected \"a b\" or [\"a\", \"b\"]");
    }
    merges.push_back(resolve_merge(v, a, b, static_cast<std::uint32_t>(k), source, where));
  }
  const auto bos = guess_bos(specials), eos = guess_eos(specials);
  const bool add_bos = reads_add_bos(root, specials, bos);
  try {
    BpeTokenizer tok(std::move(v.tokens), std::move(v.is_token), std::move(merges), std::move(specials), bos, eos, opt);
    tok.set_add_bos(add_bos);
    return tok;
  } catch (const std::invalid_argument& e) {
    fail(source, "", e.what());
  }
}

BpeTokenizer load_hf_tokenizer_json(const std::filesystem::path& path) {
  return parse_hf_tokenizer_json(read_file(path), path.string());
}

std::string to_hf_tokenizer_json(const BpeTokenizer& tok) {
  using ojson = nlohmann::ordered_json;
  const BpeOptions& opt = tok.options();
  const bool gpt2_alone = !opt.regex && opt.pre == PreTokenizer::kGpt2;
  ojson byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", opt.add_prefix_space},
                      {"trim_offsets", true}, {"use_regex", gpt2_alone}};
  ojson pre;
  if (gpt2_alone) {
    pre = byte_level;
  } else {
    const std::vector<std::string> regexes =
        opt.regex ? opt.regex->patterns() : std::vector<std::string>{std::string(pre_tokenizer_regex(opt.pre))};
    ojson steps = ojson::array();
    for (const std::string& r : regexes) {
      steps.push_back({{"type", "Split"}, {"pattern", {{"Regex", r}}}, {"behavior", "Isolated"}, {"invert", false}});
    }
    steps.push_back(byte_level);
    pre = {{"type", "Sequence"}, {"pretokenizers", steps}};
  }
  ojson post = nullptr;  // BOS before a single sequence, when the tokenizer adds it
  if (tok.add_bos()) {
    const std::int32_t bos = *tok.bos();
    const std::string bos_text = tok.tokens()[static_cast<std::size_t>(bos)];
    post = {{"type", "TemplateProcessing"},
            {"single", {{{"SpecialToken", {{"id", bos_text}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
            {"pair", {{{"SpecialToken", {{"id", bos_text}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
                      {{"Sequence", {{"id", "B"}, {"type_id", 1}}}}}},
            {"special_tokens", {{bos_text, {{"id", bos_text}, {"ids", {bos}}, {"tokens", {bos_text}}}}}}};
  }
  ojson added = ojson::array();
  for (const SpecialToken& s : tok.special_tokens()) {
    added.push_back({{"id", s.id}, {"content", s.text}, {"single_word", false}, {"lstrip", false},
                     {"rstrip", false}, {"normalized", false}, {"special", true}});
  }
  ojson vocab = ojson::object();
  for (std::int32_t id = 0; id < tok.vocab_size(); ++id) {
    if (!tok.is_token(id) || tok.is_special(id)) continue;
    const std::string& bytes = tok.tokens()[static_cast<std::size_t>(id)];
    if (tok.find(bytes) != id) throw std::invalid_argument("to_hf_tokenizer_json: token bytes repeat (id " + std::to_string(id) + ")");
    vocab[byte_level_encode(bytes)] = id;
  }
  // HF orders merges by list position; equal priorities (rank-derived vocabs)
  // are ordered by their sides' ids.
  std::vector<BpeMerge> ms = tok.merges();
  std::stable_sort(ms.begin(), ms.end(), [](const BpeMerge& a, const BpeMerge& b) {
    if (a.priority != b.priority) return a.priority < b.priority;
    return a.left != b.left ? a.left < b.left : a.right < b.right;
  });
  ojson merges = ojson::array();
  for (const BpeMerge& m : ms) {
    merges.push_back({byte_level_encode(tok.tokens()[static_cast<std::size_t>(m.left)]),
                      byte_level_encode(tok.tokens()[static_cast<std::size_t>(m.right)])});
  }
  ojson root = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added},
      {"normalizer", nullptr},
      {"pre_tokenizer", pre},
      {"post_processor", post},
      {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}}},
      {"model",
       {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"continuing_subword_prefix", nullptr},
        {"end_of_word_suffix", nullptr}, {"fuse_unk", false}, {"byte_fallback", false},
        {"ignore_merges", opt.ignore_merges}, {"vocab", vocab}, {"merges", merges}}}};
  return root.dump(1);
}

void save_hf_tokenizer_json(const BpeTokenizer& tok, const std::filesystem::path& path) {
  const std::string text = to_hf_tokenizer_json(tok);
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw std::runtime_error(path.string() + ": cannot open for writing");
  f.write(text.data(), static_cast<std::streamsize>(text.size()));
  if (!f) throw std::runtime_error(path.string() + ": write error");
}

}  // namespace lockstep::tok
