// The CUDA kernel set of the model's ops: the same run(config, args) per op
// and direction as cpu::OpKernels (backend/cpu/ops.hpp) and
// model::SpecKernels, called by op type (ad/kernel_set.hpp), on device
// pointers. Every kernel computes its op specification's float expression bit
// for bit (DESIGN.md §1); the start-up gates (gate.hpp) prove it on this device
// against cpu::OpKernels before a run uses a kernel.
//
// The definitions are split by kernel family, each in its .cpp (host side,
// g++) beside its .cu (kernels, nvcc), joined only by plain launcher
// declarations, so nvcc never sees the op headers:
//   ops.cpp            staging, fills, loss sum                 (kernels: pointwise.cu)
//   ops_linear.cpp     linear, BitLinear                        (gemm.cu, quant.cu)
//   ops_pointwise.cpp  embedding, positions, norms, activations, residual, RoPE,
//                      cross-entropy, add_into                  (pointwise.cu, norm.cu, loss.cu)
//   ops_attention.cpp  causal attention, forward and backward   (attention.cu)
//   ops_units.cpp      the int8 unit linear                     (quant.cu, int8_gemm.cu)
//   ops_units_fused.cpp  its fused paths (ops/units_fused.hpp)  (units_fused.cu, quant.cu, int8_gemm.cu)
// All kernels run on one stream, in call order; nothing here makes the host
// wait for the device except loss_mean (unless its result is deferred to a
// device slot), copy_to_host, staging without stage_step, and the live audits.
#pragma once

#include <cstddef>
#include <cstdint>

#include "lockstep/ad/kernel_set.hpp"
#include "lockstep/backend/cuda/device.hpp"
#include "lockstep/backend/cuda/profile.hpp"
#include "lockstep/ops/all.hpp"
#include "lockstep/ops/units_fused.hpp"

namespace lockstep::cuda {

// What a forward keeps for its backward, on the device (cpu::Aux's twin).
// The weight scale stays on the device (reading it would make the host wait);
// scale() reads it back for the gates and the audits. BitLinear keeps x̂ (a)
// and the weight's quantizer parameters (s: [0] the scale, [1] its inverse),
// not Ŵ: its backward makes Ŵ again from W into one scratch (the same kernel
// on the same W and parameters: the same bits), unless
// OpKernels::bitlinear_keeps_w() (LOCKSTEP_CUDA_BITLINEAR_KEEP_W=1: the
// session-8 way, Ŵ kept in b, 4 bytes a weight held until the backward).
struct Aux {
  DeviceBuffer<float> a, b, s;
  float scale() const { return s.empty() ? 0.0f : s.download()[0]; }
};

class OpKernels : public ad::KeyedKernels<OpKernels, float> {
 public:
  using Index = ops::Index;
  using Aux = cuda::Aux;
  template <class U>
  using Buffer = DeviceBuffer<U>;

  int threads = 1;  // unused (the CPU kernel sets' knob)
  // Tests and gates only: how the attention backward keeps its dS tiles. -1:
  // as many batch elements as launch::kAttentionMaxDsBytes holds (the model's
  // way); 0: none (the dq kernel recomputes them); k: chunks of k elements.
  int attention_ds_chunk = -1;

  void begin_forward() {}

  // --- the step profile's op scopes (profile.hpp) ----------------------------
  // The engine's calls by op type, as ad::KeyedKernels makes them, with the
  // op's name, direction and (for the linear ops) shape as the scope of the
  // launches it makes while a profile is open; nothing else changes.
  template <class Op, class... A>
  void forward(const ad::ConfigOf<Op>& c, const ops::FwdArgsOf<Op, float>& a, A&... aux) {
    if (profile::active()) [[unlikely]] {
      const profile::Scope scope(profile_label<Op>(c, "fwd"));
      return KeyedKernels::forward<Op>(c, a, aux...);
    }
    KeyedKernels::forward<Op>(c, a, aux...);
  }
  template <class Op, class... A>
  void backward(const ad::ConfigOf<Op>& c, const ops::BwdArgsOf<Op, float>& a, A&... aux) {
    if (profile::active()) [[unlikely]] {
      const profile::Scope scope(profile_label<Op>(c, "bwd"));
      return KeyedKernels::backward<Op>(c, a, aux...);
    }
    KeyedKernels::backward<Op>(c, a, aux...);
  }

  // --- the engine's glue (transformer.hpp's device hooks) --------------------
  // Copies n host indices to the device (slot 0: inputs, 1: targets) and
  // returns the device pointer, valid until the next call with the same slot.
  // Inside a stage_step window, indices that lie in the staged host arrays
  // are already on the device: their device twin is returned, nothing waits.
  const Index* stage_indices(const Index* host, std::size_t n, int slot);
  // A training step's whole batch (n inputs and n targets) to the device in
  // one asynchronous copy through page-locked memory. The window lasts until
  // end_stage_step(); the caller keeps the host arrays unchanged meanwhile.
  void stage_step(const Index* inputs, const Index* targets, std::size_t n);
  void end_stage_step() { staged_n_ = 0; }
  // The engine's mean loss: the canonical sum (num/reduce.hpp) of n device
  // floats divided by n_valid (0 when n_valid is 0), computed on the device.
  // With defer_loss_to set, the mean is written there (a device float) and 0
  // is returned without waiting; otherwise it is read back.
  float loss_mean(const float* x, std::size_t n, std::size_t n_valid);
  float* defer_loss_to = nullptr;
  void fill(float* x, std::size_t n, float value);
  void copy_to_host(float* host, const float* device, std::size_t n);

  // --- the ops (contracts: ops/kernel_args.hpp, cpu::OpKernels) --------------
  LOCKSTEP_FLOAT_OP_KERNELS(Aux)  // one run() per op and direction (ad/kernel_set.hpp)
  void add_into(std::size_t n, float* acc, const float* x);
  // The LoRA branch's glue (model/lora_branch.hpp; lora.cu, reference ops/lora_glue.hpp).
  void lora_scale_add(std::size_t n, float* y, const float* u, float s);
  void lora_scale(std::size_t n, float* out, const float* in, float s);
  void lora_dropout(std::size_t n, const float* in, float* out, std::uint64_t seed, std::uint64_t stream, float p,
                    float q);

  // Whether BitLinear's forward keeps Ŵ for the backward (the old way):
  // LOCKSTEP_CUDA_BITLINEAR_KEEP_W=1, read once. Otherwise the backward
  // re-quantizes W (launch::ternary_requantize) from the kept parameters.
  static bool bitlinear_keeps_w();
  // Tests only (the memory each way in one process): set it, between passes
  // (an Aux kept one way is recomputed by a backward run the other way).
  static void set_bitlinear_keeps_w(bool keep);

  // BitLinear on a frozen weight held on the device as its TERNARY2 codes (a
  // LoRA base: model/cuda_model.cpp holds no F32 copy of it there; `codes` is
  // a device pointer to the bytes, `scale` the tensor's scale): the bits of
  // run(BitLinear) on F32 masters whose quantizer gives these codes and scale,
  // as cpu::OpKernels::bitlinear_codes_fwd / _bwd. The matrix's codes are
  // expanded into the float GEMM's operand in one scratch (launch::
  // ternary2_expand: the codes as floats for the forward's integer product,
  // code · scale for the backward's Ŵ), then the same GEMM and epilogue as
  // run(BitLinear). Nothing is kept from the forward; no dW.
  void bitlinear_codes_fwd(const ops::QuantLinearConfig& c, const float* x, const std::uint8_t* codes, float scale,
                           float* y);
  // Whether the codes kernels are in use: unless LOCKSTEP_CUDA_BASE_CODES=0
  // (read once), which keeps a frozen base as F32 masters on the device
  // (model/cuda_model.cpp) and leaves the codes kernels' start-up gates out.
  static bool runs_codes();
  void bitlinear_codes_bwd(const ops::QuantLinearConfig& c, const std::uint8_t* codes, float scale, const float* dy,
                           float* dx);

  // Fusions of the int8 units (ops/units_fused.hpp, ops_units_fused.cpp): the
  // bits of the unfused Int8Linear (and Gelu) calls, fewer passes and products.
  void units_shared_fwd(std::size_t rows, std::size_t in, const float* x, const ops::UnitFwdPart* parts,
                        std::size_t n_parts);
  void units_shared_bwd(std::size_t rows, std::size_t in, bool unit_backward, const float* x,
                        const ops::UnitBwdPart* parts, std::size_t n_parts);
  void units_mlp_gelu_fwd(const ops::UnitMlpGelu& a, Aux& gelu_aux);

 private:
  template <class Op, class C>
  static std::string profile_label(const C& c, const char* direction) {
    if constexpr (requires { c.rows + c.in + c.out; }) return profile::op_label(Op::name, direction, c.rows, c.in, c.out);
    return profile::op_label(Op::name, direction);
  }

  DeviceBuffer<Index> staged_[2];
  // stage_step's window: the host arrays, their device copy (inputs then
  // targets) and the page-locked bounce buffer.
  const Index* staged_inputs_ = nullptr;
  const Index* staged_targets_ = nullptr;
  std::size_t staged_n_ = 0;
  DeviceBuffer<Index> staged_step_;
  PinnedBuffer<Index> pinned_;
  DeviceBuffer<float> scratch_;  // loss_mean's result and any kernel family's temporaries
  DeviceBuffer<float> w_operand_;  // BitLinear's backward: Ŵ of the one matrix being run
  // The int8 unit linear's temporaries (ops_units.cpp): codes, steps, the
  // int32 product, dequantized operands, the column quantizer's partials.
  struct UnitScratch {
    DeviceBuffer<std::int8_t> qa, qb;
    DeviceBuffer<float> sa, sb, deq, col;
    DeviceBuffer<std::int32_t> acc;
    DeviceBuffer<std::int8_t> qc;  // the fused paths: a third operand's codes and steps, a second dequantized one
    DeviceBuffer<float> sc, deq2;
  };
  UnitScratch units_;
  // Kernel families may keep device state here (e.g. RoPE's cos/sin table).
  DeviceBuffer<float> rope_table_;
  ops::Rope::Config rope_key_{};
  bool rope_valid_ = false;
};

}  // namespace lockstep::cuda
