// Text generation: a prompt, then one sampled token at a time (sample.hpp)
// from the model's next-token logits over the last max_seq tokens.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "lockstep/infer/sample.hpp"
#include "lockstep/model/model.hpp"
#include "lockstep/tok/tokenizer.hpp"

namespace lockstep::infer {

struct GenerateOptions {
  SamplingOptions sampling;
  std::int64_t max_tokens = 200;  // tokens to generate (the prompt not counted)
  bool stop_at_eos = true;        // stop after the tokenizer's end-of-text token
  int threads = 0;
  void validate() const;          // names --max-tokens and the sampling flags
};

// Encodes the prompt as ordinary text (an empty prompt starts from the
// end-of-text token, the document separator the model was trained with),
// then generates. on_text receives each generated token's bytes as it comes
// (the end-of-text token is not printed). Draw i uses Philox index i.
// Returns the generated ids (end-of-text included when it stopped there).
std::vector<std::int32_t> generate(model::Model& model, const tok::Tokenizer& tok, std::string_view prompt,
                                   const GenerateOptions& opt,
                                   const std::function<void(std::string_view)>& on_text = {});

}  // namespace lockstep::infer
