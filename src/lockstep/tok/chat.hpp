// The chat template of the BitNet b1.58 2B4T instruct model (its
// tokenizer_config.json, a Jinja template):
//   {% for message in messages %}{% set content = message['role'] | capitalize
//   + ': '+ message['content'] | trim + '<|eot_id|>' %}{{ content }}{% endfor %}
//   {% if add_generation_prompt %}{{ 'Assistant: ' }}{% endif %}
// with BOS in front (the tokenizer adds it when the prompt is encoded). So:
//   <|begin_of_text|>System: You are helpful.<|eot_id|>User: Hi<|eot_id|>Assistant: 
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "lockstep/tok/tokenizer.hpp"

namespace lockstep::tok {

struct ChatMessage {
  std::string role;     // "system", "user", "assistant" (any text: capitalized as Jinja does)
  std::string content;  // trimmed as Jinja's trim does (Python's str.strip())
};

// The prompt text: "<|begin_of_text|>", then "Role: content<|eot_id|>" per
// message, then "Assistant: " when add_generation_prompt. Jinja's capitalize
// is Python's str.capitalize() (first character upper case, the rest lower;
// ASCII letters only are mapped here, other characters are kept as they are).
std::string apply_chat_template(std::span<const ChatMessage> messages, bool add_generation_prompt);

// The prompt's token ids: apply_chat_template through encode_with_specials,
// so BOS and <|eot_id|> are their tokens and the messages' text is text.
// Throws std::invalid_argument when the tokenizer has no such special tokens
// (the template is the LLaMA-3 vocabulary's). A message's own text that spells
// a special token is encoded as that token, as HF's apply_chat_template does.
std::vector<std::int32_t> encode_chat(const Tokenizer& tok, std::span<const ChatMessage> messages,
                                      bool add_generation_prompt);

// The texts the template uses.
inline constexpr std::string_view kChatBos = "<|begin_of_text|>";
inline constexpr std::string_view kChatEndOfTurn = "<|eot_id|>";

}  // namespace lockstep::tok
