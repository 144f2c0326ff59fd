#include "lockstep/tok/chat.hpp"

#include <stdexcept>

#include "lockstep/tok/unicode.hpp"

namespace lockstep::tok {

namespace {

// Python's str.isspace(): White_Space plus the separators U+001C..U+001F.
bool python_space(std::uint32_t cp) {
  return (cp >= 0x1C && cp <= 0x1F) || (cp != unicode::kInvalid && unicode::class_of(cp) == unicode::kSpace);
}

// Jinja's trim: Python's str.strip() with no argument.
std::string_view trim(std::string_view s) {
  std::size_t begin = 0;
  while (begin < s.size()) {
    const unicode::Cp c = unicode::decode_at(s, begin);
    if (!python_space(c.cp)) break;
    begin += c.len;
  }
  std::size_t end = begin, i = begin;  // end: after the last non-space code point
  while (i < s.size()) {
    const unicode::Cp c = unicode::decode_at(s, i);
    i += c.len;
    if (!python_space(c.cp)) end = i;
  }
  return s.substr(begin, end - begin);
}

std::string capitalize(std::string_view s) {
  std::string out(s);
  for (std::size_t i = 0; i < out.size(); ++i) {
    const char c = out[i];
    if (i == 0 && c >= 'a' && c <= 'z') out[i] = static_cast<char>(c - 'a' + 'A');
    if (i > 0 && c >= 'A' && c <= 'Z') out[i] = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

}  // namespace

std::string apply_chat_template(std::span<const ChatMessage> messages, bool add_generation_prompt) {
  std::string out(kChatBos);
  for (const ChatMessage& m : messages) {
    out += capitalize(m.role);
    out += ": ";
    out += trim(m.content);
    out += kChatEndOfTurn;
  }
  if (add_generation_prompt) out += "Assistant: ";
  return out;
}

std::vector<std::int32_t> encode_chat(const Tokenizer& tok, std::span<const ChatMessage> messages,
                                      bool add_generation_prompt) {
  for (const std::string_view needed : {kChatBos, kChatEndOfTurn}) {
    bool found = false;
    for (const SpecialToken& s : tok.special_tokens()) found |= s.text == needed;
    if (!found) {
      throw std::invalid_argument(tok.name() + ": the chat template needs the special token " + std::string(needed) +
                                  ", which this vocabulary lacks");
    }
  }
  return tok.encode_with_specials(apply_chat_template(messages, add_generation_prompt));
}

}  // namespace lockstep::tok
