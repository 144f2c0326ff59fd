// The decode mode's bit-identity promises (model/decode.hpp), on the CPU
// model of every family's micro configs (and the variants that cross the
// 64-key attention block, use interleaved RoPE, multi-query and multi-head
// attention):
//   * every position's logits are the same bits from one prefill (the
//     training attention kernel), from a prefill in chunks (the cached
//     attention over several rows), token by token (the cached attention, one
//     row), and from the model's window recompute (next_logits);
//   * a sequence decoded alone = the same sequence decoded among 7 others of
//     other lengths; 1 and 2 threads give the same bits;
//   * the cached attention's CPU kernel = ops::CachedAttention = the rows of
//     ops::Attention::forward;
//   * a pass that would pass the context is refused, changing nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <ostream>
#include <stdexcept>
#include <string>

#include "decode_util.hpp"
#include "lockstep/backend/cpu/decode.hpp"
#include "lockstep/backend/cpu/ops.hpp"
#include "lockstep/tensor/convert.hpp"

namespace {

using namespace lockstep;
using namespace lockstep::infer::testing;

// A head of f16-exact values (k / 1024): the LM head, or the embedding where it is the head.
void round_head_to_f16_grid(model::Model& m) {
  const bool tied = m.config().tie_embeddings;
  for (auto& p : m.params())
    if (p.name.find(tied ? "embed_tokens" : "lm_head") != std::string::npos)
      for (auto& v : p.value) v = std::round(v * 1024.0f) / 1024.0f;
}

// Every matrix (2-D parameter) on a compact grid the CPU decode backend packs
// exactly: "f16-linears", values k / 1024; "q8-linears", each block of 32
// along a row int8 codes × one f16 scale (GGUF Q8_0's values; a row not whole
// blocks stays f32, as the writer leaves it).
void round_matrices(model::Model& m, bool q8) {
  for (auto& p : m.params()) {
    if (p.shape.size() != 2) continue;
    const auto K = static_cast<std::size_t>(p.shape[1]);
    if (!q8) {
      for (auto& v : p.value) v = std::round(v * 1024.0f) / 1024.0f;
      continue;
    }
    if (K % 32 != 0) continue;
    for (std::size_t b0 = 0; b0 < p.value.size(); b0 += 32) {
      float amax = 0;
      for (std::size_t i = b0; i < b0 + 32; ++i) amax = std::max(amax, std::fabs(p.value[i]));
      const float scale = tensor::f16_to_f32(tensor::f32_to_f16(amax / 127.0f));
      for (std::size_t i = b0; i < b0 + 32; ++i)
        p.value[i] = scale == 0 ? 0.0f : (std::round(p.value[i] / scale) + 0.0f) * scale;  // code 0 is +0
    }
  }
}

class Decode : public ::testing::TestWithParam<mt::NamedConfig> {
 protected:
  SplitMicroShapes split_;
  std::unique_ptr<model::Model> model() const {
    auto m = model::make_cpu_model(GetParam().cfg);
    mt::randomize(m->params(), 0xdec0de, 0.2);
    if (GetParam().name.find("f16-head") != std::string::npos) round_head_to_f16_grid(*m);
    if (GetParam().name.find("f16-linears") != std::string::npos) round_matrices(*m, false);
    if (GetParam().name.find("q8-linears") != std::string::npos) round_matrices(*m, true);
    return m;
  }
};

TEST_P(Decode, EveryPositionSameBitsFromPrefillChunksAndTokenByToken) {
  auto m = model();
  const auto& cfg = m->config();
  const std::size_t T = static_cast<std::size_t>(cfg.max_seq), V = static_cast<std::size_t>(cfg.vocab_size);
  const auto t = random_tokens(T, cfg.vocab_size, 7);
  const std::vector<float> one = prefill_all(*m, t, 2);
  ASSERT_EQ(one.size(), T * V);
  EXPECT_EQ(mt::differing_bits(token_by_token(*m, t, 2), one), 0u) << "token by token vs one prefill";
  EXPECT_EQ(mt::differing_bits(prefill_all(*m, t, 2, 7), one), 0u) << "prefill in chunks of 7 vs one prefill";
  // The window recompute (no cache) at a few positions: the last row of a window of i + 1 tokens.
  for (std::size_t i : {std::size_t{0}, std::size_t{1}, T / 2, T - 1}) {
    const std::vector<float> w = m->next_logits(std::span<const std::int32_t>(t.data(), i + 1), 1);
    const std::vector<float> row(one.begin() + static_cast<std::ptrdiff_t>(i * V),
                                 one.begin() + static_cast<std::ptrdiff_t>((i + 1) * V));
    EXPECT_EQ(mt::differing_bits(w, row), 0u) << "position " << i << ": next_logits vs prefill";
  }
  // The last-row prefill (what generation asks) = the last of all rows.
  auto d = m->decoder(1, 0);
  const std::vector<float> last = d->prefill(0, t, false, 1);
  EXPECT_EQ(mt::differing_bits(last, std::vector<float>(one.end() - static_cast<std::ptrdiff_t>(V), one.end())), 0u);
}

TEST_P(Decode, AloneEqualsAmongSevenOthersOnAnyThreadCount) {
  auto m = model();
  const Eight e = eight_sequences(m->config(), 11);
  const auto together = batched(*m, e.seqs, e.prompt, 2);
  const auto together1 = batched(*m, e.seqs, e.prompt, 1);
  for (std::size_t s = 0; s < e.seqs.size(); ++s) {
    const auto alone = batched(*m, {e.seqs[s]}, {e.prompt[s]}, 1);
    EXPECT_EQ(mt::differing_bits(together[s], alone[0]), 0u) << "sequence " << s << " among 7 others vs alone";
    EXPECT_EQ(mt::differing_bits(together[s], together1[s]), 0u) << "sequence " << s << ": 2 threads vs 1";
    EXPECT_EQ(mt::differing_bits(together[s], prefill_all(*m, e.seqs[s], 1)), 0u)
        << "sequence " << s << " batched vs one prefill";
  }
}

INSTANTIATE_TEST_SUITE_P(Micro, Decode, ::testing::ValuesIn(mt::micro_configs(true)), name_of);

// Heads of >= 4096 outputs, which the CPU decode backend runs on column
// panels (model/decode.hpp, kPanelMinOut: cpu::panel_gemm), f16 where f16
// holds them and f32 otherwise: bitnet's tied head (the embedding) both ways, llama's untied one f16.
std::vector<mt::NamedConfig> wide_head_configs() {
  model::ModelConfig b = model::preset("bitnet-micro");
  b.vocab_size = 5000;
  model::ModelConfig l = model::preset("llama-micro");
  l.vocab_size = 4500;
  l.tie_embeddings = false;
  return {{"bitnet-micro/vocab5000", b}, {"bitnet-micro/vocab5000,f16-head", b},
          {"llama-micro/vocab4500,untied,f16-head", l}};
}
INSTANTIATE_TEST_SUITE_P(WideHead, Decode, ::testing::ValuesIn(wide_head_configs()), name_of);

// Every matrix in a compact form the CPU decode backend runs on column panels
// (model/decode.hpp, pack_linear: Q8 codes and scales, f16), the projections
// (< 4096 outputs) as well as a wide head.
std::vector<mt::NamedConfig> compact_linear_configs() {
  model::ModelConfig l = model::preset("llama-micro");
  model::ModelConfig b = model::preset("bitnet-micro");
  b.vocab_size = 5000;
  return {{"llama-micro,q8-linears", l}, {"llama-micro,f16-linears", l}, {"bitnet-micro/vocab5000,q8-linears", b}};
}
INSTANTIATE_TEST_SUITE_P(CompactLinears, Decode, ::testing::ValuesIn(compact_linear_configs()), name_of);

TEST(DecodeBounds, PassesBeyondTheContextAreRefusedAndChangeNothing) {
  auto m = model::make_cpu_model(model::preset("llama-micro"));
  mt::randomize(m->params(), 3, 0.2);
  const auto& cfg = m->config();
  EXPECT_THROW(m->decoder(1, static_cast<std::size_t>(cfg.max_seq) + 1), std::invalid_argument);
  EXPECT_THROW(m->decoder(0, 0), std::invalid_argument);
  auto d = m->decoder(2, 10);
  EXPECT_EQ(d->context(), 10u);
  const auto t = random_tokens(11, cfg.vocab_size, 5);
  EXPECT_THROW(d->prefill(0, t, false, 1), std::length_error);  // 11 tokens, a context of 10
  EXPECT_EQ(d->length(0), 0u);
  const auto first = d->prefill(0, std::vector<std::int32_t>(t.begin(), t.begin() + 10), false, 1);
  EXPECT_EQ(d->length(0), 10u);
  const std::vector<std::size_t> s0{0}, s01{0, 1}, s11{1, 1}, s2{2};
  EXPECT_THROW(d->decode(s0, std::vector<std::int32_t>{1}, 1), std::length_error);
  EXPECT_THROW(d->decode(s01, std::vector<std::int32_t>{1, 2}, 1), std::length_error);  // slot 0 is full
  EXPECT_EQ(d->length(1), 0u);
  EXPECT_THROW(d->decode(s11, std::vector<std::int32_t>{1, 2}, 1), std::invalid_argument);
  EXPECT_THROW(d->decode(s2, std::vector<std::int32_t>{1}, 1), std::out_of_range);
  EXPECT_THROW(d->decode(s0, std::vector<std::int32_t>{1, 2}, 1), std::invalid_argument);
  EXPECT_THROW(d->prefill(1, std::vector<std::int32_t>{static_cast<std::int32_t>(cfg.vocab_size)}, false, 1),
               std::exception);  // a token outside the vocabulary
  EXPECT_EQ(d->length(1), 0u);
  // After the refusals slot 0 still gives its earlier bits; a cleared slot starts again.
  d->clear(0);
  EXPECT_EQ(mt::differing_bits(d->prefill(0, std::vector<std::int32_t>(t.begin(), t.begin() + 10), false, 1), first),
            0u);
}

// The cached attention against the training attention's spec, and its CPU
// kernel against the spec on 1 and 2 threads: rows of several slots at
// positions across 64-key blocks, grouped-query heads, odd head sizes.
TEST(CachedAttention, EqualsTheTrainingAttentionRowsAndTheCpuKernelEqualsTheSpec) {
  struct S {
    std::size_t seq, hq, hkv, dh, kb;
  };
  for (const S& sh : {S{130, 4, 2, 33, 64}, S{9, 4, 2, 3, 4}, S{70, 6, 1, 64, 64}, S{65, 2, 2, 128, 64}}) {
    const std::size_t B = 3;
    ops::Attention::Config ac{B, sh.seq, sh.hq, sh.hkv, sh.dh, 0.0, sh.kb};
    ad::Rng rng(sh.seq * 31 + sh.dh);
    const auto in = ops::cast_fields<ops::Attention::Inputs, float>(ops::Attention::sample(ac, rng));
    const auto want = ops::Attention::forward(ac, in);
    // The cache: slot b holds batch entry b's keys and values.
    const std::size_t qw = sh.hq * sh.dh;
    std::vector<std::int32_t> slot, pos;
    for (std::size_t b = 0; b < B; ++b)
      for (std::size_t i = 0; i < sh.seq; i += 1 + b)  // rows of every slot, interleaved, some positions skipped
        slot.push_back(static_cast<std::int32_t>(b)), pos.push_back(static_cast<std::int32_t>(i));
    std::vector<float> q(slot.size() * qw);
    for (std::size_t r = 0; r < slot.size(); ++r)
      for (std::size_t e = 0; e < qw; ++e)
        q[r * qw + e] = in.q[ops::Attention::qrow(ac, static_cast<std::size_t>(slot[r]), static_cast<std::size_t>(pos[r]), 0) + e];
    const ops::CachedAttention::Config cc{slot.size(), sh.hq, sh.hkv, sh.dh, B, sh.seq, sh.kb};
    std::vector<float> spec(q.size()), fast(q.size()), fast1(q.size());
    auto args = [&](float* o) {
      return ops::CachedAttention::Args<float>{.q = q.data(), .ldq = qw, .k_cache = in.k.ptr(), .v_cache = in.v.ptr(),
                                               .slot = slot.data(), .pos = pos.data(), .o = o};
    };
    ops::CachedAttention::forward(cc, args(spec.data()));
    cpu::cached_attention(cc, args(fast.data()), 2);
    cpu::cached_attention(cc, args(fast1.data()), 1);
    std::vector<float> rows(q.size());
    for (std::size_t r = 0; r < slot.size(); ++r)
      for (std::size_t e = 0; e < qw; ++e)
        rows[r * qw + e] = want.o[ops::Attention::qrow(ac, static_cast<std::size_t>(slot[r]), static_cast<std::size_t>(pos[r]), 0) + e];
    EXPECT_EQ(mt::differing_bits(spec, rows), 0u) << "spec vs training attention, seq " << sh.seq;
    EXPECT_EQ(mt::differing_bits(fast, spec), 0u) << "CPU kernel (2 threads) vs spec, seq " << sh.seq;
    EXPECT_EQ(mt::differing_bits(fast1, spec), 0u) << "CPU kernel (1 thread) vs spec, seq " << sh.seq;
    cpu::set_cached_attention_mutant(true);  // the planted bug: the scores unscaled
    cpu::cached_attention(cc, args(fast1.data()), 1);
    cpu::set_cached_attention_mutant(false);
    EXPECT_GT(mt::differing_bits(fast1, spec), 0u) << "the unscaled-scores mutant passed, seq " << sh.seq;
    // A row outside the cache is refused.
    pos[0] = static_cast<std::int32_t>(sh.seq);
    EXPECT_THROW(ops::CachedAttention::forward(cc, args(spec.data())), std::out_of_range);
  }
}

}  // namespace
