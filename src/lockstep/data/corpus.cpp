#include "lockstep/data/corpus.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "lockstep/data/rdata.hpp"
#include "lockstep/data/shards.hpp"
#include "lockstep/io/atomic_file.hpp"
#include "lockstep/num/hash.hpp"
#include "lockstep/num/rng.hpp"
#include "lockstep/tok/bpe.hpp"
#include "lockstep/tok/bpe_train.hpp"

namespace fs = std::filesystem;

namespace lockstep::data {

namespace {

// Bumped whenever the preparation below changes what it writes: old caches
// are then ignored instead of silently re-used.
constexpr int kCorpusFormat = 1;

bool is_blank(std::string_view line) {
  return std::all_of(line.begin(), line.end(), [](char c) { return c == ' ' || c == '\t' || c == '\r'; });
}

std::string_view rstrip(std::string_view s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

std::string read_whole(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  if (!f) throw std::runtime_error(fmt::format("cannot read '{}': {}", p.string(), std::strerror(errno)));
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void emit(const std::function<void(const std::string&)>& log, const std::string& line) {
  if (log) log(line);
}

}  // namespace

// ---------------------------------------------------------------------------
// Sources
// ---------------------------------------------------------------------------

std::string reflow_paragraphs(const std::vector<std::string>& lines) {
  std::string out;
  bool in_paragraph = false, any = false;
  for (const std::string& raw : lines) {
    const std::string_view line = rstrip(raw);
    if (is_blank(line)) {
      in_paragraph = false;
      continue;
    }
    if (in_paragraph) {
      out += ' ';
    } else if (any) {
      out += "\n\n";
    }
    out += line;
    in_paragraph = any = true;
  }
  if (any) out += '\n';
  return out;
}

std::vector<TextSource> load_austen(const std::string& rdb_path) {
  const std::vector<CharacterVector> books = read_rdb(rdb_path);
  if (books.empty()) throw std::runtime_error(fmt::format("'{}' holds no text", rdb_path));
  std::vector<TextSource> out;
  for (std::size_t i = 0; i < books.size(); ++i) {
    // The book's title is its first non-blank line ("EMMA", "PERSUASION", ...).
    std::string title = fmt::format("book{}", i);
    for (const std::string& l : books[i])
      if (!is_blank(l)) {
        title = std::string(rstrip(l));
        break;
      }
    out.push_back({"austen:" + title, reflow_paragraphs(books[i])});
  }
  return out;
}

std::string find_austen_rdb() {
  const fs::path rel = fs::path("janeaustenr") / "Rdata.rdb";
  std::vector<fs::path> tried;
  if (const char* env = std::getenv("LOCKSTEP_DATA_DIR"); env && *env) {
    const fs::path p = fs::path(env) / rel;
    if (fs::exists(p)) return p.string();
    tried.push_back(p);
  }
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (fs::path dir = exe.parent_path(); !dir.empty(); dir = dir.parent_path()) {
      const fs::path p = dir / "data" / rel;
      if (fs::exists(p)) return p.string();
      if (dir == dir.parent_path()) break;
    }
    tried.push_back(exe.parent_path() / "..." / "data" / rel);
  }
  const fs::path here = fs::current_path(ec) / "data" / rel;
  if (!ec && fs::exists(here)) return here.string();
  tried.push_back(here);
  std::string where;
  for (const auto& t : tried) where += "\n  " + t.string();
  throw std::runtime_error(
      "the embedded corpus (Jane Austen's novels, data/janeaustenr/Rdata.rdb) was not found; looked at:" + where +
      "\nrun scripts/setup.sh (it unpacks Debian's r-cran-janeaustenr), set LOCKSTEP_DATA_DIR, or pass --data PATH");
}

std::vector<TextSource> load_text_path(const std::string& path) {
  std::error_code ec;
  const fs::path root(path);
  const auto st = fs::status(root, ec);
  if (ec || !fs::exists(st)) throw std::runtime_error(fmt::format("--data: '{}' does not exist", path));
  std::vector<fs::path> files;
  if (fs::is_directory(st)) {
    for (auto it = fs::recursive_directory_iterator(root, fs::directory_options::skip_permission_denied);
         it != fs::recursive_directory_iterator(); ++it) {
      const std::string leaf = it->path().filename().string();
      if (!leaf.empty() && leaf[0] == '.') {
        if (it->is_directory()) it.disable_recursion_pending();
        continue;
      }
      if (it->is_regular_file()) files.push_back(it->path());
    }
    std::sort(files.begin(), files.end());
  } else if (fs::is_regular_file(st)) {
    files.push_back(root);
  } else {
    throw std::runtime_error(fmt::format("--data: '{}' is neither a file nor a folder", path));
  }
  std::vector<TextSource> out;
  std::size_t bytes = 0;
  for (const fs::path& f : files) {
    std::string text = read_whole(f);
    if (text.find('\0') != std::string::npos)
      throw std::runtime_error(fmt::format("--data: '{}' contains NUL bytes: not a text file", f.string()));
    if (text.empty()) continue;
    bytes += text.size();
    out.push_back({fs::is_directory(st) ? fs::relative(f, root).string() : f.filename().string(), std::move(text)});
  }
  if (bytes == 0) throw std::runtime_error(fmt::format("--data: '{}' holds no text", path));
  return out;
}

// ---------------------------------------------------------------------------
// Documents and the split
// ---------------------------------------------------------------------------

std::vector<std::string_view> split_documents(std::string_view text, std::size_t min_bytes) {
  std::vector<std::string_view> docs;
  std::size_t start = 0, i = 0;
  while (i < text.size()) {
    if (text[i] != '\n') {
      ++i;
      continue;
    }
    // A line end at i. With a blank-line run after it, the cut point is after
    // the whole run, so a document ends with its separator.
    std::size_t j = i + 1;
    while (j < text.size() && text[j] == '\n') ++j;
    const bool blank_run = j > i + 1;
    const std::size_t len = j - start;
    if (j < text.size() && ((blank_run && len >= min_bytes) || len >= 4 * min_bytes)) {
      docs.push_back(text.substr(start, len));
      start = j;
    }
    i = j;
  }
  if (start < text.size()) docs.push_back(text.substr(start));
  return docs;
}

std::vector<std::size_t> validation_indices(std::size_t n, double val_fraction, std::uint64_t seed) {
  if (!(val_fraction >= 0 && val_fraction < 1))
    throw std::invalid_argument(fmt::format("--val-fraction must be in [0, 1), got {}", val_fraction));
  if (val_fraction == 0 || n == 0) return {};
  if (n < 2) throw std::runtime_error("the corpus is one document: it cannot be split into train and validation");
  if (n > 0xffffffffull) throw std::runtime_error("more than 2^32 documents");
  std::vector<std::size_t> perm(n);
  for (std::size_t i = 0; i < n; ++i) perm[i] = i;
  for (std::size_t i = n - 1; i >= 1; --i) {
    const std::uint64_t u = num::rng::bits32(seed, kSplitStream, i);
    const std::size_t j = static_cast<std::size_t>((u * (i + 1)) >> 32);  // uniform in [0, i]
    std::swap(perm[i], perm[j]);
  }
  auto k = static_cast<std::size_t>(std::ceil(val_fraction * static_cast<double>(n)));
  k = std::clamp<std::size_t>(k, 1, n - 1);
  std::vector<std::size_t> val(perm.begin(), perm.begin() + static_cast<std::ptrdiff_t>(k));
  std::sort(val.begin(), val.end());
  return val;
}

void CorpusOptions::validate() const {
  if (vocab_size < 257 + 1 || vocab_size > 65536)
    throw std::invalid_argument(fmt::format("--vocab must be in [258, 65536] (256 bytes, merges, <|endoftext|>), got {}",
                                            vocab_size));
  if (!(val_fraction > 0 && val_fraction < 0.5))
    throw std::invalid_argument(fmt::format("--val-fraction must be in (0, 0.5), got {}", val_fraction));
  if (doc_bytes == 0) throw std::invalid_argument("--doc-bytes must be > 0");
  if (cache_dir.empty()) throw std::invalid_argument("corpus cache directory is empty");
}

// ---------------------------------------------------------------------------
// Preparation
// ---------------------------------------------------------------------------

namespace {

nlohmann::json corpus_json(const PreparedCorpus& p, const CorpusOptions& o) {
  nlohmann::ordered_json j;
  j["format"] = "lockstep-corpus";
  j["version"] = kCorpusFormat;
  j["key"] = num::hash_hex(p.key);
  j["source"] = p.source;
  j["options"] = {{"vocab_size", o.vocab_size},
                  {"val_fraction", o.val_fraction},
                  {"doc_bytes", o.doc_bytes},
                  {"split_seed", o.split_seed},
                  {"pretokenizer", "gpt2"}};
  j["vocab_size"] = p.vocab_size;
  j["tokenizer_fingerprint"] = num::hash_hex(p.tokenizer_fingerprint);
  j["train"] = {{"documents", p.train_documents}, {"bytes", p.train_bytes}, {"tokens", p.train_tokens}};
  j["val"] = {{"documents", p.val_documents}, {"bytes", p.val_bytes}, {"tokens", p.val_tokens}};
  return j;
}

}  // namespace

PreparedCorpus read_prepared(const std::string& dir) {
  const fs::path d(dir);
  const fs::path meta = d / "corpus.json";
  if (!fs::exists(meta)) throw std::runtime_error(fmt::format("'{}' is missing (incomplete corpus)", meta.string()));
  PreparedCorpus p;
  try {
    const auto j = nlohmann::json::parse(read_whole(meta));
    if (j.at("format") != "lockstep-corpus" || j.at("version").get<int>() != kCorpusFormat)
      throw std::runtime_error("unknown format or version");
    p.dir = d.string();
    p.train_shard = (d / "train.tokens").string();
    p.val_shard = (d / "val.tokens").string();
    p.tokenizer_json = (d / "tokenizer.json").string();
    p.key = std::stoull(j.at("key").get<std::string>(), nullptr, 16);
    p.source = j.at("source").get<std::string>();
    p.vocab_size = j.at("vocab_size").get<std::int32_t>();
    p.tokenizer_fingerprint = std::stoull(j.at("tokenizer_fingerprint").get<std::string>(), nullptr, 16);
    p.train_documents = j.at("train").at("documents");
    p.train_bytes = j.at("train").at("bytes");
    p.train_tokens = j.at("train").at("tokens");
    p.val_documents = j.at("val").at("documents");
    p.val_bytes = j.at("val").at("bytes");
    p.val_tokens = j.at("val").at("tokens");
  } catch (const std::exception& e) {
    throw std::runtime_error(fmt::format("'{}': {}", meta.string(), e.what()));
  }
  for (const auto& f : {p.train_shard, p.val_shard, p.tokenizer_json})
    if (!fs::exists(f)) throw std::runtime_error(fmt::format("'{}' is missing (incomplete corpus)", f));
  return p;
}

PreparedCorpus prepare_corpus(const CorpusOptions& opt, const std::function<void(const std::string&)>& log) {
  opt.validate();
  std::vector<TextSource> sources;
  std::string source;
  if (opt.data.empty()) {
    const std::string rdb = opt.austen_rdb.empty() ? find_austen_rdb() : opt.austen_rdb;
    sources = load_austen(rdb);
    source = "austen:" + rdb;
  } else {
    sources = load_text_path(opt.data);
    source = opt.data;
  }

  // The key: every input that changes the output, and nothing else (not the
  // paths: the same text found elsewhere is the same corpus).
  num::Hasher h;
  const std::string tag = fmt::format("lockstep-corpus v{} vocab {} val {:a} doc {} seed {} pre gpt2", kCorpusFormat,
                                      opt.vocab_size, opt.val_fraction, opt.doc_bytes, opt.split_seed);
  h.add_bytes(tag.data(), tag.size());
  for (const TextSource& s : sources) {
    const std::uint64_t sizes[2] = {s.name.size(), s.text.size()};
    h.add_bytes(sizes, sizeof sizes);
    h.add_bytes(s.name.data(), s.name.size());
    h.add_bytes(s.text.data(), s.text.size());
  }
  const std::uint64_t key = h.digest();
  const fs::path dir = fs::path(opt.cache_dir) / ("corpus-" + num::hash_hex(key));

  if (fs::exists(dir / "corpus.json")) {
    try {
      PreparedCorpus p = read_prepared(dir.string());
      if (p.key == key) {
        p.reused = true;
        p.source = source;
        emit(log, fmt::format("corpus: re-using {} (key {})", dir.string(), num::hash_hex(key)));
        return p;
      }
    } catch (const std::exception& e) {
      emit(log, fmt::format("corpus: cache unusable ({}), rebuilding", e.what()));
    }
  }

  // Documents, never spanning two sources.
  std::vector<std::string_view> docs;
  std::size_t total_bytes = 0;
  for (const TextSource& s : sources) {
    for (std::string_view d : split_documents(s.text, opt.doc_bytes)) docs.push_back(d);
    total_bytes += s.text.size();
  }
  if (docs.size() < 2)
    throw std::runtime_error(fmt::format(
        "the corpus '{}' is {} bytes, one document of --doc-bytes {}: too little text to split into train and "
        "validation",
        source, total_bytes, opt.doc_bytes));
  const std::vector<std::size_t> val_idx = validation_indices(docs.size(), opt.val_fraction, opt.split_seed);
  std::vector<bool> is_val(docs.size(), false);
  for (std::size_t i : val_idx) is_val[i] = true;
  std::vector<std::string_view> train_docs, val_docs;
  for (std::size_t i = 0; i < docs.size(); ++i) (is_val[i] ? val_docs : train_docs).push_back(docs[i]);
  emit(log, fmt::format("corpus: {} ({} sources, {:.2f} MB): {} documents, {} train / {} validation", source,
                        sources.size(), static_cast<double>(total_bytes) / 1e6, docs.size(), train_docs.size(),
                        val_docs.size()));

  // The vocabulary, from the training documents only.
  tok::BpeTrainOptions bo;
  bo.vocab_size = opt.vocab_size;
  bo.pre = tok::PreTokenizer::kGpt2;
  bo.specials = {"<|endoftext|>"};
  bo.name = fmt::format("bpe:lockstep-{}", opt.vocab_size);
  tok::BpeTrainStats stats;
  const tok::BpeTokenizer tok = tok::train_bpe(std::span<const std::string_view>(train_docs), bo, &stats);
  const std::int32_t eos = *tok.eos();
  const std::string tok_json = tok::to_hf_tokenizer_json(tok);
  emit(log, fmt::format("corpus: trained a {}-token BPE vocabulary ({} merges) on the training split",
                        tok.vocab_size(), stats.merges));

  PreparedCorpus p;
  p.dir = dir.string();
  p.key = key;
  p.source = source;
  p.vocab_size = tok.vocab_size();
  p.tokenizer_fingerprint = num::hash_bytes(tok_json.data(), tok_json.size());
  auto encode_all = [&](const std::vector<std::string_view>& ds, std::uint64_t& bytes, std::uint64_t& tokens) {
    std::vector<std::vector<std::int32_t>> out;
    out.reserve(ds.size());
    for (std::string_view d : ds) {
      out.push_back(tok.encode(d));
      out.back().push_back(eos);
      bytes += d.size();
      tokens += out.back().size();
    }
    return out;
  };
  const auto train_tok = encode_all(train_docs, p.train_bytes, p.train_tokens);
  const auto val_tok = encode_all(val_docs, p.val_bytes, p.val_tokens);
  p.train_documents = train_docs.size();
  p.val_documents = val_docs.size();

  fs::create_directories(dir);
  p.train_shard = (dir / "train.tokens").string();
  p.val_shard = (dir / "val.tokens").string();
  p.tokenizer_json = (dir / "tokenizer.json").string();
  const auto vs = static_cast<std::uint64_t>(p.vocab_size);
  write_shard(p.train_shard, train_tok, vs, p.tokenizer_fingerprint);
  write_shard(p.val_shard, val_tok, vs, p.tokenizer_fingerprint);
  io::write_file_atomic(p.tokenizer_json, std::span(reinterpret_cast<const std::uint8_t*>(tok_json.data()),
                                                    tok_json.size()));
  const std::string meta = corpus_json(p, opt).dump(2) + "\n";
  io::write_file_atomic((dir / "corpus.json").string(),
                        std::span(reinterpret_cast<const std::uint8_t*>(meta.data()), meta.size()));
  emit(log, fmt::format("corpus: {} train tokens ({:.2f} bytes/token), {} validation tokens -> {}", p.train_tokens,
                        static_cast<double>(p.train_bytes) / static_cast<double>(p.train_tokens), p.val_tokens,
                        dir.string()));
  return p;
}

}  // namespace lockstep::data
