// The cached attention kernels' key staging (decode.cu's v1, decode_attention_v2.cu's scores):
// a CTA copies a run of cached K rows into shared memory, rows Dh + 1 floats apart, so that a
// thread a key reading its row's column d meets no bank conflict with its neighbours.
#pragma once

#include <cstddef>

#include "lockstep/backend/cuda/batched_copy.cuh"

namespace lockstep::cuda::detail {

// nk rows of Dh floats, row j at kb + j·kvd, into ks [nk][Dh + 1], by the CTA's
// Threads threads (this one: tid), 8 loads in flight each; vec: 16-byte loads
// (Dh and kvd multiples of 4, kb 16-byte aligned).
template <int Threads>
__device__ __forceinline__ void stage_keys_padded(const float* kb, long long kvd, int nk, int Dh, bool vec, float* ks,
                                                  int tid) {
  if (vec) {
    const int d4 = Dh / 4;
    batched_copy<8, float4>(
        static_cast<std::size_t>(nk * d4), static_cast<std::size_t>(tid), Threads,
        [=](std::size_t e) {
          const int j = static_cast<int>(e) / d4, c = static_cast<int>(e) - j * d4;
          return reinterpret_cast<const float4*>(kb + j * kvd)[c];
        },
        [=](std::size_t e, float4 kv) {
          const int j = static_cast<int>(e) / d4, c = static_cast<int>(e) - j * d4;
          float* kr = ks + j * (Dh + 1) + 4 * c;
          kr[0] = kv.x;
          kr[1] = kv.y;
          kr[2] = kv.z;
          kr[3] = kv.w;
        });
  } else {
    batched_copy<8, float>(
        static_cast<std::size_t>(nk * Dh), static_cast<std::size_t>(tid), Threads,
        [=](std::size_t e) {
          const int j = static_cast<int>(e) / Dh, d = static_cast<int>(e) - j * Dh;
          return kb[j * kvd + d];
        },
        [=](std::size_t e, float x) {
          const int j = static_cast<int>(e) / Dh, d = static_cast<int>(e) - j * Dh;
          ks[j * (Dh + 1) + d] = x;
        });
  }
}

}  // namespace lockstep::cuda::detail
