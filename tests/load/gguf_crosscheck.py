#!/usr/bin/env python3
"""lockstep's GGUF against PyPI gguf (llama.cpp's own Python package), both ways.

  1. gguf's GGUFReader reads the sample lockstep wrote: every metadata value
     and type, the tensor shapes, the F32/F16/BF16/Q8_0 data through gguf's
     dequantize (and lockstep's Q8_0/BF16 bytes equal gguf's quantize), and the
     I2_S bytes against an independent numpy packing written here from
     bitnet.cpp's layout.
  2. gguf's GGUFWriter writes a sample (every type; I2_S packed here) that
     lockstep reads back value for value and bit for bit.
  3. Synthetic llama-micro and bitnet-micro models: lockstep writes GGUF and HF
     safetensors; this script writes the same model as GGUF with gguf's writer
     from the safetensors (q/k rows permuted as llama.cpp's converter does for
     llama, kept for bitnet); every file gives lockstep the source model's
     logits bit for bit.
usage: gguf_crosscheck.py LOAD_TOOL WORKDIR
"""
import json
import os
import subprocess
import sys

try:
    import numpy as np
    import gguf
    from gguf import GGMLQuantizationType as T
    from safetensors.numpy import load_file
except ImportError as e:  # the suite runs without the PyPI packages, saying so
    print(f"SKIP: {e} (pip install -r tests/requirements.txt)")
    sys.exit(77)

TOOL, WORK = sys.argv[1], sys.argv[2]
os.makedirs(WORK, exist_ok=True)
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def tool(*args):
    r = subprocess.run([TOOL, *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"load_tool {' '.join(args)} failed: {r.stderr.strip()}")
    return r.stdout


# PyPI gguf does not know bitnet.cpp's I2_S (type 36): add the member so its
# reader and writer pass such tensors through. GGML_QUANT_SIZES (4, 1) makes
# the reader map n/4 bytes, the packed weights; the 32-byte tail (the scale)
# is read here at the tensor's offset + n/4.
I2S = int.__new__(T, 36)
I2S._name_, I2S._value_ = "I2_S", 36
T._value2member_map_[36] = I2S
gguf.GGML_QUANT_SIZES[I2S] = (4, 1)


def values(n):  # the tool's value_at, in binary32
    i = np.arange(n, dtype=np.int64)
    return ((i * 37) % 101 - 50).astype(np.float32) / np.float32(13)


def codes_at(n):
    i = np.arange(n, dtype=np.int64)
    return ((i * 7) % 3 - 1).astype(np.int8)


def pack_i2s(codes, scale):
    """bitnet.cpp's quantize_i2_s (x86): blocks of 128, weight j in byte j % 32
    at shift 6 - 2 (j // 32), field code + 1; the f32 scale at byte n/4 of a
    32-byte tail."""
    n = codes.size
    q = (codes.astype(np.int16) + 1).astype(np.uint8).reshape(n // 128, 4, 32)
    packed = (q[:, 0] << 6) | (q[:, 1] << 4) | (q[:, 2] << 2) | q[:, 3]
    tail = np.zeros(32, dtype=np.uint8)
    tail[:4] = np.frombuffer(np.float32(scale).tobytes(), dtype=np.uint8)
    return np.concatenate([packed.reshape(-1).astype(np.uint8), tail])


# --- 1. lockstep writes, gguf reads ----------------------------------------
sample = os.path.join(WORK, "lockstep_sample.gguf")
tool("sample", sample)
r = gguf.GGUFReader(sample)
f = {k: v for k, v in r.fields.items()}
expect = {
    "t.u8": (gguf.GGUFValueType.UINT8, 250), "t.i8": (gguf.GGUFValueType.INT8, -128),
    "t.u16": (gguf.GGUFValueType.UINT16, 65535), "t.i16": (gguf.GGUFValueType.INT16, -32768),
    "t.u32": (gguf.GGUFValueType.UINT32, 4294967295), "t.i32": (gguf.GGUFValueType.INT32, -2147483648),
    "t.u64": (gguf.GGUFValueType.UINT64, 18446744073709551615), "t.i64": (gguf.GGUFValueType.INT64, -9223372036854775808),
    "t.f32": (gguf.GGUFValueType.FLOAT32, 3.25), "t.f64": (gguf.GGUFValueType.FLOAT64, -1e-300),
    "t.bool": (gguf.GGUFValueType.BOOL, True), "t.str": (gguf.GGUFValueType.STRING, "h\u00e9llo"),
    "t.arr_i32": (gguf.GGUFValueType.ARRAY, [-1, 0, 2147483647]), "t.arr_u8": (gguf.GGUFValueType.ARRAY, [0, 255]),
    "t.arr_f32": (gguf.GGUFValueType.ARRAY, [0.5, -2.0]), "t.arr_f64": (gguf.GGUFValueType.ARRAY, [0.1]),
    "t.arr_bool": (gguf.GGUFValueType.ARRAY, [False, True]), "t.arr_str": (gguf.GGUFValueType.ARRAY, ["a", "", "\u20ac"]),
}
elem = {"t.arr_i32": gguf.GGUFValueType.INT32, "t.arr_u8": gguf.GGUFValueType.UINT8, "t.arr_f32": gguf.GGUFValueType.FLOAT32,
        "t.arr_f64": gguf.GGUFValueType.FLOAT64, "t.arr_bool": gguf.GGUFValueType.BOOL, "t.arr_str": gguf.GGUFValueType.STRING}
for key, (typ, val) in expect.items():
    fld = f.get(key)
    check(fld is not None, f"gguf reads key {key}")
    if fld is None:
        continue
    check(fld.types[0] == typ, f"{key}: type {fld.types}")
    if key in elem:
        check(fld.types[1] == elem[key], f"{key}: element type {fld.types}")
    got = fld.contents()
    check(got == val, f"{key}: {got!r} != {val!r}")
tensors = {t.name: t for t in r.tensors}
check(list(tensors) == ["f32", "f16", "bf16", "q8_0", "i2_s"], f"tensor names {list(tensors)}")
for name, n, shape in [("f32", 12, (3, 4)), ("f16", 64, (2, 32)), ("bf16", 64, (2, 32)), ("q8_0", 128, (2, 64))]:
    t = tensors[name]
    check(tuple(int(d) for d in t.shape) == shape[::-1], f"{name}: ggml dims {t.shape}")
    deq = gguf.quants.dequantize(t.data, t.tensor_type).reshape(-1).astype(np.float32)
    v = values(n)
    if name == "f32":
        want = v
    elif name == "f16":
        want = v.astype(np.float16).astype(np.float32)
    else:
        qt = T.BF16 if name == "bf16" else T.Q8_0
        q = gguf.quants.quantize(v.reshape(shape), qt)
        check(q.tobytes() == np.asarray(t.data).tobytes(), f"{name}: lockstep's bytes equal gguf.quants.quantize's")
        want = gguf.quants.dequantize(q, qt).reshape(-1).astype(np.float32)
    check(deq.tobytes() == want.tobytes(), f"{name}: data through gguf's dequantize")
t = tensors["i2_s"]
check(t.tensor_type == I2S and tuple(int(d) for d in t.shape) == (128, 2), f"i2_s: type {t.tensor_type} dims {t.shape}")
raw = np.fromfile(sample, dtype=np.uint8)
mine = raw[t.data_offset:t.data_offset + 256 // 4 + 32]
check(mine.tobytes() == pack_i2s(codes_at(256), 0.37).tobytes(), "i2_s: bytes equal the numpy packing of bitnet.cpp's layout")

# --- 2. gguf writes, lockstep reads ----------------------------------------
theirs = os.path.join(WORK, "pypi_sample.gguf")
w = gguf.GGUFWriter(theirs, "pypi-sample")
w.add_uint8("p.u8", 7); w.add_int8("p.i8", -7); w.add_uint16("p.u16", 700); w.add_int16("p.i16", -700)
w.add_uint32("p.u32", 70000); w.add_int32("p.i32", -70000); w.add_uint64("p.u64", 2 ** 63 + 5); w.add_int64("p.i64", -(2 ** 40))
w.add_float32("p.f32", 0.1); w.add_float64("p.f64", 0.1); w.add_bool("p.bool", False); w.add_string("p.str", "zo\u00eb")
w.add_array("p.arr_int", [1, 2, 3]); w.add_array("p.arr_str", ["x", "yy"]); w.add_array("p.arr_float", [1.5, -0.25])
v = values(256)
w.add_tensor("f32", v[:12].reshape(3, 4))
w.add_tensor("f16", v[:64].reshape(2, 32).astype(np.float16))
w.add_tensor("bf16", gguf.quants.quantize(v[:64].reshape(2, 32), T.BF16), raw_dtype=T.BF16)
w.add_tensor("q8_0", gguf.quants.quantize(v[:128].reshape(2, 64), T.Q8_0), raw_dtype=T.Q8_0)
w.add_tensor("i2_s", pack_i2s(codes_at(256), 0.37).view(np.int8), raw_shape=(2, 128), raw_dtype=I2S)
w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
j = json.loads(tool("read", theirs))
md = j["metadata"]
for key, typ, val in [("p.u8", "u8", 7), ("p.i8", "i8", -7), ("p.u16", "u16", 700), ("p.i16", "i16", -700),
                      ("p.u32", "u32", 70000), ("p.i32", "i32", -70000), ("p.u64", "u64", 2 ** 63 + 5),
                      ("p.i64", "i64", -(2 ** 40)), ("p.f32", "f32", float(np.float32(0.1))), ("p.f64", "f64", 0.1),
                      ("p.bool", "bool", False), ("p.str", "string", "zo\u00eb"), ("general.architecture", "string", "pypi-sample")]:
    check(key in md and md[key]["type"] == typ and md[key]["value"] == val, f"lockstep reads {key}: {md.get(key)}")
check(md["p.arr_int"]["value"] == [1, 2, 3] and md["p.arr_str"]["value"] == ["x", "yy"]
      and md["p.arr_float"]["value"] == [1.5, -0.25], "lockstep reads the arrays")
tj = j["tensors"]


def bits(a):
    return np.asarray(a, dtype=np.float32).view(np.uint32).tolist()


check(tj["f32"]["dims"] == [4, 3] and tj["f32"]["f32_bits"] == bits(v[:12]), "lockstep reads gguf's F32")
check(tj["f16"]["f32_bits"] == bits(v[:64].astype(np.float16).astype(np.float32)), "lockstep reads gguf's F16")
for name, qt, n in [("bf16", T.BF16, 64), ("q8_0", T.Q8_0, 128)]:
    want = gguf.quants.dequantize(gguf.quants.quantize(v[:n].reshape(2, -1), qt), qt).reshape(-1)
    check(tj[name]["f32_bits"] == bits(want), f"lockstep reads gguf's {name} as gguf dequantizes it")
check(tj["i2_s"]["type"] == "I2_S" and tj["i2_s"]["dims"] == [128, 2] and tj["i2_s"]["codes"] == codes_at(256).tolist()
      and tj["i2_s"]["scale_bits"] == int(np.float32(0.37).view(np.uint32)), "lockstep reads the I2_S gguf's writer wrote")


# --- 3. models --------------------------------------------------------------
def llama_cpp_permute(w, n_head):
    """convert_hf_to_gguf.py's LlamaModel.permute: HF rotate-half rows to llama.cpp's interleaved order."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


HF_TO_GGUF = {"input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
              "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output", "self_attn.attn_sub_norm": "attn_sub_norm",
              "post_attention_layernorm": "ffn_norm", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
              "mlp.down_proj": "ffn_down", "mlp.ffn_sub_norm": "ffn_sub_norm"}


def gguf_name(hf):
    if hf == "model.embed_tokens.weight":
        return "token_embd.weight"
    if hf == "model.norm.weight":
        return "output_norm.weight"
    if hf == "lm_head.weight":
        return "output.weight"
    parts = hf.split(".")
    return f"blk.{parts[2]}.{HF_TO_GGUF['.'.join(parts[3:-1])]}.weight"


for preset in ["llama-micro", "bitnet-micro"]:
    d = os.path.join(WORK, preset)
    want = tool("model", preset, "5", d).strip()
    for path in [os.path.join(d, "lockstep.gguf"), os.path.join(d, "hf")] + ([os.path.join(d, "i2s.gguf")] if "bitnet" in preset else []):
        check(tool("logits", path).strip() == want, f"{preset}: {os.path.basename(path)} gives the source logits bit for bit")
    cfg = json.load(open(os.path.join(d, "hf", "config.json")))
    st = load_file(os.path.join(d, "hf", "model.safetensors"))
    arch = "llama" if cfg["model_type"] == "llama" else "bitnet-b1.58"
    out = os.path.join(d, "pypi.gguf")
    w = gguf.GGUFWriter(out, arch)
    w.add_block_count(cfg["num_hidden_layers"]); w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"]); w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(cfg["num_attention_heads"]); w.add_head_count_kv(cfg["num_key_value_heads"])
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"]); w.add_rope_freq_base(cfg["rope_theta"])
    w.add_rope_dimension_count(cfg["head_dim"]); w.add_vocab_size(cfg["vocab_size"])
    for name, a in st.items():
        if arch == "llama" and name.endswith("q_proj.weight"):
            a = llama_cpp_permute(a, cfg["num_attention_heads"])
        if arch == "llama" and name.endswith("k_proj.weight"):
            a = llama_cpp_permute(a, cfg["num_key_value_heads"])
        w.add_tensor(gguf_name(name), np.ascontiguousarray(a))
    w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
    check(tool("logits", out).strip() == want, f"{preset}: the GGUF gguf's writer made gives the source logits bit for bit")

if failures:
    print(f"{len(failures)} check(s) failed")
    sys.exit(1)
print("all cross-checks passed")
