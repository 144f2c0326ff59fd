#!/usr/bin/env python3
"""lockstep's LoRA adapters against Hugging Face PEFT, both ways (the device
host, where torch, transformers and peft are installed; no network needed).

  1. transformers makes a random-initialized tiny LlamaForCausalLM (fp32) and
     saves it; PEFT wraps it with a LoRA adapter (r 4, alpha 8, q/v/down_proj,
     B random and nonzero) and saves the adapter. lockstep loads base + adapter
     (adapter_tool logits ... unmerged: load::make_adapted_model, the model's
     LoRA layers, whose bits are LoraLinear's spec; and ... merged) and its
     logits at every position match PEFT's.
  2. lockstep writes an adapter for the same base (adapter_tool write-for);
     PEFT loads it with PeftModel.from_pretrained (no missing or unexpected
     keys, lora_B nonzero) and its logits match lockstep's.
  Tolerance: fp32 (max |diff| <= 1e-4 * max(1, max |logit|)); the measured
  differences are printed. PyTorch runs on the CPU (no TF32).
usage: peft_roundtrip.py ADAPTER_TOOL WORKDIR     (exit 77: torch/transformers/peft missing)
"""
import json
import os
import subprocess
import sys

try:
    import numpy as np
    import torch
    import transformers
    import peft
    from peft import LoraConfig, PeftModel, get_peft_model
    from safetensors.numpy import load_file
    from transformers import LlamaConfig, LlamaForCausalLM
except ImportError as e:
    print(f"SKIP: {e} (torch, transformers and peft are on the device host)")
    sys.exit(77)

TOOL, WORK = sys.argv[1], sys.argv[2]
os.makedirs(WORK, exist_ok=True)
torch.manual_seed(0)
torch.set_grad_enabled(False)
failures = []
IDS = [1, 17, 200, 3, 99, 45, 128, 7, 250, 64, 12]


def check(cond, what):
    print(("ok:   " if cond else "FAIL: ") + what)
    if not cond:
        failures.append(what)


def lockstep_logits(base, adapter, mode):
    res = subprocess.run([TOOL, "logits", base, adapter, mode, ",".join(map(str, IDS))], capture_output=True, text=True)
    if res.returncode != 0:
        raise SystemExit(f"adapter_tool logits {mode} failed: {res.stderr.strip()}")
    return np.array(json.loads(res.stdout), dtype=np.float64)


def compare(what, ours, theirs):
    diff = float(np.max(np.abs(ours - theirs)))
    top = float(np.max(np.abs(theirs)))
    check(ours.shape == theirs.shape and diff <= 1e-4 * max(1.0, top),
          f"{what}: max |diff| {diff:.3g} (max |logit| {top:.3g}, shape {ours.shape})")
    return diff


print(f"torch {torch.__version__}, transformers {transformers.__version__}, peft {peft.__version__}")
# As tests/load/hf_bitnet_check.py makes its llama (transformers 5's rope_parameters).
cfg = LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=172, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=64, rms_norm_eps=1e-5,
                  rope_parameters={"rope_type": "default", "rope_theta": 10000.0}, tie_word_embeddings=False)
base = LlamaForCausalLM(cfg).float().eval()
for n, p in base.named_parameters():  # norms away from 1 so a swapped norm cannot hide
    if n.endswith("norm.weight"):
        p.copy_(1 + 0.1 * torch.randn_like(p))
base_dir = os.path.join(WORK, "base")
base.save_pretrained(base_dir, safe_serialization=True)
ids = torch.tensor([IDS])
base_logits = base(ids).logits[0].double().numpy()
compare("base: lockstep vs transformers", lockstep_logits(base_dir, "-", "base"), base_logits)

# 1. PEFT writes, lockstep reads.
lcfg = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj", "down_proj"], lora_dropout=0.0,
                  bias="none", task_type="CAUSAL_LM", init_lora_weights=False)
pm = get_peft_model(LlamaForCausalLM.from_pretrained(base_dir, dtype=torch.float32).eval(), lcfg)
for name, p in pm.named_parameters():
    if "lora_B" in name:
        p.normal_(0.0, 0.2)
pm.eval()
peft_dir = os.path.join(WORK, "peft_adapter")
pm.save_pretrained(peft_dir)
names = sorted(load_file(os.path.join(peft_dir, "adapter_model.safetensors")))
print("PEFT's adapter:", len(names), "tensors, e.g.", names[0])
peft_logits = pm(ids).logits[0].double().numpy()
check(float(np.max(np.abs(peft_logits - base_logits))) > 1e-3, "PEFT's adapter moves the logits")
d_unmerged = compare("PEFT adapter: lockstep unmerged vs PEFT", lockstep_logits(base_dir, peft_dir, "unmerged"), peft_logits)
d_merged = compare("PEFT adapter: lockstep merged vs PEFT", lockstep_logits(base_dir, peft_dir, "merged"), peft_logits)
merged_peft = pm.merge_and_unload()(ids).logits[0].double().numpy()
compare("PEFT adapter: lockstep merged vs PEFT merge_and_unload", lockstep_logits(base_dir, peft_dir, "merged"), merged_peft)

# 2. lockstep writes, PEFT reads.
ls_dir = os.path.join(WORK, "lockstep_adapter")
subprocess.run([TOOL, "write-for", base_dir, ls_dir, "3", "q_proj", "v_proj", "down_proj"], check=True)
loaded = PeftModel.from_pretrained(LlamaForCausalLM.from_pretrained(base_dir, dtype=torch.float32).eval(), ls_dir)
loaded.eval()
st = load_file(os.path.join(ls_dir, "adapter_model.safetensors"))
matched = 0
for name, p in loaded.named_parameters():
    if "lora_" not in name:
        continue
    key = name.replace(".default", "")
    if key in st:
        matched += int(np.array_equal(p.detach().numpy(), st[key]))
check(matched == len(st), f"PEFT holds every tensor lockstep wrote, bit for bit ({matched} of {len(st)})")
ls_peft = loaded(ids).logits[0].double().numpy()
check(float(np.max(np.abs(ls_peft - base_logits))) > 1e-3, "lockstep's adapter moves PEFT's logits")
d_back = compare("lockstep adapter: PEFT vs lockstep unmerged", lockstep_logits(base_dir, ls_dir, "unmerged"), ls_peft)

print(f"summary: PEFT->lockstep unmerged {d_unmerged:.3g}, merged {d_merged:.3g}; lockstep->PEFT {d_back:.3g}")
if failures:
    print(f"{len(failures)} failures")
    sys.exit(1)
print("PEFT round trip: OK")
