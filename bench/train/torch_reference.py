"""The same CPU training step in PyTorch fp32, for a ratio against lockstep.

  python3 bench/train/torch_reference.py [--bench build/release/bench/train/train_bench]
                                         [--threads 2] [--steps 5] [--device cpu|cuda] [CONFIG ...]

For each CONFIG (as train_bench takes it: "default", "gpt2-tiny:16:256:1024", ...) it
runs lockstep's train_bench --json to get lockstep's tokens/s and the model's shape,
builds the same model in PyTorch (GPT-2: learned positions, pre-LayerNorm, fused qkv,
tanh GELU, tied head; LLaMA: RMSNorm, rotate-half RoPE, grouped-query attention,
SwiGLU), and times the same step: forward, cross-entropy, backward, global-norm
clipping at 1.0, AdamW — fp32, torch.set_num_threads(threads), no torch.compile.
Prints both numbers and lockstep / PyTorch. With --device cuda both run on the GPU
(lockstep's CUDA model; PyTorch fp32 with TF32 off, scaled_dot_product_attention,
AdamW fused), e.g. the GPT-2 124M benchmark:
  python3 bench/train/torch_reference.py --device cuda --steps 10 gpt2-124m:16:1024:50257
and with --torch-modes fp32,bf16,bf16-compile,bf16-det every PyTorch configuration of the
performance issue (bf16 autocast with fp32 master weights, torch.compile, deterministic
algorithms; fused AdamW on the GPU), with its peak GPU memory.

Where torch is not importable (the Debian development machine) it says so and exits 0.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import time

# bf16-det's deterministic cuBLAS needs a fixed workspace, set before CUDA starts.
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except Exception as e:  # noqa: BLE001
    print(f"torch_reference: PyTorch is not importable here ({e}); skipped")
    sys.exit(0)


class Gpt2Block(nn.Module):
    def __init__(self, d, h, ff, eps):
        super().__init__()
        self.h = h
        self.ln_1 = nn.LayerNorm(d, eps=eps)
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)
        self.ln_2 = nn.LayerNorm(d, eps=eps)
        self.c_fc = nn.Linear(d, ff)
        self.mlp_proj = nn.Linear(ff, d)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.h, C // self.h).transpose(1, 2) for t in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.c_proj(a.transpose(1, 2).reshape(B, T, C))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class Gpt2(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.wte = nn.Embedding(c["vocab"], c["d_model"])
        self.wpe = nn.Embedding(c["max_seq"], c["d_model"])
        self.blocks = nn.ModuleList(Gpt2Block(c["d_model"], c["n_head"], c["d_ff"], c["norm_eps"])
                                    for _ in range(c["n_layer"]))
        self.ln_f = nn.LayerNorm(c["d_model"], eps=c["norm_eps"])

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        for b in self.blocks:
            x = b(x)
        return self.ln_f(x) @ self.wte.weight.t()


def rope(x, theta):  # x [B, H, T, D], rotate-half pairs (i, i + D/2)
    T, D = x.shape[2], x.shape[3]
    inv = 1.0 / (theta ** (torch.arange(0, D, 2, dtype=torch.float32) / D))
    ang = torch.arange(T, dtype=torch.float32)[:, None] * inv[None, :]
    cos, sin = torch.cat([ang.cos()] * 2, -1), torch.cat([ang.sin()] * 2, -1)
    x1, x2 = x[..., : D // 2], x[..., D // 2:]
    return x * cos + torch.cat([-x2, x1], -1) * sin


class LlamaBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        d, hd = c["d_model"], c["head_dim"]
        self.h, self.kv, self.hd, self.theta = c["n_head"], c["n_kv_head"], hd, c["rope_theta"]
        self.n1 = nn.RMSNorm(d, eps=c["norm_eps"])
        self.q = nn.Linear(d, self.h * hd, bias=False)
        self.k = nn.Linear(d, self.kv * hd, bias=False)
        self.v = nn.Linear(d, self.kv * hd, bias=False)
        self.o = nn.Linear(self.h * hd, d, bias=False)
        self.n2 = nn.RMSNorm(d, eps=c["norm_eps"])
        self.gate = nn.Linear(d, c["d_ff"], bias=False)
        self.up = nn.Linear(d, c["d_ff"], bias=False)
        self.down = nn.Linear(c["d_ff"], d, bias=False)

    def forward(self, x):
        B, T, _ = x.shape
        y = self.n1(x)
        q = rope(self.q(y).view(B, T, self.h, self.hd).transpose(1, 2), self.theta)
        k = rope(self.k(y).view(B, T, self.kv, self.hd).transpose(1, 2), self.theta)
        v = self.v(y).view(B, T, self.kv, self.hd).transpose(1, 2)
        rep = self.h // self.kv
        k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(a.transpose(1, 2).reshape(B, T, -1))
        y = self.n2(x)
        return x + self.down(F.silu(self.gate(y)) * self.up(y))


class Llama(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.emb = nn.Embedding(c["vocab"], c["d_model"])
        self.blocks = nn.ModuleList(LlamaBlock(c) for _ in range(c["n_layer"]))
        self.norm = nn.RMSNorm(c["d_model"], eps=c["norm_eps"])
        self.head = None if c["tie_embeddings"] else nn.Linear(c["d_model"], c["vocab"], bias=False)

    def forward(self, idx):
        x = self.emb(idx)
        for b in self.blocks:
            x = b(x)
        x = self.norm(x)
        return x @ self.emb.weight.t() if self.head is None else self.head(x)


TORCH_MODES = ("fp32", "bf16", "bf16-compile", "bf16-det")


def torch_tokens_per_second(c, threads, steps, device="cpu", mode="fp32", with_memory=False):
    """Tokens/s of the training step in PyTorch. Modes: fp32 (TF32 off); bf16 (autocast,
    fp32 master weights: what a PyTorch user runs); bf16-compile (the same under
    torch.compile); bf16-det (bf16 with torch.use_deterministic_algorithms). On the GPU
    AdamW is fused (PyTorch's fastest); on the CPU it is the plain loop, as before.
    with_memory: returns (tok/s, peak GPU bytes)."""
    torch.manual_seed(0)
    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(mode == "bf16-det")
    if device == "cuda":  # fp32 means fp32: no TF32 anywhere
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.set_float32_matmul_precision("highest")
        torch.cuda.reset_peak_memory_stats()
    model = (Gpt2(c) if c["family"] == "gpt2" else Llama(c)).to(device)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    other = [p for p in model.parameters() if p.dim() < 2]
    fused = {"fused": True} if device == "cuda" else {"foreach": False}
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": other, "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.95), eps=1e-8, **fused)
    forward = torch.compile(model) if mode == "bf16-compile" else model
    B, T, V = c["batch"], c["seq"], c["vocab"]
    x = torch.randint(0, V, (B, T), device=device)
    y = torch.randint(0, V, (B, T), device=device)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    bf16 = mode != "fp32"

    def step():
        with torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=bf16):
            logits = forward(x)
            loss = F.cross_entropy(logits.view(-1, V).float(), y.view(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()

    for _ in range(2 if mode == "bf16-compile" else 1):  # warm-up (compilation)
        step()
    sync()
    t = time.perf_counter()
    for _ in range(steps):
        step()
    sync()
    rate = B * T * steps / (time.perf_counter() - t)
    torch.use_deterministic_algorithms(False)
    if not with_memory:
        return rate
    return rate, (torch.cuda.max_memory_allocated() if device == "cuda" else 0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--bench", default=os.path.join(here, "..", "..", "build", "release", "bench", "train", "train_bench"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--audit", choices=["off", "stop"], default="off", help="lockstep's live audits (cuda)")
    ap.add_argument("--torch-modes", default="fp32",
                    help="comma-separated PyTorch modes: " + ", ".join(TORCH_MODES) + " (default fp32)")
    ap.add_argument("configs", nargs="*", default=["default", "gpt2-tiny:16:256:1024", "llama-tiny:16:256:1024"])
    a = ap.parse_args()
    if not os.path.exists(a.bench):
        print(f"torch_reference: {a.bench} not found (build bench/train first, or pass --bench)")
        return 1
    modes = [m for m in a.torch_modes.split(",") if m]
    for m in modes:
        if m not in TORCH_MODES:
            print(f"torch_reference: unknown --torch-modes entry '{m}' (known: {', '.join(TORCH_MODES)})")
            return 2
    where = f"{a.threads} threads" if a.device == "cpu" else torch.cuda.get_device_name(0) + ", TF32 off"
    print(f"PyTorch {torch.__version__} {a.device} vs lockstep, {where}, {a.steps} timed steps")
    print(f"{'config':<26} {'torch mode':<13} {'lockstep tok/s':>15} {'torch tok/s':>12} {'lockstep/torch':>15}"
          f" {'torch peak GiB':>15}")
    for spec in a.configs:
        out = subprocess.run([a.bench, spec, "--json", "--threads", str(a.threads), "--steps", str(a.steps),
                              "--device", a.device, "--audit", a.audit], check=True, capture_output=True, text=True).stdout
        c = json.loads(out.strip().splitlines()[-1])
        for m in modes:
            ref, peak = torch_tokens_per_second(c, a.threads, a.steps, a.device, m, with_memory=True)
            print(f"{spec:<26} {m:<13} {c['train_tok_s']:>15.0f} {ref:>12.0f} {c['train_tok_s'] / ref:>15.3f}"
                  f" {peak / 2**30:>15.2f}   (lockstep ms/step {c['ms_per_step']:.1f}: model {c['model_ms']:.1f},"
                  f" optimizer {c['optim_ms']:.1f})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
