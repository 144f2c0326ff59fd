#include "lockstep/infer/generate.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace lockstep::infer {

void GenerateOptions::validate() const {
  sampling.validate();
  if (max_tokens < 0) throw std::invalid_argument(fmt::format("--max-tokens must be >= 0, got {}", max_tokens));
  if (context < 0) throw std::invalid_argument(fmt::format("--context must be >= 0 (0: the model's), got {}", context));
  if (threads < 0) throw std::invalid_argument(fmt::format("--threads must be >= 0, got {}", threads));
  if (sample_vocab < 0) throw std::invalid_argument(fmt::format("sample_vocab must be >= 0, got {}", sample_vocab));
}

namespace {

// A sequence being generated: its slot, its tokens so far (the penalty's
// input), its seed and the logits its next token is sampled from.
struct Running {
  std::size_t slot;
  std::vector<std::int32_t> history;
  std::uint64_t seed;
  std::vector<float> logits;
};

// Samples and decodes until every sequence has stopped: one pass per token
// for all running sequences together.
std::vector<Generated> decode_loop(model::Decoder& session, std::vector<Running>& seqs, const GenerateOptions& opt,
                                   std::vector<std::int32_t> stops, std::size_t V,
                                   const std::function<void(std::size_t, std::int32_t)>& on_token) {
  stops.insert(stops.end(), opt.stop_ids.begin(), opt.stop_ids.end());
  const std::size_t n = seqs.size(), ctx = session.context();
  const std::size_t sample_n = opt.sample_vocab > 0 ? std::min(V, static_cast<std::size_t>(opt.sample_vocab)) : V;
  std::vector<Generated> out(n);
  std::vector<bool> running(n, opt.max_tokens > 0);
  for (;;) {
    std::vector<std::size_t> slots, which;
    std::vector<std::int32_t> next;
    for (std::size_t r = 0; r < n; ++r) {
      if (!running[r]) continue;
      SamplingOptions so = opt.sampling;
      so.seed = seqs[r].seed;
      const auto draw = static_cast<std::uint64_t>(out[r].tokens.size());
      const std::span<const float> row(seqs[r].logits.data(), sample_n);
      const std::int32_t id = sample(row, so, draw, seqs[r].history);
      out[r].tokens.push_back(id);
      seqs[r].history.push_back(id);
      if (on_token) on_token(r, id);
      if (std::find(stops.begin(), stops.end(), id) != stops.end()) {
        out[r].reason = StopReason::stop_id;
        running[r] = false;
      } else if (static_cast<std::int64_t>(out[r].tokens.size()) >= opt.max_tokens) {
        out[r].reason = StopReason::max_tokens;
        running[r] = false;
      } else if (session.length(seqs[r].slot) >= ctx) {
        out[r].reason = StopReason::context_full;  // the sampled token has no position left to be read at
        running[r] = false;
      } else {
        slots.push_back(seqs[r].slot);
        which.push_back(r);
        next.push_back(id);
      }
    }
    if (slots.empty()) break;
    const std::vector<float> l = session.decode(slots, next, opt.threads);
    for (std::size_t i = 0; i < which.size(); ++i)
      seqs[which[i]].logits.assign(l.begin() + static_cast<std::ptrdiff_t>(i * V),
                                   l.begin() + static_cast<std::ptrdiff_t>((i + 1) * V));
  }
  return out;
}

void check_prompt(std::size_t have, std::size_t n, std::size_t ctx, const model::ModelConfig& cfg) {
  if (n == 0) throw std::invalid_argument("generate: a prompt of no tokens");
  if (have + n > ctx)
    throw std::length_error(fmt::format("the prompt has {} tokens{}; the context holds {} (--context, the model's "
                                        "max_seq {})",
                                        n, have > 0 ? fmt::format(" after {} cached", have) : std::string(), ctx,
                                        cfg.max_seq));
}

}  // namespace

std::vector<Generated> generate_tokens(model::Model& model, const std::vector<Request>& requests,
                                       const GenerateOptions& opt, const std::vector<std::int32_t>& stop,
                                       const std::function<void(std::size_t, std::int32_t)>& on_token) {
  opt.validate();
  if (requests.empty()) return {};
  auto session = model.decoder(requests.size(), static_cast<std::size_t>(opt.context));
  for (const Request& r : requests) check_prompt(0, r.prompt.size(), session->context(), model.config());
  std::vector<Running> seqs;
  for (std::size_t r = 0; r < requests.size(); ++r) {
    seqs.push_back({r, requests[r].prompt, requests[r].seed, {}});
    if (opt.max_tokens > 0) seqs.back().logits = session->prefill(r, requests[r].prompt, false, opt.threads);
  }
  return decode_loop(*session, seqs, opt, stop, static_cast<std::size_t>(model.config().vocab_size), on_token);
}

Generated generate_in(model::Decoder& session, std::size_t slot, std::span<const std::int32_t> tokens,
                      std::span<const std::int32_t> history, std::uint64_t seed, const GenerateOptions& opt,
                      const std::vector<std::int32_t>& stop,
                      const std::function<void(std::size_t, std::int32_t)>& on_token) {
  opt.validate();
  if (tokens.empty()) throw std::invalid_argument("generate: a prompt of no tokens");
  if (session.length(slot) + tokens.size() > session.context())
    throw std::length_error(fmt::format("the conversation needs {} positions; the context holds {}",
                                        session.length(slot) + tokens.size(), session.context()));
  std::vector<Running> seqs{{slot, std::vector<std::int32_t>(history.begin(), history.end()), seed, {}}};
  seqs[0].history.insert(seqs[0].history.end(), tokens.begin(), tokens.end());
  seqs[0].logits = session.prefill(slot, tokens, false, opt.threads);
  if (opt.max_tokens == 0) return {};
  const std::size_t V = seqs[0].logits.size();
  return decode_loop(session, seqs, opt, stop, V, on_token).front();
}

std::vector<std::int32_t> stop_ids_of(const tok::Tokenizer& tok) {
  std::vector<std::int32_t> ids;
  if (tok.eos()) ids.push_back(*tok.eos());
  static const char* const kEndOfTurn[] = {"<|eot_id|>",      "<|im_end|>", "<|end|>",       "<|end_of_text|>",
                                           "<|endoftext|>",   "</s>",       "<end_of_turn>", "<|eom_id|>"};
  for (const tok::SpecialToken& s : tok.special_tokens())
    for (const char* name : kEndOfTurn)
      if (s.text == name && std::find(ids.begin(), ids.end(), s.id) == ids.end()) ids.push_back(s.id);
  return ids;
}

Generated generate_ids(model::Model& model, const tok::Tokenizer& tok, std::vector<std::int32_t> prompt,
                       const GenerateOptions& opt, const std::function<void(std::string_view)>& on_text) {
  opt.validate();
  const model::ModelConfig& cfg = model.config();
  if (tok.vocab_size() > cfg.vocab_size)
    throw std::invalid_argument(fmt::format("the tokenizer has {} tokens, the model only {}", tok.vocab_size(),
                                            cfg.vocab_size));
  const std::vector<std::int32_t> stops = opt.stop_at_eos ? stop_ids_of(tok) : std::vector<std::int32_t>{};
  // Ids the tokenizer cannot decode (a model vocabulary padded beyond the
  // tokenizer's) are never sampled.
  GenerateOptions o = opt;
  o.sample_vocab = tok.vocab_size();
  Request req{std::move(prompt), opt.sampling.seed};
  auto on_token = [&](std::size_t, std::int32_t id) {
    if (!on_text) return;
    if (std::find(stops.begin(), stops.end(), id) != stops.end()) return;
    on_text(tok.decode(std::span<const std::int32_t>(&id, 1)));
  };
  return generate_tokens(model, {req}, o, stops, on_token).front();
}

std::vector<std::int32_t> generate(model::Model& model, const tok::Tokenizer& tok, std::string_view prompt,
                                   const GenerateOptions& opt, const std::function<void(std::string_view)>& on_text) {
  std::vector<std::int32_t> ids = tok.encode_prompt(prompt);
  if (ids.empty()) {
    if (tok.eos()) {
      ids.push_back(*tok.eos());
    } else if (tok.bos()) {
      ids.push_back(*tok.bos());
    } else {
      throw std::invalid_argument("an empty prompt needs a tokenizer with an end-of-text or begin token");
    }
  }
  return generate_ids(model, tok, std::move(ids), opt, on_text).tokens;
}

}  // namespace lockstep::infer
