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
// This is the kernel set of the fast model (model/transformer.cpp): a
// run(config, args) per op and direction, called by op type
// (k.forward<Op>(c, args), ad/kernel_set.hpp), with the contracts of the op's
// FwdArgs/BwdArgs (ops/kernel_args.hpp) and of model::SpecKernels;
// tests/model/cpu_kernels_test.cpp checks every one against the op spec.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "lockstep/ad/kernel_set.hpp"
#include "lockstep/backend/cpu/kernel_aux.hpp"
#include "lockstep/ops/all.hpp"
#include "lockstep/ops/units_fused.hpp"

namespace lockstep::cpu {

// The smallest piece of work (in element operations, ~32k by default) the
// kernels hand to another thread: below it a parallel region costs more than
// it saves. Tests lower it to split even micro shapes across threads (to show
// that the bits do not depend on the split). Process-wide.
void set_min_parallel_work(std::size_t ops);
std::size_t min_parallel_work();

class OpKernels : public ad::KeyedKernels<OpKernels, float> {
 public:
  using Index = ops::Index;
  using Aux = cpu::Aux;

  int threads = 1;  // set by the caller before each pass (util::resolve_threads)

  void begin_forward() {}

  LOCKSTEP_FLOAT_OP_KERNELS(Aux)  // one run() per op and direction (ad/kernel_set.hpp)
  void add_into(std::size_t n, float* acc, const float* x);

  // Fusions of the int8 units (ops/units_fused.hpp, ops_units_fused.cpp): the
  // bits of the unfused Int8Linear (and Gelu) calls, fewer passes and products.
  void units_shared_fwd(std::size_t rows, std::size_t in, const float* x, const ops::UnitFwdPart* parts,
                        std::size_t n_parts);
  void units_shared_bwd(std::size_t rows, std::size_t in, bool unit_backward, const float* x,
                        const ops::UnitBwdPart* parts, std::size_t n_parts);
  void units_mlp_gelu_fwd(const ops::UnitMlpGelu& a, Aux& gelu_aux);

  // BitLinear on a frozen weight held as its ternary codes (a LoRA base: no
  // f32 copy of it anywhere), in TERNARY2's bytes (tensor/storage.hpp: element
  // i in byte i / 4 at bits 2·(i % 4), the field code + 1) and its one scale:
  // the bits of run(BitLinear) on F32 masters whose quantizer gives these
  // codes and scale. Forward: the same code product and epilogue, the weight
  // codes given to the GEMM one column tile at a time (cpu::gemm_b_tiles);
  // nothing kept (a frozen weight has no dW). Backward: dx = dy·Ŵ, Ŵ = code ·
  // scale made tile by tile (the forward's kept Ŵ, bit for bit). No dW.
  void bitlinear_codes_fwd(const ops::QuantLinearConfig& c, const float* x, const std::uint8_t* codes, float scale,
                           float* y);
  void bitlinear_codes_bwd(const ops::QuantLinearConfig& c, const std::uint8_t* codes, float scale, const float* dy,
                           float* dx);

 private:
  // BitLinear's two halves around the code product, shared by run(BitLinear)
  // and bitlinear_codes_fwd: the activation codes (codes_x_, step_; x̂ too
  // when xhat is given) and the epilogue (acc · step_n) · scale.
  void quantize_bitlinear_activations(const float* x, std::size_t N, std::size_t K, float* xhat);
  void scale_bitlinear_outputs(std::size_t N, std::size_t M, float scale, float* y);
  // RoPE's cos/sin table for the last configuration asked (ops::Rope::table).
  const ops::Rope::Table<float>& rope_table(const ops::Rope::Config& c);
  void rope_apply(const ops::Rope::Config& c, const float* x, float* y, bool inverse);

  std::vector<float> xhat_;  // norms' backward: the normalized input [rows, dim]
  std::vector<float> absw_;  // BitLinear: |w| for the weight scale
  std::vector<float> codes_x_, codes_w_;  // BitLinear: integer codes as floats
  std::vector<float> step_;               // BitLinear: the activation rows' code steps
  struct UnitScratch {                    // Int8Linear: two operands' codes and steps, the int32
    std::vector<std::int8_t> qa, qb;      // product, the float backward's dequantized operand
    std::vector<float> sa, sb, deq;
    std::vector<std::int32_t> acc;
    std::vector<std::int8_t> qc;  // the fused paths: a third operand's codes
    std::vector<float> sc, deq2;
  } units_;
  ops::Rope::Config rope_key_{};
  bool rope_valid_ = false;
  ops::Rope::Table<float> rope_tab_;
};

}  // namespace lockstep::cpu
