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
                                       [--preset bitnet-b1.58-2b|bitnet-tiny] [--device cuda|cpu]
                                       [--threads N]

--preset bitnet-tiny is lockstep's preset of that name (vocab 4096, hidden 256, 4 layers, 8 query / 2 KV
heads of 32, FFN 688, tied): the CPU comparison (`--device cpu --dtype fp32 --threads 2`, beside
`lora_bench --device cpu --preset bitnet-tiny` on the same cores); on the CPU the memory printed is the
process's peak resident set (ru_maxrss), not a device pool.

Needs torch, transformers (BitNetForCausalLM) and peft, and a GPU for --device cuda; where one is
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


# lockstep's presets of the same names (src/lockstep/model/config.cpp).
PRESETS = {
    "bitnet-b1.58-2b": dict(vocab_size=128256, hidden_size=2560, intermediate_size=6912, num_hidden_layers=30,
                            num_attention_heads=20, num_key_value_heads=5, max_position_embeddings=4096,
                            bos_token_id=128000, eos_token_id=128001),
    "bitnet-tiny": dict(vocab_size=4096, hidden_size=256, intermediate_size=688, num_hidden_layers=4,
                        num_attention_heads=8, num_key_value_heads=2, max_position_embeddings=256,
                        bos_token_id=0, eos_token_id=1),
}


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
    ap.add_argument("--preset", choices=sorted(PRESETS), default="bitnet-b1.58-2b")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--threads", type=int, default=0, help="CPU threads (torch.set_num_threads); 0: torch's default")
    a = ap.parse_args()
    on_gpu = a.device == "cuda"
    if on_gpu and not torch.cuda.is_available():
        print("peft_reference: no CUDA device; skipped")
        return 0
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    dev = torch.device(a.device)
    dtype = torch.bfloat16 if a.dtype == "bf16" else torch.float32
    shape = dict(
        **PRESETS[a.preset],
        hidden_act="relu2",
        rms_norm_eps=1e-5,
        tie_word_embeddings=True,
    )
    try:
        cfg = BitNetConfig(rope_theta=500000.0, **shape)
    except TypeError:  # a transformers whose config takes RoPE as rope_parameters
        cfg = BitNetConfig(rope_parameters={"rope_type": "default", "rope_theta": 500000.0}, **shape)
    if a.seq > shape["max_position_embeddings"]:
        print(f"peft_reference: --seq {a.seq} exceeds the preset's context {shape['max_position_embeddings']}",
              file=sys.stderr)
        return 2
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

    def sync():
        if on_gpu:
            torch.cuda.synchronize()

    for _ in range(a.warmup):
        step()
    sync()
    if on_gpu:
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        loss = step()
    sync()
    dt = time.perf_counter() - t0
    tok_s = a.batch * a.seq * a.steps / dt
    if on_gpu:
        memory = f"peak GPU memory {torch.cuda.max_memory_allocated() / 2**30:.2f} GiB (torch.cuda.max_memory_allocated"
    else:
        import resource
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux
        memory = f"peak resident {rss:.2f} GiB (ru_maxrss, {torch.get_num_threads()} threads"
    print(f"peft {a.dtype} {a.preset} on {a.device} seq {a.seq} batch {a.batch} r {a.rank} targets {a.targets}: "
          f"{tok_s:.1f} tok/s over {a.steps} steps (last loss {loss.item():.4f}), "
          f"{memory}; torch {torch.__version__})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
