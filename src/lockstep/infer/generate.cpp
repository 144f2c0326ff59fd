#include "lockstep/infer/generate.hpp"

#include <stdexcept>

#include <fmt/format.h>

namespace lockstep::infer {

void GenerateOptions::validate() const {
  sampling.validate();
  if (max_tokens < 0) throw std::invalid_argument(fmt::format("--max-tokens must be >= 0, got {}", max_tokens));
  if (threads < 0) throw std::invalid_argument(fmt::format("--threads must be >= 0, got {}", threads));
}

std::vector<std::int32_t> generate(model::Model& model, const tok::Tokenizer& tok, std::string_view prompt,
                                   const GenerateOptions& opt, const std::function<void(std::string_view)>& on_text) {
  opt.validate();
  const model::ModelConfig& cfg = model.config();
  if (tok.vocab_size() > cfg.vocab_size)
    throw std::invalid_argument(fmt::format("the tokenizer has {} tokens, the model only {}", tok.vocab_size(),
                                            cfg.vocab_size));
  std::vector<std::int32_t> ctx = tok.encode(prompt);
  if (ctx.empty()) {
    if (tok.eos()) {
      ctx.push_back(*tok.eos());
    } else if (tok.bos()) {
      ctx.push_back(*tok.bos());
    } else {
      throw std::invalid_argument("an empty prompt needs a tokenizer with an end-of-text or begin token");
    }
  }
  std::vector<std::int32_t> out;
  for (std::int64_t i = 0; i < opt.max_tokens; ++i) {
    const std::size_t window = std::min<std::size_t>(ctx.size(), static_cast<std::size_t>(cfg.max_seq));
    const std::span<const std::int32_t> last(ctx.data() + (ctx.size() - window), window);
    std::vector<float> logits = model.next_logits(last, opt.threads);
    // Ids the tokenizer cannot decode (a model vocabulary padded beyond the
    // tokenizer's) are never sampled.
    logits.resize(static_cast<std::size_t>(tok.vocab_size()));
    const std::int32_t id = sample(logits, opt.sampling, static_cast<std::uint64_t>(i));
    out.push_back(id);
    ctx.push_back(id);
    if (opt.stop_at_eos && tok.eos() && id == *tok.eos()) break;
    if (on_text) {
      const std::string text = tok.decode(std::span<const std::int32_t>(&id, 1));
      on_text(text);
    }
  }
  return out;
}

}  // namespace lockstep::infer
