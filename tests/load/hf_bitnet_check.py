#!/usr/bin/env python3
"""lockstep's Hugging Face loaders against transformers' own models (run on the
device, where transformers is installed; label gpu).

Random-initialized tiny LlamaForCausalLM and BitNetForCausalLM (float32) are
saved by transformers; lockstep (load_tool logits DIR) must give the logits of
the last position transformers gives, to fp32 tolerance:
  llama          LlamaForCausalLM's save_pretrained directory
  bitnet-online  the master checkpoint (float weights) with
                 quantization_config autobitlinear/online: transformers'
                 AutoBitLinear quantizes W online (absmean) and the activations
  bitnet-packed  the packed checkpoint: uint8 [out/4, in] from transformers'
                 pack_weights, weight_scale = 1/mean|W| (transformers'
                 WeightQuant scale), quantization_config bitlinear/offline:
                 transformers' BitLinear computes acc / (input_scale * weight_scale)
The packed check settles the weight_scale question: lockstep divides (the
step is 1/weight_scale, load/model_file.hpp step_from_hf_weight_scale); the
script also prints what multiplying would give.
usage: hf_bitnet_check.py LOAD_TOOL WORKDIR
"""
import json
import os
import subprocess
import sys

os.environ.setdefault("TORCHDYNAMO_DISABLE", "1")  # transformers' bitnet helpers are @torch.compile'd
try:
    import numpy as np
    import torch
    import transformers
    from transformers import BitNetConfig, BitNetForCausalLM, LlamaConfig, LlamaForCausalLM
    from transformers.integrations.bitnet import pack_weights
    from safetensors.torch import save_file
except ImportError as e:
    print(f"SKIP: {e} (transformers and torch are on the device)")
    sys.exit(77)

TOOL, WORK = sys.argv[1], sys.argv[2]
os.makedirs(WORK, exist_ok=True)
torch.manual_seed(0)
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
TOKENS = [(i * 37 + 5) for i in range(11)]  # load_tool's tokens, taken mod vocab
failures = []


def lockstep_logits(path):
    r = subprocess.run([TOOL, "logits", path], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"lockstep failed on {path}: {r.stderr.strip()}")
    return np.array([int(h, 16) for h in r.stdout.split()], dtype=np.uint32).view(np.float32)


def hf_logits(model, vocab):
    ids = torch.tensor([[t % vocab for t in TOKENS]])
    with torch.no_grad():
        return model(ids).logits[0, -1].float().cpu().numpy()


def compare(name, mine, ref, rel_tol):
    err = float(np.max(np.abs(mine - ref)))
    scale = float(np.max(np.abs(ref)))
    ok = err <= rel_tol * scale
    print(f"{name:16s} max|lockstep - transformers| = {err:.3e}, max|logit| = {scale:.3e}, rel {err / scale:.2e} "
          f"(tolerance {rel_tol:g}) {'ok' if ok else 'FAIL'}")
    if not ok:
        failures.append(name)


common = dict(vocab_size=256, hidden_size=64, intermediate_size=172, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=64, rms_norm_eps=1e-5)
print(f"transformers {transformers.__version__}, torch {torch.__version__}")

# LLaMA
cfg = LlamaConfig(**common, rope_parameters={"rope_type": "default", "rope_theta": 10000.0}, tie_word_embeddings=False)
m = LlamaForCausalLM(cfg).float().eval()
with torch.no_grad():  # norms away from 1 so a swapped norm cannot hide
    for n, p in m.named_parameters():
        if n.endswith("norm.weight"):
            p.copy_(1 + 0.1 * torch.randn_like(p))
d = os.path.join(WORK, "llama")
m.save_pretrained(d)
compare("llama", lockstep_logits(d), hf_logits(m, 256), 1e-4)

# BitNet: the float master model, saved, then read back by transformers with
# each quantization_config.
bcfg = BitNetConfig(**common, rope_parameters={"rope_type": "default", "rope_theta": 500000.0}, tie_word_embeddings=True)
master = BitNetForCausalLM(bcfg).float().eval()
with torch.no_grad():
    for n, p in master.named_parameters():
        if n.endswith("norm.weight"):
            p.copy_(1 + 0.1 * torch.randn_like(p))
state = {k: v.contiguous() for k, v in master.state_dict().items() if k != "lm_head.weight"}
PROJ = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def write_dir(path, tensors, quant):
    os.makedirs(path, exist_ok=True)
    master.config.save_pretrained(path)
    c = json.load(open(os.path.join(path, "config.json")))
    c["quantization_config"] = quant
    json.dump(c, open(os.path.join(path, "config.json"), "w"), indent=2)
    save_file(tensors, os.path.join(path, "model.safetensors"), metadata={"format": "pt"})


online_dir = os.path.join(WORK, "bitnet-online")
write_dir(online_dir, state, {"quant_method": "bitnet", "linear_class": "autobitlinear", "quantization_mode": "online"})
packed, scales = {}, {}
for k, v in state.items():
    if k.split(".")[-2] in PROJ:
        s = 1.0 / v.abs().mean().clamp(min=1e-5)  # transformers' WeightQuant scale
        q = (v * s).round().clamp(-1, 1)
        packed[k] = pack_weights(q.clone()).contiguous()
        packed[k[:-len("weight")] + "weight_scale"] = s.reshape(1).float()
        scales[k] = float(s)
    else:
        packed[k] = v
packed_dir = os.path.join(WORK, "bitnet-packed")
write_dir(packed_dir, packed, {"quant_method": "bitnet", "linear_class": "bitlinear", "quantization_mode": "offline"})

online = BitNetForCausalLM.from_pretrained(online_dir, dtype=torch.float32).eval()
offline = BitNetForCausalLM.from_pretrained(packed_dir, dtype=torch.float32).eval()
print("transformers' modules:", type(online.model.layers[0].self_attn.q_proj).__name__, "/",
      type(offline.model.layers[0].self_attn.q_proj).__name__)
ref_online, ref_packed = hf_logits(online, 256), hf_logits(offline, 256)
compare("bitnet-online", lockstep_logits(online_dir), ref_online, 2e-3)
compare("bitnet-packed", lockstep_logits(packed_dir), ref_packed, 2e-3)
compare("hf packed~online", ref_packed, ref_online, 2e-3)  # the packing itself is right

# What multiplying by weight_scale would mean: the same packed directory with
# weight_scale replaced by its reciprocal is what lockstep would need if
# transformers multiplied; transformers' logits from that file are far off.
mult = dict(packed)
for k in scales:
    mult[k[:-len("weight")] + "weight_scale"] = torch.tensor([1.0 / scales[k]], dtype=torch.float32)
mult_dir = os.path.join(WORK, "bitnet-packed-reciprocal")
write_dir(mult_dir, mult, {"quant_method": "bitnet", "linear_class": "bitlinear", "quantization_mode": "offline"})
ref_mult = hf_logits(BitNetForCausalLM.from_pretrained(mult_dir, dtype=torch.float32).eval(), 256)
far = float(np.max(np.abs(ref_mult - ref_online))) / float(np.max(np.abs(ref_online)))
print(f"weight_scale = mean|W| (multiply reading): transformers' logits differ from the master's by rel {far:.2e}")
if far < 0.05:
    failures.append("reciprocal weight_scale is not distinguishable")

if failures:
    print("FAILED:", ", ".join(failures))
    sys.exit(1)
print("transformers agrees: weight_scale divides (step = 1 / weight_scale); LLaMA and BitNet (online, packed) match")
