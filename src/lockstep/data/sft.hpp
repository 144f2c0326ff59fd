// Supervised finetuning records (docs/LORA.md, "Data"): JSONL, one record a line,
//   {"prompt": "...", "completion": "..."}
//   {"messages": [{"role": "user", "content": "..."}, {"role": "assistant", "content": "..."}, ...]}
// to token sequences with a loss mask: the loss is taken on the completion's
// (the assistant messages') tokens only.
//
// prompt/completion: encode_prompt(prompt) (BOS first when the tokenizer adds
//   one), then encode(completion), then EOS when the tokenizer has one;
//   the completion's tokens and the EOS are scored.
// messages, with the model's chat template (the tokenizer has <|eot_id|> and
//   <|begin_of_text|>: tok/chat.hpp, BitNet 2B4T's): BOS, then per message
//   "Role: " + content + "<|eot_id|>"; an assistant message's content and its
//   <|eot_id|> are scored, its "Assistant: " header is not.
// messages, without a template (e.g. the byte tokenizer): "Role: content\n"
//   per message as plain text, the assistant content and its "\n" scored.
// Blank lines are skipped. A malformed record throws std::runtime_error with
// one line "FILE:LINE: what is wrong".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lockstep/tok/tokenizer.hpp"

namespace lockstep::data {

struct SftExample {
  std::vector<std::int32_t> tokens;  // the whole sequence
  std::vector<std::uint8_t> scored;  // per token: 1 where the loss is taken (completion / assistant)
  std::size_t line = 0;              // the record's line in its file (1-based)
};

std::vector<SftExample> read_sft_jsonl(const std::string& path, const tok::Tokenizer& tok);
// The same from text (path names it in messages).
std::vector<SftExample> parse_sft_jsonl(const std::string& text, const std::string& path, const tok::Tokenizer& tok);

// The training window of an example cut to at most `max_len` tokens: inputs
// tokens[0..n-2], targets[i] = tokens[i+1] where scored[i+1], else -1.
void sft_window(const SftExample& ex, std::size_t max_len, std::vector<std::int32_t>& inputs,
                std::vector<std::int32_t>& targets);

}  // namespace lockstep::data
