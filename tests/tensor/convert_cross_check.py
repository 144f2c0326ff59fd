"""Cross-check lockstep's 16-bit float conversions with numpy and ml_dtypes.

  convert_cross_check.py DIR

DIR holds what tensor_numpy_test.cpp wrote with lockstep's conversions:
  in.f32        N binary32 inputs
  f16.u16       their f16 patterns          (lockstep: f32 -> f16, nearest even)
  bf16.u16      their bf16 patterns         (lockstep: f32 -> bf16, nearest even)
  f16_wide.f32  the 65536 f16 patterns 0..65535 widened to f32 (lockstep)
  bf16_wide.f32 the 65536 bf16 patterns widened to f32 (lockstep)
The references are numpy's float16 (IEEE binary16, ties to even) and
ml_dtypes' bfloat16 (JAX's). NaN: lockstep writes one canonical NaN, the
references keep payloads, so two NaNs agree whatever their bits. Prints one
line per check, "<check> <cases> cases <mismatches> mismatches", and the first
few mismatches; exits 1 if any.
"""
import sys
from pathlib import Path

import ml_dtypes
import numpy as np

d = Path(sys.argv[1])
x = np.fromfile(d / "in.f32", dtype=np.float32)
ours_f16 = np.fromfile(d / "f16.u16", dtype=np.uint16)
ours_bf16 = np.fromfile(d / "bf16.u16", dtype=np.uint16)
wide_f16 = np.fromfile(d / "f16_wide.f32", dtype=np.float32)
wide_bf16 = np.fromfile(d / "bf16_wide.f32", dtype=np.float32)
assert len(ours_f16) == len(x) == len(ours_bf16) and len(wide_f16) == len(wide_bf16) == 65536

failed = False


def compare(name, ours, theirs, ours_nan, theirs_nan, inputs):
    global failed
    agree = (ours == theirs) | (ours_nan & theirs_nan)
    bad = np.flatnonzero(~agree)
    print(f"{name} {len(ours)} cases {len(bad)} mismatches")
    for i in bad[:5]:
        print(f"  input {inputs[i]:#x}: lockstep {int(ours[i]):#x}, reference {int(theirs[i]):#x}")
    failed |= len(bad) > 0


def f16_nan(h):
    return (h & 0x7FFF) > 0x7C00


def bf16_nan(h):
    return (h & 0x7FFF) > 0x7F80


def f32_nan(u):
    return (u & 0x7FFFFFFF) > 0x7F800000


with np.errstate(all="ignore"):  # overflow to Inf and NaN casts are the point
    ref_f16 = x.astype(np.float16).view(np.uint16)
    ref_bf16 = x.astype(ml_dtypes.bfloat16).view(np.uint16)
xbits = x.view(np.uint32)
compare("f32->f16 (numpy.float16)", ours_f16, ref_f16, f16_nan(ours_f16), f16_nan(ref_f16), xbits)
compare("f32->bf16 (ml_dtypes.bfloat16)", ours_bf16, ref_bf16, bf16_nan(ours_bf16), bf16_nan(ref_bf16), xbits)

patterns = np.arange(65536, dtype=np.uint32).astype(np.uint16)
ref_wide_f16 = patterns.view(np.float16).astype(np.float32).view(np.uint32)
ref_wide_bf16 = patterns.view(ml_dtypes.bfloat16).astype(np.float32).view(np.uint32)
ow16, owb = wide_f16.view(np.uint32), wide_bf16.view(np.uint32)
compare("f16->f32 (numpy.float16)", ow16, ref_wide_f16, f32_nan(ow16), f32_nan(ref_wide_f16), patterns)
compare("bf16->f32 (ml_dtypes.bfloat16)", owb, ref_wide_bf16, f32_nan(owb), f32_nan(ref_wide_bf16), patterns)
sys.exit(1 if failed else 0)
