// Live audits: while a run trains on the GPU, sampled output cells of every
// matrix product and attention forward launch are recomputed on the CPU from
// the launch's own device inputs, with the op specification's expression
// (ops::Math<float>::dot_seq, ops::Attention::forward_row), and compared by bit
// pattern. Cells are stratified toward where kernel bugs live: the four
// corners, the middle of the last row and of the last column, then `interior`
// random cells (Philox keyed by the seed and the launch count). A mismatch
// stops the run (std::runtime_error with the report) or, with
// OnMismatch::warn, is printed to stderr and counted.
//
// The audits are the only host synchronization inside a GPU step: each audited
// cell copies its operands back (a row of A, a column of B; for attention a
// query row and the key/value rows it reads). Their cost is measured and
// reported (stats()).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "lockstep/ops/attention.hpp"

namespace lockstep::cuda::audit {

enum class OnMismatch { stop, warn };

struct Options {
  bool enabled = false;
  std::size_t interior = 4;  // random interior cells (rows for attention) per launch, after the fixed ones
  OnMismatch on_mismatch = OnMismatch::stop;
  std::uint64_t seed = 1;
};
void configure(const Options& opt);
const Options& options();

struct Stats {
  std::size_t launches = 0, cells = 0, mismatches = 0;
  double seconds = 0;        // spent auditing (copies and CPU recomputation)
  std::string first_report;  // the first mismatch, "" if none
};
Stats stats();
void reset_stats();

// C = A·B as ops::matmul writes it (op.hpp): C[i·ldc + j] = dot_seq over k of
// A[i·sai + k·sak] · B[k·sbk + j·sbj], then + bias[j] (one add) when bias is
// not null. All pointers are device pointers; C is the launch's output.
void matmul(std::string_view kernel, std::size_t I, std::size_t J, std::size_t K, const float* A, std::size_t sai,
            std::size_t sak, const float* B, std::size_t sbk, std::size_t sbj, const float* bias, const float* C,
            std::size_t ldc);

// The attention forward's o rows and lse (layouts of cpu::OpKernels::attention_fwd).
void attention_fwd(const ops::Attention::Config& c, const float* q, std::size_t ldq, const float* k, const float* v,
                   std::size_t ldkv, const float* o, const float* lse);

}  // namespace lockstep::cuda::audit
