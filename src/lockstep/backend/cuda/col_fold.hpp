// The column absmax of the int8 units' column quantizer (ops::quantize_cols;
// cpu units::quantize_cols_i8) as a fold that can be split into row chunks,
// for the two-pass column quantizer (col_quant.cu). Header-only and
// LOCKSTEP_HD: the kernels and the host tests (col_fold_test.cpp) run the
// same functions.
//
// The specification folds column j in row order from +0:
//   acc = max2(acc, |x[n, j]|),   max2(a, b) = a > b ? a : b   (ops::max2)
// which is not a plain maximum where a NaN occurs: max2(acc, NaN) = NaN and
// max2(NaN, v) = v, so after a NaN the fold starts again from the next value.
//
// A segment of rows (a chunk) is summarised by its own fold from +0, `value`,
// and whether it holds a NaN, `nan`. The fold of a column from any start a
// through the segment is then
//   nan ? value : (a is NaN ? value : max2(a, value))
// (with a NaN in the segment the fold restarts inside it, and its end does
// not depend on a; without one, every |x| >= +0 so the max2-chain from a is
// max2(a, the segment's maximum), ties having equal bits, and a NaN start is
// replaced by the segment's first value, after which the chain is the
// segment's maximum). Applying segment S after segment R is a segment of the
// same form, join(R, S) below, so the join is associative: a column cut into
// contiguous segments, each folded on its own and the summaries joined in
// row order, in any grouping, ends on the specification's bits. The join is
// not commutative (the order of the segments matters). An empty segment has
// no summary and the kernels skip it ({+0, false} is not the join's identity:
// it turns a NaN state into +0, which gives the same m in the end but is not
// the specification's state).
#pragma once

#include "lockstep/num/fp.hpp"

namespace lockstep::cuda::colfold {

struct Summary {
  float value;  // the segment's fold from +0
  bool nan;     // a NaN was folded
};

LOCKSTEP_HD inline float max2(float a, float b) { return a > b ? a : b; }  // ops::max2

// One more row: the specification's step, and the NaN flag.
LOCKSTEP_HD inline void fold(Summary& s, float x) {
  const float v = num::float_of(num::bits_of(x) & 0x7FFFFFFFu);  // |x|, as fabs
  s.value = max2(s.value, v);
  s.nan = s.nan || v != v;
}

// Segment r, then segment s (row order).
LOCKSTEP_HD inline Summary join(Summary r, Summary s) {
  return {s.nan || r.value != r.value ? s.value : max2(r.value, s.value), r.nan || s.nan};
}

// The fold of a whole column that starts at +0 and runs through the summary
// (col_steps' step, the specification's result for one segment or a join).
LOCKSTEP_HD inline float from_zero(Summary s) { return join(Summary{0.0f, false}, s).value; }

}  // namespace lockstep::cuda::colfold
