// LOCKSTEP_DECODE_PDL's host state (pdl.hpp). A .cu file, so that it lives in lockstep_cuda beside
// the kernels' launchers that call it (from liblockstep.a a test binary that
// pulls no other pdl.hpp symbol did not link: note_programmatic_launch).
#include "lockstep/backend/cuda/pdl.hpp"
#include "lockstep/backend/cuda/env_choice.hpp"

#include <atomic>

namespace lockstep::cuda {
namespace {
std::atomic<int> g_decode_pdl{-1};  // -1: the environment's
std::atomic<int> g_decode_pdl_mutant{0};
std::atomic<long> g_programmatic{0};
}  // namespace

bool decode_pdl() {
  const int set = g_decode_pdl.load();
  if (set >= 0) return set != 0;
  // read once: asked at every launch of the pass; on unless LOCKSTEP_DECODE_PDL=0
  // (session 17 measured it faster on the H100 with early launch: docs/perf/DECODE_CUDA.md §21)
  static const bool env_on = env_on_unless_zero("LOCKSTEP_DECODE_PDL");
  return env_on;
}
void set_decode_pdl(int on) { g_decode_pdl.store(on < 0 ? -1 : (on != 0 ? 1 : 0)); }

namespace {
thread_local bool t_fence = false;  // launches come from one host thread a stream
}  // namespace
void decode_pdl_fence() { t_fence = true; }
bool decode_pdl_fenced() { return t_fence; }
bool take_decode_pdl_fence() {
  const bool f = t_fence;
  t_fence = false;
  return f;
}

int decode_pdl_mutant() { return g_decode_pdl_mutant.load(); }
void set_decode_pdl_mutant(int m) { g_decode_pdl_mutant.store(m); }

long programmatic_launches() { return g_programmatic.load(); }
void reset_programmatic_launches() { g_programmatic.store(0); }
void note_programmatic_launch() { g_programmatic.fetch_add(1); }

}  // namespace lockstep::cuda
