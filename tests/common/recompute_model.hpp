// A model whose decode sessions keep no cache: every pass computes each
// requested position's logits by the wrapped model's next_logits over the
// sequence so far (the window recompute). infer::generate over it is the
// generation a model without a decode mode would run: the reference the
// KV-cache decode's text is compared with.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <vector>

#include "lockstep/model/model.hpp"

namespace lockstep::test {

class RecomputeModel final : public model::Model {
 public:
  explicit RecomputeModel(model::Model& inner) : inner_(inner) {}
  const model::ModelConfig& config() const override { return inner_.config(); }
  std::vector<model::Param>& params() override { return inner_.params(); }
  const std::vector<model::Param>& params() const override {
    return static_cast<const model::Model&>(inner_).params();
  }
  void init(std::uint64_t) override { throw std::logic_error("RecomputeModel: no init"); }
  float forward_backward(std::span<const std::int32_t>, std::span<const std::int32_t>, std::int64_t, std::int64_t,
                         bool, int) override {
    throw std::logic_error("RecomputeModel: inference only");
  }
  float loss(std::span<const std::int32_t> inputs, std::span<const std::int32_t> targets, std::int64_t batch,
             std::int64_t seq, int threads) override {
    return inner_.loss(inputs, targets, batch, seq, threads);
  }
  std::vector<float> next_logits(std::span<const std::int32_t> tokens, int threads) override {
    return inner_.next_logits(tokens, threads);
  }
  void set_recompute(bool recompute) override { inner_.set_recompute(recompute); }
  std::unique_ptr<model::Decoder> decoder(std::size_t slots, std::size_t context) override {
    const auto max = static_cast<std::size_t>(inner_.config().max_seq);
    return std::make_unique<Session>(inner_, slots, context == 0 ? max : context);
  }

 private:
  class Session final : public model::Decoder {
   public:
    Session(model::Model& m, std::size_t slots, std::size_t ctx) : m_(m), seqs_(slots), ctx_(ctx) {}
    std::size_t slots() const override { return seqs_.size(); }
    std::size_t context() const override { return ctx_; }
    std::size_t length(std::size_t slot) const override { return seqs_.at(slot).size(); }
    void clear(std::size_t slot) override { seqs_.at(slot).clear(); }
    void truncate(std::size_t slot, std::size_t n) override {
      if (n > seqs_.at(slot).size()) throw std::out_of_range("RecomputeModel: truncate past the sequence");
      seqs_[slot].resize(n);
    }
    void set_prefill_chunk(std::size_t) override {}
    std::vector<float> prefill(std::size_t slot, std::span<const std::int32_t> tokens, bool all_rows,
                               int threads) override {
      std::vector<float> out;
      for (std::size_t i = 0; i < tokens.size(); ++i) {
        std::vector<float> l = append(slot, tokens[i], threads, all_rows || i + 1 == tokens.size());
        out.insert(out.end(), l.begin(), l.end());
      }
      return out;
    }
    std::vector<float> decode(std::span<const std::size_t> slots, std::span<const std::int32_t> tokens,
                              int threads) override {
      std::vector<float> out;
      for (std::size_t i = 0; i < slots.size(); ++i) {
        std::vector<float> l = append(slots[i], tokens[i], threads, true);
        out.insert(out.end(), l.begin(), l.end());
      }
      return out;
    }

   private:
    std::vector<float> append(std::size_t slot, std::int32_t token, int threads, bool logits) {
      std::vector<std::int32_t>& s = seqs_.at(slot);
      if (s.size() + 1 > ctx_) throw std::length_error("RecomputeModel: the context is full");
      s.push_back(token);
      return logits ? m_.next_logits(s, threads) : std::vector<float>{};
    }
    model::Model& m_;
    std::vector<std::vector<std::int32_t>> seqs_;
    std::size_t ctx_;
  };
  model::Model& inner_;
};

}  // namespace lockstep::test
