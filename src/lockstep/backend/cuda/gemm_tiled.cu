// The canonical float GEMM's shape-fitted block tiles, clean kernels
// (gemm_tiled.cuh has the kernel and its description; the gates' mutants of
// it are instantiated in gemm_tiled_mutant.cu).
#include "lockstep/backend/cuda/gemm_tiled.cuh"

namespace lockstep::cuda::launch::detail {

bool tiled_shape(int cfg, int& bm, int& bn) {
  switch (cfg) {
    case 3: bm = T144::BM, bn = T144::BN; return true;
    case 4: bm = T112::BM, bn = T112::BN; return true;
    case 5: bm = T48::BM, bn = T48::BN; return true;
    case 6: bm = T128W::BM, bn = T128W::BN; return true;
    case 7: bm = T128K::BM, bn = T128K::BN; return true;
    default: return false;
  }
}

bool gemm_tiled(int cfg, const TiledArgs& g) { return launch_tiled<false>(cfg, g, kClean); }

}  // namespace lockstep::cuda::launch::detail
