"""Load a lockstep checkpoint with Hugging Face transformers and compare logits.

  hf_check.py DIR     DIR holds config.json + model.safetensors (lockstep's writer)
                      and expected.json: {"sequences": [[ids...], ...], "logits": [[...], ...]}
                      (lockstep's next-token logits after each sequence).

Loads DIR with AutoModelForCausalLM.from_pretrained (GPT2LMHeadModel / LlamaForCausalLM
from config.json's model_type), in float32 on the CPU, eager attention, and requires:
  * no missing, unexpected or mismatched tensors in the load report;
  * for each sequence, max |logit_hf - logit_lockstep| <= 1e-4 * max(1, max |logit|).
Prints one line per sequence. Exit 0 on agreement, 1 on disagreement, 77 when torch or
transformers is not importable (the caller skips).
"""
import json
import sys

try:
    import torch
    import transformers
    from transformers import AutoModelForCausalLM
except Exception as e:  # noqa: BLE001 - any import failure means "skip"
    print(f"skip: torch/transformers not importable ({e})")
    sys.exit(77)


def main(path):
    torch.set_grad_enabled(False)
    kw = dict(attn_implementation="eager", output_loading_info=True)
    try:  # transformers >= 4.56 names it dtype; older versions torch_dtype
        model, info = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, **kw)
    except TypeError:
        model, info = AutoModelForCausalLM.from_pretrained(path, torch_dtype=torch.float32, **kw)
    model.eval()
    print(f"transformers {transformers.__version__}, torch {torch.__version__}: {type(model).__name__}")
    problems = {k: v for k, v in info.items() if v and k in ("missing_keys", "unexpected_keys", "mismatched_keys")}
    if problems:
        print(f"FAIL load report: {problems}")
        return 1
    # A tied head really is the embedding.
    if model.config.tie_word_embeddings:
        emb = model.get_input_embeddings().weight
        head = model.get_output_embeddings().weight
        if emb.data_ptr() != head.data_ptr() and not torch.equal(emb, head):
            print("FAIL lm_head is not tied to the input embedding")
            return 1
    with open(f"{path}/expected.json") as f:
        expected = json.load(f)
    worst = 0.0
    ok = True
    for ids, want in zip(expected["sequences"], expected["logits"]):
        got = model(torch.tensor([ids], dtype=torch.long)).logits[0, -1]
        want_t = torch.tensor(want, dtype=torch.float32)
        diff = (got - want_t).abs().max().item()
        scale = max(1.0, want_t.abs().max().item())
        rel = diff / scale
        worst = max(worst, rel)
        same_top = int(got.argmax()) == int(want_t.argmax())
        print(f"  {len(ids):4d} tokens: max |diff| {diff:.3e} (scale {scale:.2f}), argmax equal {same_top}")
        ok = ok and rel <= 1e-4 and same_top
    print(f"{'OK' if ok else 'FAIL'}: worst relative difference {worst:.3e} (tolerance 1e-4)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
