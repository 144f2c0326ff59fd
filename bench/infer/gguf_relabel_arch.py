#!/usr/bin/env python3
"""Copy a GGUF file under another architecture name, everything else kept.

    gguf_relabel_arch.py IN.gguf OUT.gguf NEW_ARCH

general.architecture becomes NEW_ARCH and every key "OLD_ARCH.*" becomes
"NEW_ARCH.*"; the other keys, the tensor infos and the tensor bytes are copied
unchanged (the offsets are relative to the data section, which starts at the
next multiple of general.alignment after the header).

Why: bitnet.cpp's llama.cpp fork that can be built here (2024-10; its newer
forks are not reachable) names the BitNet architecture "bitnet", while
lockstep and bitnet.cpp since 2025 write "bitnet-b1.58" for the 2B4T layout.
The relabelled copy has the same tensors byte for byte, so it times the same
weights (bench/infer/cpu_baselines.sh). Only the standard library is used: the
PyPI gguf package does not know the I2_S tensor type (36).
"""
import struct
import sys

# GGUF value types: 0 u8, 1 i8, 2 u16, 3 i16, 4 u32, 5 i32, 6 f32, 7 bool,
# 8 string, 9 array, 10 u64, 11 i64, 12 f64.
SCALAR_SIZE = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


class Reader:
    def __init__(self, data):
        self.data, self.at = data, 0

    def take(self, n):
        if self.at + n > len(self.data):
            raise ValueError(f"truncated at byte {self.at}")
        b = self.data[self.at:self.at + n]
        self.at += n
        return b

    def u32(self):
        return struct.unpack("<I", self.take(4))[0]

    def u64(self):
        return struct.unpack("<Q", self.take(8))[0]

    def string(self):
        return self.take(self.u64()).decode("utf-8")


def skip_value(r, vtype):
    """Returns the raw bytes of one value of `vtype` (after its type word)."""
    start = r.at
    if vtype in SCALAR_SIZE:
        r.take(SCALAR_SIZE[vtype])
    elif vtype == 8:
        r.take(r.u64())
    elif vtype == 9:
        etype, n = r.u32(), r.u64()
        for _ in range(n):
            skip_value(r, etype)
    else:
        raise ValueError(f"unknown GGUF value type {vtype}")
    return r.data[start:r.at]


def gguf_string(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: gguf_relabel_arch.py IN.gguf OUT.gguf NEW_ARCH")
    src, dst, new_arch = sys.argv[1:]
    with open(src, "rb") as f:
        data = f.read()
    r = Reader(data)
    if r.take(4) != b"GGUF":
        sys.exit(f"{src}: not a GGUF file")
    version = r.u32()
    if version != 3:
        sys.exit(f"{src}: GGUF version {version} (3 expected)")
    n_tensors, n_kv = r.u64(), r.u64()
    kvs, old_arch, alignment = [], None, 32
    for _ in range(n_kv):
        key = r.string()
        vtype = r.u32()
        raw = skip_value(r, vtype)
        if key == "general.architecture":
            old_arch = raw[8:].decode("utf-8")
        if key == "general.alignment":
            alignment = struct.unpack("<I", raw)[0]
        kvs.append((key, vtype, raw))
    if old_arch is None:
        sys.exit(f"{src}: no general.architecture")
    tensor_infos_start = r.at
    for _ in range(n_tensors):
        r.string()
        n_dims = r.u32()
        r.take(8 * n_dims + 4 + 8)  # dims, type, offset
    tensor_infos = data[tensor_infos_start:r.at]
    data_start = (r.at + alignment - 1) // alignment * alignment

    out = bytearray(b"GGUF" + struct.pack("<IQQ", 3, n_tensors, n_kv))
    for key, vtype, raw in kvs:
        if key == "general.architecture":
            raw = gguf_string(new_arch)
        elif key.startswith(old_arch + "."):
            key = new_arch + key[len(old_arch):]
        out += gguf_string(key) + struct.pack("<I", vtype) + raw
    out += tensor_infos
    out += b"\0" * ((-len(out)) % alignment)
    out += data[data_start:]
    with open(dst, "wb") as f:
        f.write(out)
    print(f"{dst}: {old_arch} -> {new_arch}, {n_kv} keys, {n_tensors} tensors")


if __name__ == "__main__":
    main()
