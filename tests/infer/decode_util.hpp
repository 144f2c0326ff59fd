// Shared helpers of the decode tests (CPU and GPU): the ways a sequence's
// logits can be computed with a model's decode sessions.
#pragma once

#include <gtest/gtest.h>

#include <cctype>
#include <cstdint>
#include <ostream>
#include <string>
#include <memory>
#include <vector>

#include "../model/model_test_util.hpp"
#include "lockstep/ad/rng.hpp"
#include "lockstep/backend/cpu/ops.hpp"
#include "lockstep/model/model.hpp"

namespace lockstep::model::testing {
// gtest prints a failing case's config by its name.
inline void PrintTo(const NamedConfig& c, std::ostream* os) { *os << c.name; }
}  // namespace lockstep::model::testing

namespace lockstep::infer::testing {

namespace mt = model::testing;

// A test name from a config's name ("gpt2-micro/untied" -> "gpt2_micro_untied").
inline std::string name_of(const ::testing::TestParamInfo<mt::NamedConfig>& i) {
  std::string s;
  for (char c : i.param.name) s += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return s;
}

// For a test's lifetime, the CPU kernels split even micro shapes over threads
// (cpu::min_parallel_work 256), so a 2-thread run really runs on 2.
struct SplitMicroShapes {
  SplitMicroShapes() : saved(cpu::min_parallel_work()) { cpu::set_min_parallel_work(256); }
  ~SplitMicroShapes() { cpu::set_min_parallel_work(saved); }
  SplitMicroShapes(const SplitMicroShapes&) = delete;
  SplitMicroShapes& operator=(const SplitMicroShapes&) = delete;
  std::size_t saved;
};

inline std::vector<std::int32_t> random_tokens(std::size_t n, std::int64_t vocab, std::uint64_t seed) {
  ad::Rng rng(seed);
  std::vector<std::int32_t> t(n);
  for (auto& x : t) x = static_cast<std::int32_t>(rng.below(static_cast<std::size_t>(vocab)));
  return t;
}

// Every position's logits [n, V] from one prefill of the whole sequence (chunk: the prefill's largest pass).
inline std::vector<float> prefill_all(model::Model& m, const std::vector<std::int32_t>& t, int threads,
                                      std::size_t chunk = 256) {
  auto d = m.decoder(1, 0);
  d->set_prefill_chunk(chunk);
  return d->prefill(0, t, true, threads);
}

// Every position's logits from a prefill of the first token, then one decode pass per token.
inline std::vector<float> token_by_token(model::Model& m, const std::vector<std::int32_t>& t, int threads) {
  auto d = m.decoder(1, 0);
  std::vector<float> out = d->prefill(0, std::vector<std::int32_t>(t.begin(), t.begin() + 1), true, threads);
  const std::size_t slot = 0;
  for (std::size_t i = 1; i < t.size(); ++i) {
    const std::vector<float> l = d->decode(std::vector<std::size_t>{slot}, std::vector<std::int32_t>{t[i]}, threads);
    out.insert(out.end(), l.begin(), l.end());
  }
  return out;
}

// 8 sequences (lengths[i] tokens each, prompts of prompt[i] tokens) in one
// session: each prompt prefilled, then every still-running sequence decoded
// together, one token a pass, sequences leaving as they end. Returns each
// sequence's logits of every position [lengths[i], V] (prompt rows from the prefill).
inline std::vector<std::vector<float>> batched(model::Model& m, const std::vector<std::vector<std::int32_t>>& seqs,
                                               const std::vector<std::size_t>& prompt, int threads) {
  const std::size_t S = seqs.size(), V = static_cast<std::size_t>(m.config().vocab_size);
  auto d = m.decoder(S, 0);
  std::vector<std::vector<float>> out(S);
  for (std::size_t s = 0; s < S; ++s)
    out[s] = d->prefill(s, std::vector<std::int32_t>(seqs[s].begin(), seqs[s].begin() + prompt[s]), true, threads);
  for (std::size_t step = 0;; ++step) {
    std::vector<std::size_t> slots;
    std::vector<std::int32_t> toks;
    for (std::size_t s = 0; s < S; ++s)
      if (prompt[s] + step < seqs[s].size()) {
        slots.push_back(s);
        toks.push_back(seqs[s][prompt[s] + step]);
      }
    if (slots.empty()) break;
    const std::vector<float> l = d->decode(slots, toks, threads);
    for (std::size_t i = 0; i < slots.size(); ++i)
      out[slots[i]].insert(out[slots[i]].end(), l.begin() + static_cast<std::ptrdiff_t>(i * V),
                           l.begin() + static_cast<std::ptrdiff_t>((i + 1) * V));
  }
  return out;
}

// The 8 sequences of the batch tests: lengths spread over the context.
struct Eight {
  std::vector<std::vector<std::int32_t>> seqs;
  std::vector<std::size_t> prompt;
};
inline Eight eight_sequences(const model::ModelConfig& cfg, std::uint64_t seed) {
  const auto ctx = static_cast<std::size_t>(cfg.max_seq);
  Eight e;
  for (std::size_t s = 0; s < 8; ++s) {
    const std::size_t len = std::max<std::size_t>(2, ctx - (s * 37) % ctx);
    e.seqs.push_back(random_tokens(len, cfg.vocab_size, seed + s));
    e.prompt.push_back(1 + (s * 13) % (len - 1));
  }
  return e;
}

}  // namespace lockstep::infer::testing
