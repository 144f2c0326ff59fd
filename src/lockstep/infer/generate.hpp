// Text generation over a model's decode session (model/decode.hpp): the
// prompt in one prefill (in chunks when long), then one decode pass per
// token; several sequences decode together in one pass per token. A
// sequence ends at a stop id (the tokenizer's end-of-text and end-of-turn
// tokens, and any given), after max_tokens, or when its context is full.
//
// Bit identity: a sequence's tokens depend only on its prompt, its seed and
// the options — not on the sequences decoded with it, not on the thread
// count (the logits are the same bits, model.hpp's Decoder; sampling is a
// fixed float expression, sample.hpp).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string_view>
#include <vector>

#include "lockstep/infer/sample.hpp"
#include "lockstep/model/model.hpp"
#include "lockstep/tok/tokenizer.hpp"

namespace lockstep::infer {

struct GenerateOptions {
  SamplingOptions sampling;
  std::int64_t max_tokens = 200;      // tokens to generate per sequence (the prompt not counted)
  bool stop_at_eos = true;            // stop at the tokenizer's end-of-text / end-of-turn tokens
  std::vector<std::int32_t> stop_ids;  // further ids that end a sequence
  std::int64_t context = 0;           // KV-cache positions per sequence (0: the model's max_seq)
  int threads = 0;
  std::int32_t sample_vocab = 0;      // sample among the ids below it (0: all the model's; text level: the tokenizer's)
  void validate() const;  // names --max-tokens, --context, --threads and the sampling flags
};

enum class StopReason { max_tokens, stop_id, context_full };

struct Generated {
  std::vector<std::int32_t> tokens;  // generated ids (the stop id included when it stopped there)
  StopReason reason = StopReason::max_tokens;
};

// One sequence to generate: its prompt (at least one token) and its seed.
struct Request {
  std::vector<std::int32_t> prompt;
  std::uint64_t seed = 1;
};

// Token level: every request prefilled in its own slot, then all running
// sequences decoded together, one pass per token, each leaving the batch when
// it stops. Draw i of a request (its i-th generated token) uses Philox(seed,
// kSampleStream, i); the repetition penalty reads the request's prompt and
// its tokens so far. `stop` ends a sequence (opt.stop_ids are added to it).
// on_token(request, id) receives each token as it is sampled (stop ids too).
// A prompt longer than the context is refused (std::length_error) before
// any pass runs.
std::vector<Generated> generate_tokens(model::Model& model, const std::vector<Request>& requests,
                                       const GenerateOptions& opt, const std::vector<std::int32_t>& stop,
                                       const std::function<void(std::size_t, std::int32_t)>& on_token = {});

// One sequence in the caller's session (a chat keeps its cache between
// turns): appends `tokens` to the slot's sequence in one prefill, then
// generates as generate_tokens does, the penalty reading `history` (the slot's
// tokens before `tokens`) and what follows. The session then holds the
// sequence and every generated token but the last.
Generated generate_in(model::Decoder& session, std::size_t slot, std::span<const std::int32_t> tokens,
                      std::span<const std::int32_t> history, std::uint64_t seed, const GenerateOptions& opt,
                      const std::vector<std::int32_t>& stop,
                      const std::function<void(std::size_t, std::int32_t)>& on_token = {});

// The ids that end a turn for a tokenizer: its end-of-text token and the
// special tokens named like an end of turn (<|eot_id|>, <|im_end|>, <|end|>,
// <|end_of_text|>, <|endoftext|>, </s>, <end_of_turn>, <|eom_id|>).
std::vector<std::int32_t> stop_ids_of(const tok::Tokenizer& tok);

// Text level: encodes the prompt as the model sees it (tok's encode_prompt:
// BOS first when the tokenizer adds one, then ordinary text; an empty prompt
// without BOS starts from the end-of-text token, the document separator the
// model was trained with, or the begin token), then generates with seed opt.sampling.seed.
// on_text receives each generated token's bytes as it comes (stop tokens are
// not printed). Returns the generated ids (the stop id included when it
// stopped there).
std::vector<std::int32_t> generate(model::Model& model, const tok::Tokenizer& tok, std::string_view prompt,
                                   const GenerateOptions& opt,
                                   const std::function<void(std::string_view)>& on_text = {});

// The same from a prompt already in ids (a chat template's output).
Generated generate_ids(model::Model& model, const tok::Tokenizer& tok, std::vector<std::int32_t> prompt,
                       const GenerateOptions& opt, const std::function<void(std::string_view)>& on_text = {});

}  // namespace lockstep::infer
