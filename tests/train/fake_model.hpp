// A small stand-in Model for the trainer and checkpoint tests that must not
// depend on the transformer: it carries GPT-2's parameter names and shapes
// (so the checkpoint's HF layout is exercised), and computes a real loss:
//   h_t = wte[x_t] + wpe[t];  logits_t = h_t · wteᵀ;  loss = mean CE
// with the exact gradient into wte and wpe; every other parameter gets the
// gradient 0.01·value (so AdamW moves it too). Single-threaded arithmetic in
// a fixed order, so the bits are a function of the inputs alone; `threads` is
// accepted and ignored. poison_at_call makes the loss NaN on that call (tests).
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "lockstep/model/model.hpp"
#include "lockstep/num/rng.hpp"

namespace lockstep::fake {

class FakeGpt2 final : public model::Model {
 public:
  explicit FakeGpt2(model::ModelConfig c) : cfg_(std::move(c)) {
    const std::int64_t d = cfg_.d_model, V = cfg_.vocab_size, P = cfg_.max_seq, F = cfg_.d_ff;
    add("transformer.wte.weight", {V, d}, true);
    add("transformer.wpe.weight", {P, d}, true);
    for (std::int64_t l = 0; l < cfg_.n_layer; ++l) {
      const std::string h = "transformer.h." + std::to_string(l) + ".";
      add(h + "ln_1.weight", {d}, false);
      add(h + "ln_1.bias", {d}, false);
      add(h + "attn.c_attn.weight", {3 * d, d}, true);
      add(h + "attn.c_attn.bias", {3 * d}, false);
      add(h + "attn.c_proj.weight", {d, d}, true);
      add(h + "attn.c_proj.bias", {d}, false);
      add(h + "ln_2.weight", {d}, false);
      add(h + "ln_2.bias", {d}, false);
      add(h + "mlp.c_fc.weight", {F, d}, true);
      add(h + "mlp.c_fc.bias", {F}, false);
      add(h + "mlp.c_proj.weight", {d, F}, true);
      add(h + "mlp.c_proj.bias", {d}, false);
    }
    add("transformer.ln_f.weight", {d}, false);
    add("transformer.ln_f.bias", {d}, false);
  }

  const model::ModelConfig& config() const override { return cfg_; }
  void set_recompute(bool) override {}  // nothing kept between calls
  std::vector<model::Param>& params() override { return p_; }
  const std::vector<model::Param>& params() const override { return p_; }

  void init(std::uint64_t seed) override {
    for (std::size_t i = 0; i < p_.size(); ++i) {
      auto& v = p_[i].value;
      if (p_[i].shape.size() == 2) {
        num::rng::fill_normal(v.data(), v.size(), seed, i, 0, 0.0f, 0.02f, 1);
      } else {
        const bool is_weight = p_[i].name.find("ln_") != std::string::npos &&
                               p_[i].name.find(".weight") != std::string::npos;
        for (float& x : v) x = is_weight ? 1.0f : 0.0f;
      }
    }
  }

  float forward_backward(std::span<const std::int32_t> in, std::span<const std::int32_t> tg, std::int64_t batch,
                         std::int64_t seq, bool accumulate, int) override {
    ++calls_;
    for (auto& p : p_) {
      if (!accumulate) std::fill(p.grad.begin(), p.grad.end(), 0.0f);
    }
    std::vector<std::vector<float>> fresh(p_.size());
    for (std::size_t i = 0; i < p_.size(); ++i) fresh[i].assign(p_[i].value.size(), 0.0f);
    const float loss = run(in, tg, batch, seq, &fresh[0], &fresh[1]);
    for (std::size_t i = 2; i < p_.size(); ++i)
      for (std::size_t k = 0; k < fresh[i].size(); ++k) fresh[i][k] = 0.01f * p_[i].value[k];
    for (std::size_t i = 0; i < p_.size(); ++i)
      for (std::size_t k = 0; k < fresh[i].size(); ++k) p_[i].grad[k] = p_[i].grad[k] + fresh[i][k];
    return calls_ == poison_at_call ? NAN : loss;
  }

  float loss(std::span<const std::int32_t> in, std::span<const std::int32_t> tg, std::int64_t batch,
             std::int64_t seq, int) override {
    return run(in, tg, batch, seq, nullptr, nullptr);
  }

  std::vector<float> next_logits(std::span<const std::int32_t> tokens, int) override {
    std::vector<float> h = hidden(tokens.back(), static_cast<std::int64_t>(tokens.size()) - 1);
    return logits(h);
  }

  int calls_ = 0;
  int poison_at_call = -1;

 private:
  void add(std::string name, std::vector<std::int64_t> shape, bool decay) {
    std::size_t n = 1;
    for (auto s : shape) n *= static_cast<std::size_t>(s);
    p_.push_back({std::move(name), std::move(shape), std::vector<float>(n, 0.0f), std::vector<float>(n, 0.0f), decay,
                  true});
  }
  std::vector<float> hidden(std::int32_t tok, std::int64_t pos) const {
    const auto d = static_cast<std::size_t>(cfg_.d_model);
    std::vector<float> h(d);
    for (std::size_t k = 0; k < d; ++k)
      h[k] = p_[0].value[static_cast<std::size_t>(tok) * d + k] + p_[1].value[static_cast<std::size_t>(pos) * d + k];
    return h;
  }
  std::vector<float> logits(const std::vector<float>& h) const {
    const auto d = h.size();
    std::vector<float> z(static_cast<std::size_t>(cfg_.vocab_size));
    for (std::size_t v = 0; v < z.size(); ++v) {
      float acc = 0.0f;
      for (std::size_t k = 0; k < d; ++k) acc = std::fma(h[k], p_[0].value[v * d + k], acc);
      z[v] = acc;
    }
    return z;
  }
  float run(std::span<const std::int32_t> in, std::span<const std::int32_t> tg, std::int64_t batch, std::int64_t seq,
            std::vector<float>* g_wte, std::vector<float>* g_wpe) const {
    const auto d = static_cast<std::size_t>(cfg_.d_model);
    const float inv_n = 1.0f / static_cast<float>(batch * seq);
    float total = 0.0f;
    for (std::int64_t r = 0; r < batch * seq; ++r) {
      const std::int64_t pos = r % seq;
      const auto x = in[static_cast<std::size_t>(r)];
      const auto y = static_cast<std::size_t>(tg[static_cast<std::size_t>(r)]);
      const std::vector<float> h = hidden(x, pos);
      std::vector<float> z = logits(h);
      float m = -INFINITY;
      for (float v : z) m = v > m ? v : m;
      float s = 0.0f;
      for (float v : z) s += std::exp(v - m);
      const float lse = m + std::log(s);
      total += lse - z[y];
      if (!g_wte) continue;
      // dz_v = (softmax_v - [v == y]) / N; dh = Σ_v dz_v wte[v]; dwte[v] += dz_v h; dwte[x] += dh; dwpe[pos] += dh.
      std::vector<float> dh(d, 0.0f);
      for (std::size_t v = 0; v < z.size(); ++v) {
        const float dz = (std::exp(z[v] - lse) - (v == y ? 1.0f : 0.0f)) * inv_n;
        for (std::size_t k = 0; k < d; ++k) {
          dh[k] = std::fma(dz, p_[0].value[v * d + k], dh[k]);
          (*g_wte)[v * d + k] = std::fma(dz, h[k], (*g_wte)[v * d + k]);
        }
      }
      for (std::size_t k = 0; k < d; ++k) {
        (*g_wte)[static_cast<std::size_t>(x) * d + k] += dh[k];
        (*g_wpe)[static_cast<std::size_t>(pos) * d + k] += dh[k];
      }
    }
    return total * inv_n;
  }

  model::ModelConfig cfg_;
  std::vector<model::Param> p_;
};

inline std::unique_ptr<model::Model> make_fake(const model::ModelConfig& c) { return std::make_unique<FakeGpt2>(c); }

}  // namespace lockstep::fake
