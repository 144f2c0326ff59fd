// The canonical GEMM's epilogue, shared by gemm.cu's kernel and the tiled
// kernels (gemm_tiled.cuh): what happens to a cell after its fma chain
// (gemm_launch.hpp's contract), written once.
#pragma once

#include <cuda_runtime.h>

namespace lockstep::cuda::launch::detail {

struct Epi {
  const float* bias;       // [J] added to every row, or null
  const float* row_scale;  // [I] BitLinear's activation steps, or null
  const float* scale;      // BitLinear's weight scale (device), read when row_scale is set
};

__device__ __forceinline__ float canonical(float x) { return x != x ? __int_as_float(0x7FC00000) : x; }

// One cell of column j (of J) after its chain: the canonical NaN, then the
// bias, or BitLinear's (x · row scale) · scale.
__device__ __forceinline__ float epilogue_cell(float acc, const Epi& epi, int j, int J, float rs, float scale) {
  float x = canonical(acc);
  if (epi.bias != nullptr && j < J) x = __fadd_rn(x, epi.bias[j]);
  if (epi.row_scale != nullptr) x = __fmul_rn(__fmul_rn(x, rs), scale);
  return x;
}

// Cells jb..jb+3 of one output row: one 16-byte store when the row allows it
// and all four lie before jlimit, else one store per cell that does.
__device__ __forceinline__ void store_four(float* crow, int jb, const float (&v)[4], bool vec_store, int jlimit) {
  if (vec_store && jb + 3 < jlimit) {
    *reinterpret_cast<float4*>(crow + jb) = make_float4(v[0], v[1], v[2], v[3]);
  } else {
#pragma unroll
    for (int c = 0; c < 4; ++c)
      if (jb + c < jlimit) crow[jb + c] = v[c];
  }
}

}  // namespace lockstep::cuda::launch::detail
