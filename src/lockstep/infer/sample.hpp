// Sampling the next token from logits, deterministically: the same logits,
// options, seed and draw index give the same token on every machine.
//
//   0. repetition_penalty r != 1 (CTRL's, as Hugging Face and llama.cpp apply
//      it): every distinct id among the last repeat_last_n tokens of the
//      history (0: all of it) has its logit x replaced by x / r if x > 0,
//      else x * r (one correctly rounded operation each).
//   1. temperature 0: greedy, the largest logit (lowest id on ties). Stop.
//   2. z_i = logit_i / temperature (one correctly rounded division each).
//   3. Order the ids by (z descending, id ascending) — a total order, so the
//      sort's result does not depend on the sort algorithm; keep the first
//      top_k (0: all).
//   4. p = softmax of the kept z in that order: ops::Softmax::row<float>
//      (canonical max, lockstep's exp, canonical sum, one division each).
//   5. top_p < 1: keep the shortest prefix whose running float sum (in order,
//      left to right) reaches top_p; at least one candidate.
//   6. u = Philox uniform(seed, stream kSampleStream, index) in [0, 1);
//      target = u · (sum of the kept p, in order); the token is the first
//      kept candidate whose running sum exceeds target (the last one if none:
//      rounding can leave target just at the total).
// Everything is float arithmetic in a fixed order, so there is nothing a
// compiler or a thread count could change.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace lockstep::infer {

inline constexpr std::uint64_t kSampleStream = 0x73616d706c65ull;  // "sample"

struct SamplingOptions {
  float temperature = 0.8f;  // 0 = greedy
  std::int32_t top_k = 40;   // 0 = no limit
  float top_p = 0.95f;       // 1 = no limit
  float repetition_penalty = 1.0f;  // 1 = none
  std::int32_t repeat_last_n = 64;  // the history the penalty reads (0: all)
  std::uint64_t seed = 1;
  // throws std::invalid_argument naming --temperature / --top-k / --top-p /
  // --repetition-penalty / --repeat-last-n
  void validate() const;
};

struct Candidate {
  std::int32_t id;
  float p;  // softmax probability over the top_k candidates (before the top_p cut)
};

// Steps 2–5: the kept candidates in order. Throws std::runtime_error when a
// logit is NaN or +Inf, or the logits are empty.
std::vector<Candidate> candidates(std::span<const float> logits, const SamplingOptions& opt);

// The sampled token for draw number `index` (generation uses the number of
// tokens generated before it), the penalty reading `history` (the tokens so
// far, prompt included).
std::int32_t sample(std::span<const float> logits, const SamplingOptions& opt, std::uint64_t index,
                    std::span<const std::int32_t> history = {});

// Step 0 in place (ids outside the logits are ignored).
void apply_repetition_penalty(std::span<float> logits, std::span<const std::int32_t> history, float penalty,
                              std::int32_t last_n);

// Greedy: the index of the largest logit, lowest on ties (NaN refused).
std::int32_t argmax(std::span<const float> logits);

}  // namespace lockstep::infer
