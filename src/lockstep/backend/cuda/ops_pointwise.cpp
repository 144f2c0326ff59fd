// cuda::OpKernels: embeddings, positions, norms, activations, residual, RoPE,
// cross-entropy, add_into — the host side of the pointwise kernel family
// (kernels: pointwise.cu, embed.cu, rope.cu, norm.cu, loss.cu). Each method
// has the contract of its cpu::OpKernels twin and gives its bits; the
// constants of an expression are converted here exactly as the CPU converts
// them (the op spec's double constant -> float), then passed to the kernel.
//
// Differences from the CPU kernels, none in the bits of valid inputs: index
// checks that the CPU makes by reading the ids (token ids, targets) cannot be
// made here without a read-back, so an out-of-range id gives a NaN (forward)
// or contributes nothing (embedding backward) instead of an exception.
#include <stdexcept>
#include <vector>

#include "lockstep/backend/cuda/ops.hpp"
#include "lockstep/backend/cuda/lora_launch.hpp"
#include "lockstep/backend/cuda/pointwise_launch.hpp"

namespace lockstep::cuda {

static_assert(sizeof(ops::Index) == sizeof(launch::Index));

namespace {

launch::GeluConstants gelu_constants() {
  return {static_cast<float>(ops::Gelu::kSqrt2OverPi), static_cast<float>(ops::Gelu::kCubic),
          static_cast<float>(ops::Gelu::kCubic3)};
}

}  // namespace

// --- embeddings -------------------------------------------------------------------

void OpKernels::run(const ops::Embedding::Config& c, const ops::Embedding::FwdArgs<float>& args) {
  const auto& [ids, wte, y] = args;
  launch::embedding_fwd(c.tokens, c.vocab, c.dim, ids, wte, y);
}

void OpKernels::run(const ops::Embedding::Config& c, const ops::Embedding::BwdArgs<float>& args) {
  const auto& [ids, dy, dwte] = args;
  const std::size_t bytes = launch::embedding_bwd_scratch_bytes(c.tokens, c.vocab);
  scratch_.resize((bytes + sizeof(float) - 1) / sizeof(float));
  launch::embedding_bwd(c.tokens, c.vocab, c.dim, ids, dy, dwte, scratch_.data(), bytes);
}

void OpKernels::run(const ops::LearnedPositions::Config& c, const ops::LearnedPositions::FwdArgs<float>& args) {
  const auto& [x, wpe, y] = args;
  ops::LearnedPositions::validate(c);
  launch::positions_fwd(c.batch, c.seq, c.dim, c.offset, x, wpe, y);
}

void OpKernels::run(const ops::LearnedPositions::Config& c, const ops::LearnedPositions::BwdArgs<float>& args) {
  const auto& [dy, dx, dwpe] = args;
  ops::LearnedPositions::validate(c);
  if (dx != dy) copy_on_device(dx, dy, c.batch * c.seq * c.dim * sizeof(float));
  launch::positions_bwd_wpe(c.batch, c.seq, c.dim, c.max_seq, c.offset, dy, dwpe);
}

// --- norms ------------------------------------------------------------------------

void OpKernels::run(const ops::NormConfig& c, const ops::LayerNorm::FwdArgs<float>& args) {
  const auto& [x, g, b, y, mean, rstd] = args;
  launch::layernorm_fwd(c.rows, c.dim, static_cast<float>(c.eps), x, g, b, y, mean, rstd);
}

void OpKernels::run(const ops::NormConfig& c, const ops::LayerNorm::BwdArgs<float>& args) {
  const auto& [x, g, mean, rstd, dy, dx, dg, db] = args;
  launch::layernorm_bwd(c.rows, c.dim, x, g, mean, rstd, dy, dx, dg, db);
}

void OpKernels::run(const ops::NormConfig& c, const ops::RmsNorm::FwdArgs<float>& args) {
  const auto& [x, w, y, rstd] = args;
  launch::rmsnorm_fwd(c.rows, c.dim, static_cast<float>(c.eps), x, w, y, rstd);
}

void OpKernels::run(const ops::NormConfig& c, const ops::RmsNorm::BwdArgs<float>& args) {
  const auto& [x, w, rstd, dy, dx, dw] = args;
  launch::rmsnorm_bwd(c.rows, c.dim, x, w, rstd, dy, dx, dw);
}

// --- activations --------------------------------------------------------------------

void OpKernels::run(const ops::ElementwiseConfig& c, const ops::Gelu::FwdArgs<float>& args, Aux& aux) {
  const auto& [x, y] = args;
  aux.a.resize(c.n);  // tanh(u(x)), kept for the backward
  launch::gelu_fwd(c.n, gelu_constants(), x, y, aux.a.data());
}

void OpKernels::run(const ops::ElementwiseConfig& c, const ops::Gelu::BwdArgs<float>& args, Aux& aux) {
  const auto& [x, dy, dx] = args;
  const bool kept = aux.a.size() == c.n;
  launch::gelu_bwd(c.n, gelu_constants(), x, kept ? aux.a.data() : nullptr, dy, dx);
}

void OpKernels::run(const ops::ElementwiseConfig& c, const ops::SwiGlu::FwdArgs<float>& args, Aux& aux) {
  const auto& [gate, up, y] = args;
  aux.a.resize(c.n);  // σ(gate), kept for the backward
  launch::swiglu_fwd(c.n, gate, up, y, aux.a.data());
}

void OpKernels::run(const ops::ElementwiseConfig& c, const ops::SwiGlu::BwdArgs<float>& args, Aux& aux) {
  const auto& [gate, up, dy, dgate, dup] = args;
  const bool kept = aux.a.size() == c.n;
  launch::swiglu_bwd(c.n, gate, up, kept ? aux.a.data() : nullptr, dy, dgate, dup);
}

void OpKernels::run(const ops::ElementwiseConfig& c, const ops::ReluSqMul::FwdArgs<float>& args) {
  const auto& [gate, up, y] = args;
  launch::relu2mul_fwd(c.n, gate, up, y);
}

void OpKernels::run(const ops::ElementwiseConfig& c, const ops::ReluSqMul::BwdArgs<float>& args) {
  const auto& [gate, up, dy, dgate, dup] = args;
  launch::relu2mul_bwd(c.n, gate, up, dy, dgate, dup);
}

void OpKernels::run(const ops::ElementwiseConfig& c, const ops::ResidualAdd::FwdArgs<float>& args) {
  const auto& [a, b, y] = args;
  launch::residual_fwd(c.n, a, b, y);
}

// da = dy, db = dy: copies unless the caller routes them in place.
void OpKernels::run(const ops::ElementwiseConfig& c, const ops::ResidualAdd::BwdArgs<float>& args) {
  const auto& [dy, da, db] = args;
  if (da != dy) copy_on_device(da, dy, c.n * sizeof(float));
  if (db != dy) copy_on_device(db, dy, c.n * sizeof(float));
}

// --- RoPE -----------------------------------------------------------------------------

// The cos/sin table of ops::Rope::table<float> (the spec's own: the CPU's
// bits), [cos (seq × Dh/2), then sin], uploaded when the configuration changes.
static const float* rope_table_for(const ops::Rope::Config& c, ops::Rope::Config& key, bool& valid,
                                   DeviceBuffer<float>& table) {
  ops::Rope::validate(c);
  if (!(valid && key.seq == c.seq && key.head_dim == c.head_dim && key.base == c.base && key.offset == c.offset)) {
    const ops::Rope::Table<float> tab = ops::Rope::table<float>(c);
    std::vector<float> both(tab.cos);
    both.insert(both.end(), tab.sin.begin(), tab.sin.end());
    table.upload(both);
    key = c;
    valid = true;
  }
  return table.data();
}

void OpKernels::run(const ops::Rope::Config& c, const ops::Rope::FwdArgs<float>& args) {
  const auto& [x, y] = args;
  const float* tab = rope_table_for(c, rope_key_, rope_valid_, rope_table_);
  launch::rope(c.batch, c.seq, c.heads, c.head_dim, c.layout == ops::RopeLayout::interleaved, tab, x, y, false);
}

void OpKernels::run(const ops::Rope::Config& c, const ops::Rope::BwdArgs<float>& args) {
  const auto& [dy, dx] = args;
  const float* tab = rope_table_for(c, rope_key_, rope_valid_, rope_table_);
  launch::rope(c.batch, c.seq, c.heads, c.head_dim, c.layout == ops::RopeLayout::interleaved, tab, dy, dx, true);
}

// --- cross-entropy ----------------------------------------------------------------------

void OpKernels::run(const ops::CrossEntropy::Config& c, const ops::CrossEntropy::FwdArgs<float>& args) {
  const auto& [logits, targets, loss, lse] = args;
  launch::ce_fwd(c.rows, c.vocab, logits, targets, loss, lse);
}

void OpKernels::run(const ops::CrossEntropy::Config& c, const ops::CrossEntropy::BwdArgs<float>& args) {
  const auto& [logits, targets, lse, dloss, dlogits] = args;
  launch::ce_bwd(c.rows, c.vocab, logits, targets, lse, dloss, dlogits);
}

void OpKernels::add_into(std::size_t n, float* acc, const float* x) { launch::add_into(n, acc, x); }
void OpKernels::lora_scale_add(std::size_t n, float* y, const float* u, float s) { launch::lora_scale_add(n, y, u, s); }
void OpKernels::lora_scale(std::size_t n, float* out, const float* in, float s) { launch::lora_scale(n, out, in, s); }
void OpKernels::lora_dropout(std::size_t n, const float* in, float* out, std::uint64_t seed, std::uint64_t stream,
                             float p, float q) {
  launch::lora_dropout(n, in, out, seed, stream, p, q);
}

}  // namespace lockstep::cuda
