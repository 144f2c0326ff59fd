"""Cross-check lockstep's safetensors files with Hugging Face's `safetensors`.

  cross_check.py read PATH      prints one line per tensor: name dtype shape sum-of-bit-patterns
  cross_check.py write PATH     writes a file with known tensors for lockstep to read
"""
import sys

import numpy as np
from safetensors.numpy import load_file, save_file


def describe(tensors):
    for name in sorted(tensors):
        a = tensors[name]
        bits = a.view(np.uint8).astype(np.uint64).sum()
        print(f"{name} {a.dtype} {list(a.shape)} {int(bits)}")


if sys.argv[1] == "read":
    describe(load_file(sys.argv[2]))
else:
    save_file(
        {
            "w": (np.arange(12, dtype=np.float32) - 5.5).reshape(3, 4) / 3,
            "ids": np.array([1, -2, 3], dtype=np.int32),
            "neg_zero": np.array([-0.0, 0.0], dtype=np.float32),
        },
        sys.argv[2],
        metadata={"format": "pt"},
    )
