#!/usr/bin/env python3
"""lockstep's PEFT-format LoRA adapters against PyPI safetensors, both ways.

  1. lockstep writes an adapter of known values (adapter_tool write); PyPI
     safetensors (safetensors.numpy.load_file) reads adapter_model.safetensors:
     PEFT's names (base_model.model.<module>.lora_A.weight / .lora_B.weight),
     shapes [r, in] / [out, r], F32, and every value equal to the formula
     recomputed here; adapter_config.json holds PEFT's fields.
  2. This script writes adapters with safetensors.numpy.save_file (F32 and F16,
     as PEFT may save them; its own config in PEFT's layout); lockstep reads
     them (adapter_tool dump) name for name and bit for bit.
usage: adapter_crosscheck.py ADAPTER_TOOL WORKDIR
"""
import json
import os
import subprocess
import sys

try:
    import numpy as np
    from safetensors.numpy import load_file, save_file
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


def value_at(i, salt):  # adapter_tool.cpp's value_at: exact in binary32
    return np.float32((((i * 37 + salt) % 101) - 50) / 64.0)


# 1. lockstep writes, safetensors reads.
d1 = os.path.join(WORK, "from_lockstep")
subprocess.run([TOOL, "write", d1], check=True)
t = load_file(os.path.join(d1, "adapter_model.safetensors"))
want = {"model.layers.0.self_attn.q_proj": (8, 8), "model.layers.1.mlp.down_proj": (20, 8)}
check(sorted(t) == sorted(f"base_model.model.{m}.lora_{x}.weight" for m in want for x in "AB"), f"names {sorted(t)}")
salt = 0
for module, (inn, out) in want.items():
    a = t.get(f"base_model.model.{module}.lora_A.weight")
    b = t.get(f"base_model.model.{module}.lora_B.weight")
    if a is None or b is None:
        salt += 2
        continue
    check(a.dtype == np.float32 and b.dtype == np.float32, f"{module}: dtypes {a.dtype} {b.dtype}")
    check(a.shape == (3, inn), f"{module}: lora_A shape {a.shape}, expected (3, {inn})")
    check(b.shape == (out, 3), f"{module}: lora_B shape {b.shape}, expected ({out}, 3)")
    check(np.array_equal(a.reshape(-1), np.array([value_at(i, salt) for i in range(a.size)], np.float32)),
          f"{module}: lora_A values")
    check(np.array_equal(b.reshape(-1), np.array([value_at(i, salt + 1) for i in range(b.size)], np.float32)),
          f"{module}: lora_B values")
    salt += 2
cfg = json.load(open(os.path.join(d1, "adapter_config.json")))
for k, v in {"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": 3, "lora_alpha": 6, "lora_dropout": 0.1,
             "bias": "none", "use_rslora": False, "use_dora": False, "base_model_name_or_path": "adapter_tool",
             "target_modules": ["q_proj", "down_proj"]}.items():
    check(cfg.get(k) == v, f"adapter_config.json {k} = {cfg.get(k)!r}, expected {v!r}")

# 2. safetensors writes (F32 and F16), lockstep reads.
rng = np.random.default_rng(11)
for dtype in (np.float32, np.float16):
    d2 = os.path.join(WORK, f"from_python_{np.dtype(dtype).name}")
    os.makedirs(d2, exist_ok=True)
    mods = {"model.layers.0.self_attn.v_proj": (16, 4), "model.layers.2.mlp.gate_proj": (16, 44)}
    tensors = {}
    for m, (inn, out) in mods.items():
        tensors[f"base_model.model.{m}.lora_A.weight"] = rng.standard_normal((2, inn)).astype(dtype)
        tensors[f"base_model.model.{m}.lora_B.weight"] = rng.standard_normal((out, 2)).astype(dtype)
    save_file(tensors, os.path.join(d2, "adapter_model.safetensors"), metadata={"format": "pt"})
    json.dump({"peft_type": "LORA", "r": 2, "lora_alpha": 5, "lora_dropout": 0.0, "bias": "none",
               "task_type": "CAUSAL_LM", "target_modules": ["v_proj", "gate_proj"], "use_rslora": True,
               "base_model_name_or_path": None, "fan_in_fan_out": False, "modules_to_save": None,
               "rank_pattern": {}, "alpha_pattern": {}, "use_dora": False},
              open(os.path.join(d2, "adapter_config.json"), "w"))
    res = subprocess.run([TOOL, "dump", d2], capture_output=True, text=True)
    check(res.returncode == 0, f"dump {d2}: {res.stderr.strip()}")
    if res.returncode != 0:
        continue
    got = json.loads(res.stdout)
    c = got["config"]
    check(c["r"] == 2 and c["lora_alpha"] == 5 and c["use_rslora"] is True and c["target_modules"] == ["v_proj", "gate_proj"],
          f"{dtype.__name__}: config {c}")
    by_module = {e["module"]: e for e in got["tensors"]}
    check(sorted(by_module) == sorted(mods), f"{dtype.__name__}: modules {sorted(by_module)}")
    for m, (inn, out) in mods.items():
        e = by_module.get(m)
        if e is None:
            continue
        check(e["in"] == inn and e["out"] == out, f"{m}: in {e['in']} out {e['out']}")
        for x, key in (("A", "a"), ("B", "b")):
            src = tensors[f"base_model.model.{m}.lora_{x}.weight"].astype(np.float32).reshape(-1).view(np.uint32)
            check(np.array_equal(np.array(e[key], np.uint32), src), f"{dtype.__name__} {m}: lora_{x} bits")

if failures:
    print(f"{len(failures)} failures")
    sys.exit(1)
print("adapter cross-check: lockstep's adapter read by PyPI safetensors (names, shapes, values), and "
      "safetensors' F32/F16 adapters read by lockstep bit for bit: OK")
