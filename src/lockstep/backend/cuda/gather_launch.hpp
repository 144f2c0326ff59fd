// Gathering scattered device values into one packed buffer, so the live audits
// copy a launch's operands back in one transfer (gather.cu).
#pragma once

#include <cstddef>

namespace lockstep::cuda::launch {

// Element (r, e) of a segment is src[r·row_stride + e·elem_stride]; it lands at
// dst[dst_offset + r·row_elems + e].
struct GatherSegment {
  const float* src = nullptr;
  std::size_t rows = 0, row_elems = 0, row_stride = 0, elem_stride = 1, dst_offset = 0;
};
inline constexpr int kMaxGatherSegments = 64;
struct GatherList {
  GatherSegment seg[kMaxGatherSegments];
  int n = 0;
};

// dst (device) receives every segment of the list.
void gather(const GatherList& list, float* dst);

}  // namespace lockstep::cuda::launch
