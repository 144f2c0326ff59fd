// lockstep tokenize: text on stdin to token ids on stdout (or ids back to
// text with --decode), with the tokenizer of a GGUF model or vocabulary file,
// a Hugging Face tokenizer.json, or a tiktoken rank file.
#include <unistd.h>

#include <charconv>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "command.hpp"
#include "lockstep/tok/bpe.hpp"
#include "lockstep/tok/gguf_vocab.hpp"
#include "lockstep/tok/unicode.hpp"

namespace lockstep::cli {

namespace {

class TokenizeCommand final : public Command {
 public:
  void add(CLI::App& app) override {
    cmd_ = app.add_subcommand("tokenize",
                              "text on stdin -> token ids on stdout, one line of space-separated ids "
                              "(--decode: ids on stdin -> text)");
    auto* vocab = cmd_->add_option("--vocab", vocab_, "GGUF file (a model or a vocabulary: tokenizer.ggml.*)");
    auto* json = cmd_->add_option("--tokenizer", json_, "Hugging Face tokenizer.json (byte-level BPE)");
    auto* tiktoken = cmd_->add_option("--tiktoken", tiktoken_, "tiktoken rank file (base64 token, rank per line)");
    vocab->excludes(json)->excludes(tiktoken);
    json->excludes(tiktoken);
    cmd_->add_option("--encoding", encoding_,
                     "with --tiktoken: r50k_base, p50k_base, cl100k_base or o200k_base (default: the file's name)");
    cmd_->add_flag("--decode", decode_, "read token ids (separated by spaces, commas or newlines), write the text");
    cmd_->add_flag("--specials", specials_, "recognise special tokens' texts (e.g. <|eot_id|>) as their tokens");
    cmd_->add_flag("--prompt", prompt_,
                   "as a model prompt: BOS first when the tokenizer adds it, special tokens recognised");
  }

  int run() override {
    if (vocab_.empty() && json_.empty() && tiktoken_.empty()) {
      fmt::print(stderr, "lockstep tokenize: give one of --vocab FILE.gguf, --tokenizer tokenizer.json, --tiktoken FILE\n");
      return 2;
    }
    std::unique_ptr<tok::Tokenizer> tokenizer;
    try {
      tokenizer = load();
    } catch (const std::exception& e) {
      fmt::print(stderr, "lockstep tokenize: {}\n", printable(e.what()));
      return 2;
    }
    std::string input;
    char buf[1 << 16];
    for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, stdin)) > 0;) input.append(buf, n);
    if (std::ferror(stdin)) {
      fmt::print(stderr, "lockstep tokenize: cannot read stdin\n");
      return 1;
    }
    return decode_ ? run_decode(*tokenizer, input) : run_encode(*tokenizer, input);
  }

 private:
  std::unique_ptr<tok::Tokenizer> load() const {
    if (!vocab_.empty()) return tok::load_gguf_tokenizer(vocab_);
    if (!json_.empty()) return std::make_unique<tok::BpeTokenizer>(tok::load_hf_tokenizer_json(json_));
    std::string encoding = encoding_;
    if (encoding.empty()) encoding = std::filesystem::path(tiktoken_).stem().string();
    return std::make_unique<tok::BpeTokenizer>(tok::load_openai_encoding(tiktoken_, encoding));
  }

  int run_encode(const tok::Tokenizer& t, const std::string& text) const {
    const std::vector<std::int32_t> ids =
        prompt_ ? t.encode_prompt(text) : specials_ ? t.encode_with_specials(text) : t.encode(text);
    std::string line;
    line.reserve(ids.size() * 6 + 1);
    for (std::size_t i = 0; i < ids.size(); ++i) {
      if (i) line += ' ';
      line += std::to_string(ids[i]);
    }
    line += '\n';
    std::fwrite(line.data(), 1, line.size(), stdout);
    return std::fflush(stdout) == 0 ? 0 : 1;
  }

  int run_decode(const tok::Tokenizer& t, const std::string& input) const {
    std::vector<std::int32_t> ids;
    for (std::size_t i = 0; i < input.size();) {
      const char c = input[i];
      if (c == ' ' || c == ',' || c == '\n' || c == '\r' || c == '\t' || c == '[' || c == ']') {
        ++i;
        continue;
      }
      std::size_t end = i;
      while (end < input.size() && input[end] != ' ' && input[end] != ',' && input[end] != '\n' &&
             input[end] != '\r' && input[end] != '\t' && input[end] != ']') {
        ++end;
      }
      std::int32_t id = 0;
      const auto [ptr, ec] = std::from_chars(input.data() + i, input.data() + end, id);
      if (ec != std::errc() || ptr != input.data() + end) {
        fmt::print(stderr, "lockstep tokenize --decode: stdin: '{}' is not a token id\n",
                   printable(input.substr(i, end - i)));
        return 2;
      }
      ids.push_back(id);
      i = end;
    }
    std::string text;
    try {
      text = t.decode(ids);
    } catch (const std::out_of_range& e) {
      fmt::print(stderr, "lockstep tokenize --decode: {}\n", printable(e.what()));
      return 2;
    }
    std::fwrite(text.data(), 1, text.size(), stdout);
    return std::fflush(stdout) == 0 ? 0 : 1;
  }

  // One line, whatever bytes a message quotes from a file.
  static std::string printable(std::string_view s) { return tok::unicode::escape_bytes(s, 2000, false); }

  std::string vocab_, json_, tiktoken_, encoding_;
  bool decode_ = false, specials_ = false, prompt_ = false;
};

}  // namespace

std::unique_ptr<Command> make_tokenize_command() { return std::make_unique<TokenizeCommand>(); }

}  // namespace lockstep::cli
