// Start-up gates: before a run uses a CUDA kernel, the kernel is run on this
// device on ragged shapes (sizes off every tile multiple, tails, batch > 1)
// and its outputs compared with cpu::OpKernels by bit pattern (−0 ≠ +0, NaN
// payloads too). A second pass repeats every case with the allocator in poison
// mode (device.hpp), so a kernel that reads memory it did not write, or relies
// on zeroed memory, is caught deliberately. A failing kernel is refused with its
// name, the shape and the first differing cell.
//
// The cases are generated from the op list (gate_driver.cpp): every op of
// ops::ModelOps, on the shapes it declares (Op::gate_cases()), forward and
// backward, with the arguments its FwdArgs/BwdArgs fields describe
// (ops/kernel_args.hpp): the driver seeds, uploads, runs the CPU mirror and
// the CUDA kernel set, and compares every output and saved value with
// first_difference. Adding an op to ops::ModelOps is all it takes to gate it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::cuda::gate {

// "" when a[0..n) and b[0..n) have the same bits; otherwise the first
// differing cell: "y[1234] (row 9, col 82): cpu 0x3f800000 (1) vs cuda 0x3f800001 (1.0000001)".
// row_len > 0 adds the row/column position.
std::string first_difference(std::string_view tensor, const float* cpu, const float* gpu, std::size_t n,
                             std::size_t row_len = 0);
std::string first_difference(std::string_view tensor, const std::vector<float>& cpu, const std::vector<float>& gpu,
                             std::size_t row_len = 0);

struct Case {
  std::string kernel;  // "linear_fwd", "attention_bwd", ...
  std::string shape;   // "rows 37 in 65 out 129 bias", then the variant (" tile 3", " dx=dy", ...)
  std::string op;      // the op's name ("linear"), or the non-op kernel's ("add_into")
  int tile = 0;        // the GEMM block tile the case forces (launch::gemm_tile_override), 0: the rule's
  // Runs the case with inputs drawn from `seed`; returns "" or the first
  // difference (first_difference's message, prefixed by the tensor).
  std::function<std::string(std::uint64_t seed)> run;
  // One of several interchangeable implementations of a kernel (the int8
  // GEMM's IMMA tiles and cuBLASLt): a failure refuses that implementation
  // (its case records the outcome where the implementations are chosen,
  // int8_gemm.hpp), not the run. Outcomes report it all the same.
  bool optional = false;
};

// The kernels a training step launches beside the ops' (gate_train.cpp): the
// optimizer's four, the mean loss, the fill, the audits' gather.
std::vector<Case> train_cases();
// The int8 GEMM's implementations (gate_int8.cpp, Case::op "int8_gemm"): each
// against ops::int8_matmul_nt on ragged shapes, extreme codes and K = 131071.
std::vector<Case> int8_cases();
// The int8 row quantizer (gemm_launch.hpp's row_quantize_i8, gate_int8.cpp, Case::op
// "row_quantize_i8"): both of its paths against ops::quantize_rows.
std::vector<Case> row_quantize_cases();
// The fused RMSNorm + row quantizer (pointwise_launch.hpp's rmsnorm_quantize_i8,
// gate_int8.cpp, Case::op "rmsnorm_quantize_i8"): against cpu::OpKernels' RMSNorm
// and ops::quantize_rows of its y, the fused kernel and the two-launch path.
std::vector<Case> norm_quantize_cases();
// The two-pass column quantizer (gate_col_quant.cpp, Case::op "col_quant",
// optional): against the CPU's units::quantize_cols_i8 and column sums.
std::vector<Case> col_quant_cases();
// The LoRA branch's glue (gate_lora.cpp, Case::op "lora"): lora.cu against ops/lora_glue.hpp.
std::vector<Case> lora_cases();
// BitLinear on a weight held as TERNARY2 codes (gate_codes.cpp, Case::op "bitlinear_codes"):
// cuda::OpKernels::bitlinear_codes_fwd / _bwd against cpu::OpKernels' codes kernels.
std::vector<Case> bitlinear_codes_cases();
// Every case in one list: int8_cases(), row_quantize_cases(), norm_quantize_cases(), col_quant_cases(),
// every op of ops::ModelOps and add_into (gate_driver.cpp), bitlinear_codes_cases(), lora_cases(), then
// train_cases().
std::vector<Case> all_cases();
// The cases of the named ops (Case::op: "linear", "attention", "add_into", ...).
std::vector<Case> cases_of(std::initializer_list<std::string_view> ops);

struct Outcome {
  std::string kernel, shape;
  bool poisoned = false;  // the dirty-buffer pass
  std::string difference;  // "" = pass
  double seconds = 0;
  bool optional = false;  // the case's Case::optional
};
struct Options {
  std::uint64_t seed = 1;
  bool dirty_pass = true;  // repeat every case on a poisoned allocator
  std::uint32_t poison_pattern = 0x7F7FFFFFu;  // FLT_MAX
  // Only kernels whose name contains one of these (empty: all).
  std::vector<std::string> only;
};
// Runs the cases (clean, then poisoned), never throwing for a mismatch; a CUDA
// error is reported as the case's difference.
std::vector<Outcome> run_gates(const std::vector<Case>& cases, const Options& opt);

// The outcomes of an optional kernel's gate cases, kept where the kernel is
// chosen (int8_gemm.cpp, col_quant.cpp).
struct Tally {
  int passed = 0, failed = 0;
  std::string first_failure;  // "where: difference" of the first failure
  void add(const std::string& difference, const std::string& where) {
    if (difference.empty()) {
      ++passed;
      return;
    }
    if (++failed == 1) first_failure = where + ": " + difference;
  }
};

// Runs the cases here and now, clean and then poisoned, for the outcomes they
// record themselves (the optional cases' bookkeeping: int8_gemm.cpp,
// col_quant.cpp), not through run_gates: this may happen inside another gate
// case, whose poison state (restored on the way out, also on a throw) and
// launch-trace bracket must stay as they are.
void run_for_records(const std::vector<Case>& cases);

// Runs every gate and throws std::runtime_error naming the first failing
// kernel, shape and cell ("CUDA kernel refused: linear_fwd on rows 37 in 65 ...");
// an optional case's failure refuses only its implementation.
// What a training run calls once at start-up.
void require_all(const Options& opt = {});

}  // namespace lockstep::cuda::gate
