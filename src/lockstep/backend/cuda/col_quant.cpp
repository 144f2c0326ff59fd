// The column quantizer's choice of kernel (col_quant.hpp): the two-pass
// kernel's gate outcomes, and the call.
#include "lockstep/backend/cuda/col_quant.hpp"

#include <algorithm>
#include <mutex>
#include <optional>
#include <string>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

#include "lockstep/backend/cuda/col_quant_launch.hpp"
#include "lockstep/backend/cuda/gate.hpp"
#include "lockstep/backend/cuda/gemm_launch.hpp"
#include "lockstep/backend/cuda/mutant.hpp"

namespace lockstep::cuda {
namespace {

// The cases record here while col_quantize_two_pass_admitted may be running them.
std::recursive_mutex g_mu;
gate::Tally g_record;
std::optional<bool> g_admitted;  // the verdict, once every case has an outcome (or one failed)
int g_forced = -1;
MutantWatch g_mutant_watch;  // a change of mutant starts the outcomes again
void forget_if_mutant_changed() {
  if (!g_mutant_watch.changed()) return;
  g_record = {};
  g_admitted.reset();
}

}  // namespace

int col_quantize_planted() {
  switch (mutant()) {
    case Mutant::col_quant_last_chunk_dropped: return launch::kColQuantLastChunkDropped;
    case Mutant::col_quant_sums_in_pairs: return launch::kColQuantSumsInPairs;
    case Mutant::col_quant_sums_tile_rows_swapped: return launch::kColQuantSumsTileRowsSwapped;
    case Mutant::col_quant_codes_stale_subtile: return launch::kColQuantCodesStaleSubTile;
    default: return launch::kColQuantClean;
  }
}

void col_quantize_gate_record(const std::string& difference, const std::string& where) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  forget_if_mutant_changed();
  g_record.add(difference, where);
  if (!difference.empty()) g_admitted.reset();  // a failure after the verdict: decide again
}

bool col_quantize_two_pass_admitted() {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  forget_if_mutant_changed();
  if (g_admitted) return *g_admitted;
  const std::vector<gate::Case> cases = gate::col_quant_cases();
  const int expected = static_cast<int>(cases.size());
  if (g_record.failed == 0 && g_record.passed < expected) {
    // Start-up did not run these gates (a process that quantizes without a
    // model): run them now, clean and poisoned; they record here (inside
    // another gate case too: the unit linear's).
    g_record = {};
    gate::run_for_records(cases);
  }
  g_admitted = g_record.failed == 0 && expected > 0 && g_record.passed >= expected;
  return *g_admitted;
}

std::string col_quantize_report() {
  const bool ok = col_quantize_two_pass_admitted();
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  if (ok) {
    static const char* const sums[] = {"", "strip (v1)", "tiled, 8 columns a block (v2)", "tiled, 32 columns a block (v3)"};
    static const char* const codes[] = {"", "sub-tiles in turn (v1)", "loads overlapped (v2)"};
    return fmt::format(
        "column quantizer (CUDA): two-pass kernel ({} gate outcomes exact; pass 1 with sums: {}; steps and codes: {})",
        g_record.passed, sums[launch::col_quant_sums_kernel()], codes[launch::col_quant_codes_kernel()]);
  }
  return fmt::format("column quantizer (CUDA): three-pass kernel; the two-pass one refused ({})",
                     g_record.first_failure.empty() ? std::string("no gate case ran") : g_record.first_failure);
}

void col_quantize_reset() {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  g_record = {};
  g_admitted.reset();
}

void col_quantize_force(int kernel) {
  if (kernel < -1 || kernel > 1) throw std::invalid_argument(fmt::format("col_quantize_force: no kernel {}", kernel));
  g_forced = kernel;
}

std::size_t col_quantize_scratch(std::size_t rows, std::size_t cols) {
  return std::max(launch::col_quantize_scratch(rows, cols), launch::col_quantize_2p_scratch(rows, cols));
}

void col_quantize(const float* x, std::size_t rows, std::size_t cols, float floor_x, std::int8_t* codes,
                  float* step, float* scratch, float* col_sums) {
  const bool two_pass = g_forced >= 0 ? g_forced == 1 : col_quantize_two_pass_admitted();
  if (two_pass) {
    launch::col_quantize_i8_2p(x, rows, cols, floor_x, codes, step, scratch, col_sums, col_quantize_planted());
    return;
  }
  launch::col_quantize_i8(x, rows, cols, floor_x, codes, step, scratch);
  if (col_sums != nullptr) launch::column_sums(x, rows, cols, col_sums);
}

}  // namespace lockstep::cuda
