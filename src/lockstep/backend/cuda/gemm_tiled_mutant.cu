// The gates' mutants of the shape-fitted GEMM tiles (gemm_tiled.cuh, "Mutants"):
// the same kernel template instantiated with MUTABLE = true, in its own
// translation unit so that it compiles beside the clean kernels and cannot
// change them. Launched only while a gemm mutant is active (tests).
#include "lockstep/backend/cuda/gemm_tiled.cuh"

namespace lockstep::cuda::launch::detail {

bool gemm_tiled_mutant(int cfg, const TiledArgs& g, int mut) { return launch_tiled<true>(cfg, g, mut); }

}  // namespace lockstep::cuda::launch::detail
