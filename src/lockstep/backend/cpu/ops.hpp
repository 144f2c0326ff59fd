// The fast CPU kernels of the model's ops, in the canonical float arithmetic:
// each computes exactly its op specification's float expression
// (src/lockstep/ops/), bit for bit, for any thread count. Speed comes only
// from who computes what:
//   * matrix products go to cpu::gemm (same per-cell fma chain as ops::matmul);
//   * row-wise ops (norms, softmax/cross-entropy, quantizers) run rows on
//     threads, each row with the same canonical reductions (num/reduce.hpp)
//     and the same elementary functions (num/elementary.hpp) as the spec;
//   * column chains (norm and bias gradients, position/embedding scatters)
//     run columns (or vocabulary rows) on threads, each chain in its order;
//   * attention runs (batch, head) pairs on threads with register-tiled
//     score products; every score, exponential, online-softmax update and
//     backward chain is the spec's, in the spec's order.
// Values a backward would recompute (GELU's tanh, SwiGLU's sigmoid,
// BitLinear's dequantized operands, RoPE's cos/sin table) are kept from the
// forward instead: the same bits, computed once.
//
// This is the kernel set of the fast model (model/transformer.cpp); its method
// names and contracts are those of model::SpecKernels (model/spec_kernels.hpp),
// and tests/model/cpu_kernels_test.cpp checks every one against the op spec.
#pragma once

#include <cstddef>
#include <vector>

#include "lockstep/backend/cpu/kernel_aux.hpp"
#include "lockstep/ops/all.hpp"

namespace lockstep::cpu {

// The smallest piece of work (in element operations, ~32k by default) the
// kernels hand to another thread: below it a parallel region costs more than
// it saves. Tests lower it to split even micro shapes across threads (to show
// that the bits do not depend on the split). Process-wide.
void set_min_parallel_work(std::size_t ops);
std::size_t min_parallel_work();

class OpKernels {
 public:
  using Index = ops::Index;
  using Aux = cpu::Aux;

  int threads = 1;  // set by the caller before each pass (util::resolve_threads)

  void begin_forward() {}

  void embedding_fwd(const ops::Embedding::Config& c, const Index* ids, const float* wte, float* y);
  void embedding_bwd(const ops::Embedding::Config& c, const Index* ids, const float* dy, float* dwte);
  void positions_fwd(const ops::LearnedPositions::Config& c, const float* x, const float* wpe, float* y);
  void positions_bwd(const ops::LearnedPositions::Config& c, const float* dy, float* dx, float* dwpe);
  void linear_fwd(const ops::Linear::Config& c, const float* x, const float* w, const float* b, float* y);
  void linear_bwd(const ops::Linear::Config& c, const float* x, const float* w, const float* dy, float* dx,
                  float* dw, float* db);
  void bitlinear_fwd(const ops::QuantLinearConfig& c, const float* x, const float* w, float* y, Aux& aux);
  void bitlinear_bwd(const ops::QuantLinearConfig& c, const float* x, const float* w, const float* dy, float* dx,
                     float* dw, Aux& aux);
  void layernorm_fwd(const ops::NormConfig& c, const float* x, const float* g, const float* b, float* y,
                     float* mean, float* rstd);
  void layernorm_bwd(const ops::NormConfig& c, const float* x, const float* g, const float* mean,
                     const float* rstd, const float* dy, float* dx, float* dg, float* db);
  void rmsnorm_fwd(const ops::NormConfig& c, const float* x, const float* w, float* y, float* rstd);
  void rmsnorm_bwd(const ops::NormConfig& c, const float* x, const float* w, const float* rstd, const float* dy,
                   float* dx, float* dw);
  void gelu_fwd(const ops::ElementwiseConfig& c, const float* x, float* y, Aux& aux);
  void gelu_bwd(const ops::ElementwiseConfig& c, const float* x, const float* dy, float* dx, Aux& aux);
  void swiglu_fwd(const ops::ElementwiseConfig& c, const float* gate, const float* up, float* y, Aux& aux);
  void swiglu_bwd(const ops::ElementwiseConfig& c, const float* gate, const float* up, const float* dy,
                  float* dgate, float* dup, Aux& aux);
  void relu2mul_fwd(const ops::ElementwiseConfig& c, const float* gate, const float* up, float* y, Aux& aux);
  void relu2mul_bwd(const ops::ElementwiseConfig& c, const float* gate, const float* up, const float* dy,
                    float* dgate, float* dup, Aux& aux);
  void residual_fwd(const ops::ElementwiseConfig& c, const float* a, const float* b, float* y);
  void residual_bwd(const ops::ElementwiseConfig& c, const float* dy, float* da, float* db);
  void rope_fwd(const ops::Rope::Config& c, const float* x, float* y);
  void rope_bwd(const ops::Rope::Config& c, const float* dy, float* dx);
  void attention_fwd(const ops::Attention::Config& c, const float* q, std::size_t ldq, const float* k,
                     const float* v, std::size_t ldkv, float* o, float* lse);
  void attention_bwd(const ops::Attention::Config& c, const float* q, std::size_t ldq, const float* k,
                     const float* v, std::size_t ldkv, const float* o, const float* lse, const float* dout,
                     float* dq, float* dk, float* dv);
  void ce_fwd(const ops::CrossEntropy::Config& c, const float* logits, const Index* targets, float* loss,
              float* lse);
  void ce_bwd(const ops::CrossEntropy::Config& c, const float* logits, const Index* targets, const float* lse,
              const float* dloss, float* dlogits);
  void add_into(std::size_t n, float* acc, const float* x);

 private:
  // RoPE's cos/sin table for the last configuration asked (ops::Rope::table).
  const ops::Rope::Table<float>& rope_table(const ops::Rope::Config& c);
  void rope_apply(const ops::Rope::Config& c, const float* x, float* y, bool inverse);

  std::vector<float> xhat_;  // norms' backward: the normalized input [rows, dim]
  std::vector<float> absw_;  // BitLinear: |w| for the weight scale
  std::vector<float> codes_x_, codes_w_;  // BitLinear: integer codes as floats
  std::vector<float> step_;               // BitLinear: the activation rows' code steps
  ops::Rope::Config rope_key_{};
  bool rope_valid_ = false;
  ops::Rope::Table<float> rope_tab_;
};

}  // namespace lockstep::cpu
