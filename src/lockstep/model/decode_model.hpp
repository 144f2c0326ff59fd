// A model built for decoding only, on the CPU (issue 15: the 2B4T model's
// 2.4G parameters in ~1.2 GB instead of the training model's ~40 GB).
//
// It holds each weight once, in the form the CPU decode backend
// (model/decode.hpp, DecodeBackend<cpu::OpKernels>) reads it every pass, and
// nothing else: no gradients, no optimizer state, no F32 masters of ternary
// weights:
//   * a BitLinear projection (BitNet): its 2-bit codes and scale
//     (cpu::TernaryMatrix), from TERNARY2 codes as the file holds them, or
//     from F32 weights through the spec's quantizer (ops::quantize_ternary);
//   * a Linear (LLaMA's projections, the LM head): DecodeBackend::pack_linear's
//     form: column panels of Q8 codes and f16 scales where every block of 32
//     weights is codes × one scale (a Q8_0 file's), of f16 where f16 holds
//     every value (an F16 file's), else f32 (gemm_packed's [K, ldb] below
//     4096 outputs, panels for the head);
//   * the token embedding: when tied and the head is on panels, no copy at
//     all (its rows are read from the head's panels); else as f16 rows where
//     the values are f16, else f32;
//   * norm weights f32.
// A pass runs the same engine over the same DecodeKernels<cpu::OpKernels>
// as the training model's decode sessions (KernelModel::decoder), with the
// backend pointed at these weights: the same kernels on the same values, so
// the same logits bits (tests/infer/decode_model_test.cpp), as long as the
// F32 model holds the file's ternary scales (the loader says in its notes
// where it had to hold a nearby one: the decode-only model keeps the file's).
//
// Families: llama and bitnet (those model files hold); no LoRA tensors.
// Training calls (init, forward_backward, loss) and params() throw
// std::logic_error: there is nothing to train.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "lockstep/model/model.hpp"

namespace lockstep::model {

// The bytes a decode-only model holds, by what they are (capacities of the
// allocations).
struct DecodeModelBytes {
  std::size_t ternary = 0;      // BitLinear 2-bit code words
  std::size_t head = 0;         // the LM head's weights (Q8, f16 or f32 panels; small f32: gemm_packed)
  std::size_t linear = 0;       // other Linear weights (Q8 or f16 panels, or gemm_packed f32)
  std::size_t embedding = 0;    // the token embedding rows when they are not the head's panels
  std::size_t norms = 0;        // f32 norm weights
  std::size_t total() const { return ternary + head + linear + embedding + norms; }
  // What one decode pass reads of the weights: everything but the embedding
  // table (a pass reads its B rows).
  std::size_t per_pass() const { return ternary + head + linear + norms; }
};

class DecodeModel : public Model {
 public:
  // What the weights take (the model holds nothing else of size but the key
  // table, one float a parameter).
  virtual DecodeModelBytes bytes() const = 0;
};

// The decode-only CPU model of `cfg` from its parameters in param_specs(cfg)
// order: F32 (value; gradients are dropped), F16 (frozen) or TERNARY2
// (frozen, BitLinear projections only). Consumes `params` tensor by tensor
// (each freed once packed). Throws std::invalid_argument naming the first
// parameter it cannot hold (another dtype, a ternary weight that is no
// BitLinear, a name or shape not the config's) and for a gpt2 config or LoRA
// tensors. threads: for the packing (0: all).
std::unique_ptr<DecodeModel> make_cpu_decode_model(const ModelConfig& cfg, std::vector<Param> params, int threads = 0);

}  // namespace lockstep::model
