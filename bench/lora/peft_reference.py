"""The LoRA finetune of bench/lora/lora_bench.cpp in transformers + PEFT, for a
ratio against lockstep: BitNetForCausalLM at microsoft/bitnet-b1.58-2B-4T's
shapes (30 layers, hidden 2560, FFN 6912, 20 query / 5 KV heads of 128, vocab
128256, tied embeddings, relu2), random init, in bf16; PEFT LoRA (r 8, alpha
16, dropout 0.05, q_proj + v_proj); AdamW over the adapter (lr 2e-4, weight
decay 0.01), gradient clipping at 1.0; batch x seq random tokens, every token
scored. Times `--steps` steps after `--warmup` ones; prints one line with
tokens/s and torch.cuda.max_memory_allocated.

  python3 bench/lora/peft_reference.py [--seq 512] [--batch 1] [--steps 5] [--warmup 1]
                                       [--rank 8] [--targets q_proj,v_proj] [--dtype bf16|fp32]

Needs a GPU, torch, transformers (BitNetForCausalLM) and peft; where one is
missing it says so and exits 0. No download: the config is built here.
"""
import argparse
import sys
import time

try:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import BitNetConfig, BitNetForCausalLM
except Exception as e:  # noqa: BLE001
    print(f"peft_reference: torch / transformers / peft not importable here ({e}); skipped")
    sys.exit(0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--rank", type=int, default=8)
    ap.add_argument("--alpha", type=float, default=16.0)
    ap.add_argument("--dropout", type=float, default=0.05)
    ap.add_argument("--targets", default="q_proj,v_proj")
    ap.add_argument("--dtype", choices=["bf16", "fp32"], default="bf16")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print("peft_reference: no CUDA device; skipped")
        return 0
    dev = torch.device("cuda")
    dtype = torch.bfloat16 if a.dtype == "bf16" else torch.float32
    shape = dict(
        vocab_size=128256,
        hidden_size=2560,
        intermediate_size=6912,
        num_hidden_layers=30,
        num_attention_heads=20,
        num_key_value_heads=5,
        hidden_act="relu2",
        max_position_embeddings=4096,
        rms_norm_eps=1e-5,
        tie_word_embeddings=True,
        bos_token_id=128000,
        eos_token_id=128001,
    )
    try:
        cfg = BitNetConfig(rope_theta=500000.0, **shape)
    except TypeError:  # a transformers whose config takes RoPE as rope_parameters
        cfg = BitNetConfig(rope_parameters={"rope_type": "default", "rope_theta": 500000.0}, **shape)
    torch.manual_seed(1)
    with torch.device(dev):  # initialized on the device (a 2.4B-parameter init on the host takes minutes)
        model = BitNetForCausalLM(cfg)
    model = model.to(dtype=dtype)
    lora = LoraConfig(r=a.rank, lora_alpha=a.alpha, lora_dropout=a.dropout,
                      target_modules=a.targets.split(","), bias="none", task_type="CAUSAL_LM")
    model = get_peft_model(model, lora)
    n_all = sum(p.numel() for p in model.parameters())
    n_train = sum(p.numel() for p in model.parameters() if p.requires_grad)
    print(f"peft_reference: {n_all / 1e9:.3f} B parameters, {n_train / 1e6:.3f} M trainable", file=sys.stderr)
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=2e-4, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
    g = torch.Generator(device="cpu").manual_seed(7)
    ids = torch.randint(0, cfg.vocab_size, (a.batch, a.seq + 1), generator=g).to(dev)
    inputs, labels = ids[:, :-1].contiguous(), ids[:, 1:].contiguous()

    def step():
        out = model(input_ids=inputs)
        loss = torch.nn.functional.cross_entropy(out.logits.float().reshape(-1, cfg.vocab_size), labels.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    for _ in range(a.warmup):
        step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        loss = step()
    torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    tok_s = a.batch * a.seq * a.steps / dt
    peak = torch.cuda.max_memory_allocated() / 2**30
    print(f"peft {a.dtype} bitnet-b1.58-2b seq {a.seq} batch {a.batch} r {a.rank} targets {a.targets}: "
          f"{tok_s:.1f} tok/s over {a.steps} steps (last loss {loss.item():.4f}), "
          f"peak GPU memory {peak:.2f} GiB (torch.cuda.max_memory_allocated; torch {torch.__version__})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
