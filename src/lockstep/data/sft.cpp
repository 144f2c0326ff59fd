// SFT records to tokens and a loss mask (sft.hpp).
#include "lockstep/data/sft.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <stdexcept>

#include "lockstep/io/atomic_file.hpp"
#include "lockstep/tok/chat.hpp"

namespace lockstep::data {

namespace {

bool has_special(const tok::Tokenizer& t, std::string_view text) {
  for (const auto& s : t.special_tokens())
    if (s.text == text) return true;
  return false;
}

void append(SftExample& ex, const std::vector<std::int32_t>& ids, bool scored) {
  ex.tokens.insert(ex.tokens.end(), ids.begin(), ids.end());
  ex.scored.insert(ex.scored.end(), ids.size(), scored ? 1 : 0);
}

std::string field_string(const nlohmann::json& j, const char* key, const std::string& where) {
  if (!j.contains(key)) throw std::runtime_error(fmt::format("{}: the record has no \"{}\"", where, key));
  if (!j.at(key).is_string()) throw std::runtime_error(fmt::format("{}: \"{}\" must be a string", where, key));
  return j.at(key).get<std::string>();
}

}  // namespace

std::vector<SftExample> parse_sft_jsonl(const std::string& text, const std::string& path, const tok::Tokenizer& tok) {
  const bool templ = has_special(tok, tok::kChatBos) && has_special(tok, tok::kChatEndOfTurn);
  std::vector<SftExample> out;
  std::size_t line_no = 0, start = 0;
  while (start <= text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    start = end + 1;
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) {
      if (end == text.size()) break;
      continue;
    }
    const std::string where = fmt::format("{}:{}", path, line_no);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::parse_error& e) {
      throw std::runtime_error(fmt::format("{}: not a JSON record ({})", where, e.what()));
    }
    if (!j.is_object()) throw std::runtime_error(where + ": a record must be a JSON object");
    SftExample ex;
    ex.line = line_no;
    if (j.contains("messages")) {
      const auto& ms = j.at("messages");
      if (!ms.is_array() || ms.empty()) throw std::runtime_error(where + ": \"messages\" must be a non-empty array");
      if (templ) {
        append(ex, tok.encode_with_specials(tok::kChatBos), false);
      } else if (tok.add_bos()) {
        append(ex, {*tok.bos()}, false);
      }
      bool any_assistant = false;
      for (std::size_t i = 0; i < ms.size(); ++i) {
        const std::string mw = fmt::format("{} (message {})", where, i + 1);
        if (!ms[i].is_object()) throw std::runtime_error(mw + ": a message must be an object");
        const std::string role = field_string(ms[i], "role", mw), content = field_string(ms[i], "content", mw);
        const bool assistant = role == "assistant";
        any_assistant |= assistant;
        // The header as tok/chat.hpp's template writes it (capitalized role).
        tok::ChatMessage one{role, content};
        std::string header = tok::apply_chat_template(std::span<const tok::ChatMessage>(&one, 1), false);
        // apply_chat_template gives "<|begin_of_text|>Role: content<|eot_id|>": split it.
        header = header.substr(tok::kChatBos.size());
        const std::size_t colon = header.find(": ");
        const std::string head = header.substr(0, colon + 2);
        std::string body = header.substr(colon + 2);
        if (templ) {
          append(ex, tok.encode(head), false);
          body = body.substr(0, body.size() - tok::kChatEndOfTurn.size());
          auto ids = tok.encode(body);
          auto eot = tok.encode_with_specials(tok::kChatEndOfTurn);
          ids.insert(ids.end(), eot.begin(), eot.end());
          append(ex, ids, assistant);
        } else {
          body = body.substr(0, body.size() - tok::kChatEndOfTurn.size()) + "\n";
          append(ex, tok.encode(head), false);
          append(ex, tok.encode(body), assistant);
        }
      }
      if (!any_assistant) throw std::runtime_error(where + ": no assistant message (nothing to learn)");
    } else if (j.contains("prompt") || j.contains("completion")) {
      const std::string prompt = field_string(j, "prompt", where), completion = field_string(j, "completion", where);
      if (completion.empty()) throw std::runtime_error(where + ": \"completion\" is empty (nothing to learn)");
      append(ex, tok.encode_prompt(prompt), false);
      std::vector<std::int32_t> c = tok.encode(completion);
      if (tok.eos()) c.push_back(*tok.eos());
      append(ex, c, true);
    } else {
      throw std::runtime_error(where + ": a record needs \"prompt\" and \"completion\", or \"messages\"");
    }
    if (ex.tokens.size() < 2) throw std::runtime_error(where + ": the record has fewer than two tokens");
    out.push_back(std::move(ex));
    if (end == text.size()) break;
  }
  if (out.empty()) throw std::runtime_error(path + ": no records");
  return out;
}

std::vector<SftExample> read_sft_jsonl(const std::string& path, const tok::Tokenizer& tok) {
  return parse_sft_jsonl(io::read_file_text(path), path, tok);
}

void sft_window(const SftExample& ex, std::size_t max_len, std::vector<std::int32_t>& inputs,
                std::vector<std::int32_t>& targets) {
  const std::size_t n = std::min(ex.tokens.size(), max_len + 1);
  inputs.assign(ex.tokens.begin(), ex.tokens.begin() + static_cast<std::ptrdiff_t>(n - 1));
  targets.resize(n - 1);
  for (std::size_t i = 0; i + 1 < n; ++i) targets[i] = ex.scored[i + 1] ? ex.tokens[i + 1] : -1;
}

}  // namespace lockstep::data
