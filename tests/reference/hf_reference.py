"""The independent reference's cases against transformers' own classes (device).

  hf_reference.py CASE_DIR [CASE_DIR ...]

Each CASE_DIR is written by reference_dump (reference_cases.hpp says what it holds).
Loads it with AutoModelForCausalLM (GPT2LMHeadModel / LlamaForCausalLM /
BitNetForCausalLM from config.json's model_type) in float64, eager attention, and
requires, against lockstep's double-precision spec model:
  * no missing, unexpected or mismatched tensors in the load report;
  * the mean cross-entropy over the positions with a target within 1e-10 relative;
  * each row's last-position logits within 1e-10 of max(1, max |logit|);
  * every parameter's gradient (torch autograd of that loss, whole tensors) within
    1e-9 of the tensor's max |g| (both are double-precision backwards of the same function).
BitNet: the checkpoint's projections are plain weights, so each nn.Linear of the
decoder layers is run as transformers' online BitLinear does (transformers.integrations.bitnet:
ActQuant on the input, WeightQuant on the weight, both straight-through in the backward).
Exit 0 on agreement, 1 on disagreement, 77 when torch or transformers is not importable.
"""
import json
import os
import sys

os.environ.setdefault("TORCHDYNAMO_DISABLE", "1")  # the quantizers' @torch.compile: run them eagerly
try:
    import torch
    import transformers
    from transformers import AutoModelForCausalLM
    from safetensors.torch import load_file
except Exception as e:  # noqa: BLE001
    print(f"skip: torch/transformers not importable ({e})")
    sys.exit(77)


def bitlinear_everywhere(model):
    from transformers.integrations.bitnet import ActQuant, WeightQuant

    def forward(self, x):
        return torch.nn.functional.linear(ActQuant.apply(x), WeightQuant.apply(self.weight), self.bias)

    n = 0
    for name, mod in model.named_modules():
        if isinstance(mod, torch.nn.Linear) and ".layers." in name:
            mod.forward = forward.__get__(mod)
            n += 1
    return n


_softmax = torch.nn.functional.softmax


def _softmax_keeping_float64(x, dim=None, _stacklevel=3, dtype=None):
    # transformers' LLaMA/BitNet eager attention asks softmax for float32
    # (softmax(..., dtype=torch.float32)) whatever the model's dtype.
    if dtype == torch.float32 and x.dtype == torch.float64:
        dtype = None
    return _softmax(x, dim=dim, _stacklevel=_stacklevel, dtype=dtype)


def float64_everywhere(model):
    """transformers' LLaMA-style RMSNorm and rotary embedding compute in float32 whatever
    the model's dtype (RMSNorm: hidden_states.to(torch.float32); RoPE: inv_freq.float() @
    position_ids.float() with autocast off; the eager attention's softmax(dtype=float32)), which leaves about 1e-7 relative error in a
    float64 model (seen on the H200: LLaMA/BitNet logits rel 2e-7, gradients 1e-6, GPT-2
    1e-15). Both are re-run here in float64 with their equations unchanged:
      RMSNorm: weight * (x * rsqrt(mean(x^2) + eps));
      RoPE: inv_freq = 1 / theta^(2i/d), cos/sin of position * inv_freq, halves repeated."""
    cfg = model.config
    theta = getattr(cfg, "rope_theta", None)
    if theta is None:
        theta = (getattr(cfg, "rope_parameters", None) or {}).get("rope_theta")
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads

    def rms_forward(self, x):
        eps = getattr(self, "variance_epsilon", getattr(self, "eps", None))
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))

    def rope_forward(self, x, position_ids, *args, **kwargs):
        inv = 1.0 / (float(theta) ** (torch.arange(0, head_dim, 2, dtype=torch.float64, device=x.device) / head_dim))
        freqs = position_ids.to(torch.float64)[:, :, None] * inv[None, None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        scale = float(getattr(self, "attention_scaling", 1.0))
        return (emb.cos() * scale).to(x.dtype), (emb.sin() * scale).to(x.dtype)

    torch.nn.functional.softmax = _softmax_keeping_float64  # the attention's softmax too
    n = 0
    for _, mod in model.named_modules():
        cls = type(mod).__name__
        if cls.endswith("RMSNorm"):
            mod.forward = rms_forward.__get__(mod)
            n += 1
        elif cls.endswith("RotaryEmbedding") and theta is not None:
            mod.forward = rope_forward.__get__(mod)
            n += 1
    return n


def check_case(path, device):
    with open(os.path.join(path, "expected.json")) as f:
        exp = json.load(f)
    kw = dict(attn_implementation="eager", output_loading_info=True)
    try:
        model, info = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float64, **kw)
    except TypeError:
        model, info = AutoModelForCausalLM.from_pretrained(path, torch_dtype=torch.float64, **kw)
    model = model.to(device).eval()
    name = exp["case"]
    problems = {k: v for k, v in info.items() if v and k in ("missing_keys", "unexpected_keys", "mismatched_keys")}
    if problems:
        print(f"{name}: FAIL load report {problems}")
        return False
    note = ""
    if model.config.model_type != "gpt2":
        note = f" ({float64_everywhere(model)} norms/RoPE in float64)"
    if model.config.model_type == "bitnet":
        note += f" ({bitlinear_everywhere(model)} projections through transformers' ActQuant/WeightQuant)"
    B, S = exp["batch"], exp["seq"]
    ids = torch.tensor(exp["ids"], dtype=torch.long, device=device).view(B, S)
    targets = torch.tensor(exp["targets"], dtype=torch.long, device=device).view(-1)
    logits = model(ids).logits
    keep = targets >= 0
    loss = torch.nn.functional.cross_entropy(logits.view(-1, logits.shape[-1])[keep], targets[keep])
    model.zero_grad()
    loss.backward()
    ok = True
    rel = abs(loss.item() - exp["loss"]) / abs(exp["loss"])
    ok &= rel <= 1e-10
    worst_logit = 0.0
    for r in range(B):
        want = torch.tensor(exp["last_logits"][r], dtype=torch.float64, device=device)
        got = logits[r, -1].detach()
        worst_logit = max(worst_logit, ((got - want).abs().max() / max(1.0, got.abs().max().item())).item())
    ok &= worst_logit <= 1e-10
    grads = load_file(os.path.join(path, "grads.safetensors"))
    params = dict(model.named_parameters())
    worst_grad, bad = 0.0, []
    for tname, g in grads.items():
        p = params.get(tname)
        if p is None or p.grad is None:
            bad.append(f"{tname} (no such parameter or no gradient in transformers)")
            continue
        g = g.to(device)
        err = ((p.grad - g).abs().max() / max(g.abs().max().item(), 1e-300)).item()
        worst_grad = max(worst_grad, err)
        if err > 1e-9:
            bad.append(f"{tname} rel {err:.2e}")
    ok &= not bad
    print(f"{name}: {type(model).__name__}{note}: loss rel {rel:.2e}, logits rel {worst_logit:.2e}, "
          f"{len(grads)} gradients worst rel {worst_grad:.2e} {'ok' if ok else 'FAIL'}")
    for b in bad:
        print(f"  FAIL gradient {b}")
    return ok


def main(paths):
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.backends.cuda.matmul.allow_tf32 = False
    print(f"transformers {transformers.__version__}, torch {torch.__version__}, device {device}")
    results = [check_case(p, device) for p in paths]
    print(f"{'OK' if all(results) else 'FAIL'}: {sum(results)} of {len(results)} cases agree with transformers")
    return 0 if all(results) else 1


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__)
        sys.exit(2)
    sys.exit(main(sys.argv[1:]))
