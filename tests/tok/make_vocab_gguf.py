#!/usr/bin/env python3
"""Writes a vocabulary-only GGUF (tokenizer.ggml.* metadata, no tensors) from
a Hugging Face byte-level BPE tokenizer.json, with PyPI's `gguf` package
(llama.cpp's own writer, which lockstep shares no code with), the way
llama.cpp's convert_hf_to_gguf.py lays a BPE vocabulary out: tokens in id
order, added tokens typed CONTROL, merges as "a b" strings.

    python3 tests/tok/make_vocab_gguf.py tokenizer.json out.gguf --pre llama-bpe [--bos ID --eos ID --add-bos]

The llama.cpp vocab test ggml-vocab-llama-bpe.gguf is not shipped in the
shared test data; this rebuilds an equivalent from LLaMA-3's tokenizer.json.
Exit status 3 when `gguf` cannot be imported (the C++ test then skips).
"""
import argparse
import json
import sys

try:
    import gguf
except ImportError:
    sys.exit(3)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tokenizer_json")
    ap.add_argument("out")
    ap.add_argument("--pre", required=True)
    ap.add_argument("--bos", type=int)
    ap.add_argument("--eos", type=int)
    ap.add_argument("--add-bos", action="store_true")
    a = ap.parse_args()
    tj = json.load(open(a.tokenizer_json, encoding="utf-8"))
    model = tj["model"]
    added = {t["id"]: t["content"] for t in tj.get("added_tokens") or []}
    n = max(list(model["vocab"].values()) + list(added)) + 1
    tokens = [f"[PAD{i}]" for i in range(n)]
    types = [gguf.TokenType.UNUSED] * n
    for text, i in model["vocab"].items():
        tokens[i] = text
        types[i] = gguf.TokenType.NORMAL
    for i, text in added.items():
        tokens[i] = text
        types[i] = gguf.TokenType.CONTROL
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    w = gguf.GGUFWriter(a.out, arch="llama")
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(a.pre)
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    if a.bos is not None:
        w.add_bos_token_id(a.bos)
    if a.eos is not None:
        w.add_eos_token_id(a.eos)
    w.add_add_bos_token(a.add_bos)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"make_vocab_gguf: gguf {gguf.__version__ if hasattr(gguf, '__version__') else ''} wrote {a.out}: "
          f"{n} tokens, {len(merges)} merges, pre {a.pre}")


if __name__ == "__main__":
    main()
