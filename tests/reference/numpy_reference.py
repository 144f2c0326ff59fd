"""An independent float64 reference of GPT-2, LLaMA and BitNet b1.58, in NumPy.

  numpy_reference.py CASE_DIR [CASE_DIR ...]

Written from the published model definitions — Hugging Face transformers'
modeling_gpt2.py, modeling_llama.py, modeling_bitnet.py and integrations/bitnet.py
(the BitNet b1.58 quantizers) — not from lockstep's code: it reads only what a
Hugging Face user has (config.json, model.safetensors under HF names and layout)
plus lockstep's answers (expected.json, grads.safetensors; reference_cases.hpp
describes the directory). For each case it requires:

  * the mean cross-entropy over the positions with a target (target -1: none)
    equal to lockstep's double-precision loss within 1e-10 relative;
  * each row's last-position logits equal within 1e-10 of max(1, max |logit|);
  * every parameter tensor's gradient, at sampled coordinates, equal to NumPy's
    central finite difference of this loss: |fd - g| <= max(1e-6 * scale, noise),
    scale = max |g| over the tensor, noise = 64 * 2^-53 * |loss| / h (the rounding
    of two double evaluations divided by the step), h = 1e-6 * max(1, |w|).
    BitNet's quantizers are differentiated as its reference trains them (the
    straight-through estimator, x + (quant(x) - x).detach()): the corrections
    quant(x) - x are recorded at the point and held constant while differencing.
    A coordinate over that bound gets one more difference at h / 10 and passes
    only if the error there is within the bound and shrank at least fivefold:
    the O(h) error of a central difference at a jump of the second derivative,
    which a correct gradient has (ReLU^2 of an exact 0 — BitLinear's integer dot
    products are 0 often), falls tenfold; a wrong gradient's error does not.

Exit 0 when every case agrees, 1 otherwise, 77 when numpy or safetensors is
not importable (the caller skips).
"""
import json
import math
import os
import sys

try:
    import numpy as np
    from safetensors.numpy import load_file
except Exception as e:  # noqa: BLE001 - any import failure means "skip"
    print(f"skip: numpy/safetensors not importable ({e})")
    sys.exit(77)


# --- building blocks, each as the HF modelling code writes it ----------------

def layer_norm(x, w, b, eps):
    # torch.nn.LayerNorm: biased variance over the last dimension.
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def rms_norm(x, w, eps):
    # LlamaRMSNorm / BitNetRMSNorm: weight * (x * rsqrt(mean(x^2) + eps)).
    var = (x * x).mean(-1, keepdims=True)
    return w * (x / np.sqrt(var + eps))


def gelu_new(x):
    # ACT2FN["gelu_new"]: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def silu(x):
    return x / (1.0 + np.exp(-x))


def relu2(x):
    # ACT2FN["relu2"]: relu(x)^2.
    return np.maximum(x, 0.0) ** 2


def causal_attention(q, k, v):
    # q [B, Hq, S, Dh], k/v [B, Hkv, S, Dh]; repeat_kv: query head h reads kv
    # head h // (Hq / Hkv); scores scaled by Dh^-0.5; causal mask; softmax.
    n_rep = q.shape[1] // k.shape[1]
    k = np.repeat(k, n_rep, axis=1)
    v = np.repeat(v, n_rep, axis=1)
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    S = q.shape[2]
    mask = np.triu(np.ones((S, S), dtype=bool), 1)
    s = np.where(mask, -np.inf, s)
    s = s - s.max(-1, keepdims=True)
    p = np.exp(s)
    p = p / p.sum(-1, keepdims=True)
    return p @ v


def rope_cos_sin(S, dh, theta):
    # LlamaRotaryEmbedding (default rope type): inv_freq = 1 / theta^(2i/d),
    # emb = cat(freqs, freqs).
    inv_freq = 1.0 / theta ** (np.arange(0, dh, 2, dtype=np.float64) / dh)
    freqs = np.outer(np.arange(S, dtype=np.float64), inv_freq)
    emb = np.concatenate([freqs, freqs], axis=-1)
    return np.cos(emb), np.sin(emb)


def rotate_half(x):
    h = x.shape[-1] // 2
    return np.concatenate([-x[..., h:], x[..., :h]], axis=-1)


def cross_entropy(logits, targets):
    # mean over the positions with a target of -log softmax(z)_t.
    z = logits.reshape(-1, logits.shape[-1])
    t = targets.reshape(-1)
    m = z.max(-1, keepdims=True)
    lse = (m + np.log(np.exp(z - m).sum(-1, keepdims=True)))[:, 0]
    keep = t >= 0
    return float((lse[keep] - z[keep, t[keep]]).sum() / keep.sum())


class BitQuant:
    """integrations/bitnet.py's online quantizers (WeightQuant, ActQuant) with
    their straight-through gradient. mode "exact": quantize; "record": quantize
    and remember quant(x) - x per call; "ste": add the remembered corrections
    (what autograd differentiates: x + (quant(x) - x).detach())."""

    def __init__(self):
        self.mode = "exact"
        self.corrections = []
        self.at = 0

    def _apply(self, x, quant):
        if self.mode == "ste":
            c = self.corrections[self.at]
            self.at += 1
            return x + c
        xq = quant(x)
        if self.mode == "record":
            self.corrections.append(xq - x)
        return xq

    def weight(self, w):
        def q(w):
            scale = 1.0 / max(np.abs(w).mean(), 1e-5)
            return np.clip(np.round(w * scale), -1, 1) / scale
        return self._apply(w, q)

    def act(self, x):
        def q(x):
            scale = 127.0 / np.maximum(np.abs(x).max(-1, keepdims=True), 1e-5)
            return np.clip(np.round(x * scale), -128, 127) / scale
        return self._apply(x, q)


# --- the three families -------------------------------------------------------

def gpt2_logits(cfg, W, ids):
    B, S = ids.shape
    D, H = cfg["n_embd"], cfg["n_head"]
    Dh = D // H
    eps = cfg["layer_norm_epsilon"]
    h = W["transformer.wte.weight"][ids] + W["transformer.wpe.weight"][np.arange(S)]
    for l in range(cfg["n_layer"]):
        p = f"transformer.h.{l}."
        a = layer_norm(h, W[p + "ln_1.weight"], W[p + "ln_1.bias"], eps)
        # Conv1D: x @ weight[in, out] + bias; query, key, value = split(n_embd).
        qkv = a @ W[p + "attn.c_attn.weight"] + W[p + "attn.c_attn.bias"]
        q, k, v = (qkv[..., i * D:(i + 1) * D].reshape(B, S, H, Dh).transpose(0, 2, 1, 3) for i in range(3))
        o = causal_attention(q, k, v).transpose(0, 2, 1, 3).reshape(B, S, D)
        h = h + o @ W[p + "attn.c_proj.weight"] + W[p + "attn.c_proj.bias"]
        m = layer_norm(h, W[p + "ln_2.weight"], W[p + "ln_2.bias"], eps)
        m = gelu_new(m @ W[p + "mlp.c_fc.weight"] + W[p + "mlp.c_fc.bias"])
        h = h + m @ W[p + "mlp.c_proj.weight"] + W[p + "mlp.c_proj.bias"]
    h = layer_norm(h, W["transformer.ln_f.weight"], W["transformer.ln_f.bias"], eps)
    head = W["transformer.wte.weight"] if cfg.get("tie_word_embeddings", True) else W["lm_head.weight"]
    return h @ head.T


def llama_logits(cfg, W, ids, quant=None):
    """LlamaForCausalLM; with `quant`, BitNetForCausalLM (AutoBitLinear
    projections, attn_sub_norm before o_proj, ffn_sub_norm before down_proj,
    relu2)."""
    B, S = ids.shape
    Hq, Hkv, Dh = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    eps = cfg["rms_norm_eps"]
    bit = quant is not None

    def linear(x, name):  # nn.Linear (no bias): x @ W.T; AutoBitLinear quantizes both
        w = W[name]
        if bit:
            return quant.act(x) @ quant.weight(w).T
        return x @ w.T

    cos, sin = rope_cos_sin(S, Dh, cfg["rope_theta"])
    h = W["model.embed_tokens.weight"][ids]
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        a = rms_norm(h, W[p + "input_layernorm.weight"], eps)
        q = linear(a, p + "self_attn.q_proj.weight").reshape(B, S, Hq, Dh).transpose(0, 2, 1, 3)
        k = linear(a, p + "self_attn.k_proj.weight").reshape(B, S, Hkv, Dh).transpose(0, 2, 1, 3)
        v = linear(a, p + "self_attn.v_proj.weight").reshape(B, S, Hkv, Dh).transpose(0, 2, 1, 3)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        o = causal_attention(q, k, v).transpose(0, 2, 1, 3).reshape(B, S, Hq * Dh)
        if bit:
            o = rms_norm(o, W[p + "self_attn.attn_sub_norm.weight"], eps)
        h = h + linear(o, p + "self_attn.o_proj.weight")
        m = rms_norm(h, W[p + "post_attention_layernorm.weight"], eps)
        gate, up = linear(m, p + "mlp.gate_proj.weight"), linear(m, p + "mlp.up_proj.weight")
        act = relu2(gate) * up if bit else silu(gate) * up
        if bit:
            act = rms_norm(act, W[p + "mlp.ffn_sub_norm.weight"], eps)
        h = h + linear(act, p + "mlp.down_proj.weight")
    h = rms_norm(h, W["model.norm.weight"], eps)
    head = W["model.embed_tokens.weight"] if cfg.get("tie_word_embeddings", False) else W["lm_head.weight"]
    return h @ head.T


class Model:
    def __init__(self, cfg, W):
        self.cfg, self.W = cfg, W
        self.kind = cfg["model_type"]
        self.quant = BitQuant() if self.kind == "bitnet" else None

    def logits(self, ids):
        if self.kind == "gpt2":
            return gpt2_logits(self.cfg, self.W, ids)
        if self.quant is not None:
            self.quant.at = 0
        return llama_logits(self.cfg, self.W, ids, self.quant)

    def loss(self, ids, targets):
        return cross_entropy(self.logits(ids), targets)


# --- the comparison -----------------------------------------------------------

def check_case(path, coords_per_tensor=3):
    with open(os.path.join(path, "config.json")) as f:
        cfg = json.load(f)
    with open(os.path.join(path, "expected.json")) as f:
        exp = json.load(f)
    W = {k: v.astype(np.float64) for k, v in load_file(os.path.join(path, "model.safetensors")).items()}
    G = load_file(os.path.join(path, "grads.safetensors"))
    B, S = exp["batch"], exp["seq"]
    ids = np.array(exp["ids"], dtype=np.int64).reshape(B, S)
    targets = np.array(exp["targets"], dtype=np.int64).reshape(B, S)
    model = Model(cfg, W)
    ok = True
    name = exp["case"]

    logits = model.logits(ids)
    loss = cross_entropy(logits, targets)
    rel = abs(loss - exp["loss"]) / abs(loss)
    good = rel <= 1e-10
    ok &= good
    print(f"{name}: loss numpy {loss:.15g} lockstep {exp['loss']:.15g} rel {rel:.2e} {'ok' if good else 'FAIL'}")
    worst_logit = 0.0
    for r in range(B):
        want = np.array(exp["last_logits"][r])
        got = logits[r, -1]
        worst_logit = max(worst_logit, np.abs(got - want).max() / max(1.0, np.abs(got).max()))
    good = worst_logit <= 1e-10
    ok &= good
    print(f"  last-position logits of {B} rows: worst rel {worst_logit:.2e} {'ok' if good else 'FAIL'}")

    # Finite differences, BitLinear through the STE (corrections at the point).
    if model.quant is not None:
        model.quant.mode = "record"
        model.quant.corrections = []
        l0 = model.loss(ids, targets)
        model.quant.mode = "ste"
        l0s = model.loss(ids, targets)
        if abs(l0s - l0) > 1e-13 * abs(l0):
            print(f"  FAIL the STE surrogate is not the forward at the point ({l0s} vs {l0})")
            ok = False
    rng = np.random.default_rng(exp.get("seed", 0) % (2 ** 32))
    step = 1e-6
    noise = 64.0 * 2.0 ** -53 * abs(loss) / step
    used = np.unique(ids)
    worst, checked, failed, refined = 0.0, 0, 0, 0
    for tname, g in G.items():
        w = W[tname]
        scale = float(np.abs(g).max())
        flat_w, flat_g = w.reshape(-1), g.reshape(-1)
        cols = w.shape[-1] if w.ndim == 2 else flat_w.size
        picks = []
        for c in range(coords_per_tensor):
            if w.ndim == 2 and ("wte" in tname or "embed_tokens" in tname) and c + 1 < coords_per_tensor:
                row = int(rng.choice(used))
            elif "wpe" in tname:
                row = int(rng.integers(S))
            else:
                row = int(rng.integers(flat_w.size // cols))
            picks.append(row * cols + int(rng.integers(cols)))
        def central_difference(e, h):
            x = flat_w[e]
            flat_w[e] = x + h
            xp = flat_w[e]
            lp = model.loss(ids, targets)
            flat_w[e] = x - h
            xn = flat_w[e]
            ln = model.loss(ids, targets)
            flat_w[e] = x
            return (lp - ln) / (xp - xn)

        tol = max(1e-6 * scale, noise)
        max_err = 0.0
        for e in picks:
            h = step * max(1.0, abs(flat_w[e]))
            err = abs(central_difference(e, h) - flat_g[e])
            if err > tol:
                # A kink of the second derivative at the point (the docstring):
                # the error of a correct gradient falls with the step.
                fine_tol = max(1e-6 * scale, noise * 10.0)
                fine_err = abs(central_difference(e, h / 10.0) - flat_g[e])
                if fine_err <= fine_tol and fine_err * 5.0 <= err:
                    refined += 1
                    print(f"  {tname}[{e}]: |fd - g| {err:.3e} at h, {fine_err:.3e} at h/10 "
                          f"(falls with the step: a kink of the second derivative at the point)")
                    err = fine_err
            max_err = max(max_err, err)
        checked += len(picks)
        worst = max(worst, max_err / tol)
        if max_err > tol or scale == 0.0:
            failed += 1
            ok = False
            print(f"  FAIL gradient {tname}: max |fd - g| {max_err:.3e} > tol {tol:.3e} (scale {scale:.3e})")
    print(f"  gradients: {len(G)} tensors, {checked} coordinates against NumPy finite differences, "
          f"{failed} failed, {refined} passed at h/10, worst error/tolerance {worst:.3g}"
          f"{' (BitLinear through the STE)' if model.quant else ''}")
    if model.quant is not None:
        model.quant.mode = "exact"
    return ok


def main(paths):
    print(f"numpy {np.__version__}")
    results = [check_case(p) for p in paths]
    print(f"{'OK' if all(results) else 'FAIL'}: {sum(results)} of {len(results)} cases agree with the NumPy reference")
    return 0 if all(results) else 1


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__)
        sys.exit(2)
    sys.exit(main(sys.argv[1:]))
