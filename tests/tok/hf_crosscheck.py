#!/usr/bin/env python3
"""Encodes random texts with Hugging Face `tokenizers` (an implementation
lockstep shares no code with) and writes what it got, one JSON object per
line: {"tok": name, "text": text, "ids": [...], "pieces": [...]}.

    python3 tests/tok/hf_crosscheck.py --testdata DIR --out FILE [--trained tokenizer.json] [--n N]

Tokenizers:
  gpt2     GPT-2's encoder.json + vocab.bpe as a ByteLevel BPE;
  cl100k   cl100k_base.tiktoken converted the way transformers' TikTokenConverter
           does (merges from the ranks; ignore_merges like tiktoken), pre-tokenized
           by Split(cl100k regex) then ByteLevel without its regex;
  trained  a tokenizer.json written by lockstep (if --trained is given).
  llama3   LLaMA-3's tokenizer.json as shipped (if --llama3 is given).
"pieces" is the pre-tokenization alone (HF's Split on the same regex).

--regex-sets FILE: a JSON object {name: [regex, ...]}; for each, the pieces of
HF's Sequence of Split(regex, "isolated") (records {"tok": "regex:NAME"}).
--tiktoken-holed FILE: a rank file with holes, encoded by OpenAI's `tiktoken`
(records "tiktoken-holed": ordinary ids, and "ids_special" with <|endoftext|>
at its id 50256); and cl100k_base's ranks under o200k_base's regex, as
tiktoken's own o200k_base declares it ("tiktoken-o200k").
Exit status 3 when `tokenizers` cannot be imported (the C++ test then skips),
4 when `tiktoken` cannot (only with --tiktoken-holed).
"""
import argparse
import base64
import json
import os
import random
import sys

try:
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
except ImportError:
    sys.exit(3)

GPT2_PAT = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
CL100K_PAT = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


def cl100k(path):
    enc = bytes_to_unicode()
    ranks = {}
    for line in open(path, "rb").read().splitlines():
        if line:
            tok, rank = line.split()
            ranks[base64.b64decode(tok)] = int(rank)
    text = lambda b: "".join(enc[x] for x in b)
    vocab = {text(t): r for t, r in ranks.items()}
    merges = []
    for t, r in ranks.items():
        local = [(t[:i], t[i:], r) for i in range(1, len(t)) if t[:i] in ranks and t[i:] in ranks]
        local.sort(key=lambda x: (ranks[x[0]], ranks[x[1]]))
        merges.extend(local)
    merges.sort(key=lambda x: x[2])
    tk = Tokenizer(models.BPE(vocab, [(text(a), text(b)) for a, b, _ in merges], ignore_merges=True))
    tk.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(CL100K_PAT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tk.decoder = decoders.ByteLevel()
    return tk


def gpt2(d):
    tk = Tokenizer(models.BPE.from_file(os.path.join(d, "encoder.json"), os.path.join(d, "vocab.bpe")))
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    return tk


# Pieces of random text: scripts, whitespace runs, digits, emoji, contractions.
UNITS = ["the", "and", "of", "Hello", "WORLD", "x", "é", "ß", "Ä", "ſ", "ǅ", "ﬁ", "Привет", "мир", "Ελλάδα", "こんにちは",
         "世界", "한국어", "안녕하세요", "مرحبا", "١٢٣", "٣", "שלום", "हिन्दी", "ไทย", "Ⅻ", "½", "²", "০১২", "𝟘𝟙",
         "😀", "🌍", "👍🏽", "👨‍👩‍👧", "🇪🇸", "🇰🇷", "❤️", "\u0301", "\u200d", "\u200b", "\ufeff", "\u00ad",
         "'s", "'S", "'t", "'re", "'VE", "'m", "'ll", "'LL", "'d", "'ſ", "'x", "''", "'",
         " ", " ", " ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", "\r", " \n", "\u00a0", "\u3000", "\u2009", "\u000b",
         "\u000c", "\u0085", "\u2028", "\u1680", "\u202f", "\u205f", "\u001c", "\u001f",
         "0", "1", "12", "123", "1234", "12345678", "3.14", "1,000", "-", "_", "!", "?", "...", ",", ".", ";", ":",
         "(", ")", "[", "]", "{", "}", "<", ">", "/", "\\", "\"", "#", "$", "%", "&", "*", "+", "=", "@", "^", "`",
         "|", "~", "€", "£", "©", "®", "™", "→", "•", "«", "»", "„", "“", "”", "’", "<|endoftext|>", "http://a.b/c?d=1"]


def random_codepoint(rng):
    while True:
        cp = rng.randrange(0, 0x110000) if rng.random() < 0.5 else rng.randrange(0, 0x3000)
        if not (0xD800 <= cp <= 0xDFFF):
            return chr(cp)


def random_text(rng):
    parts = []
    for _ in range(rng.randrange(0, 40)):
        r = rng.random()
        if r < 0.75:
            parts.append(rng.choice(UNITS))
        elif r < 0.9:
            parts.append(random_codepoint(rng))
        else:
            parts.append(" " * rng.randrange(1, 6))
    return "".join(parts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--testdata", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--trained")
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=20261130)
    ap.add_argument("--llama3")
    ap.add_argument("--regex-sets")
    ap.add_argument("--tiktoken-holed")
    a = ap.parse_args()
    toks = {
        "gpt2": (gpt2(os.path.join(a.testdata, "tokenizers", "gpt2")), GPT2_PAT),
        "cl100k": (cl100k(os.path.join(a.testdata, "tokenizers", "cl100k_base.tiktoken")), CL100K_PAT),
    }
    if a.trained:
        t = Tokenizer.from_file(a.trained)
        toks["trained"] = (t, None)
    if a.llama3:
        toks["llama3"] = (Tokenizer.from_file(a.llama3), None)
    rng = random.Random(a.seed)
    texts = [random_text(rng) for _ in range(a.n)]
    with open(a.out, "w", encoding="utf-8") as f:
        for name, (tk, pat) in toks.items():
            splitter = pre_tokenizers.Split(Regex(pat), behavior="isolated") if pat else None
            for text in texts:
                rec = {"tok": name, "text": text, "ids": tk.encode(text, add_special_tokens=False).ids}
                if splitter:
                    rec["pieces"] = [p for p, _ in splitter.pre_tokenize_str(text)]
                f.write(json.dumps(rec, ensure_ascii=False) + "\n")
        if a.regex_sets:
            for name, regexes in json.load(open(a.regex_sets, encoding="utf-8")).items():
                seq = pre_tokenizers.Sequence(
                    [pre_tokenizers.Split(Regex(r), behavior="isolated", invert=False) for r in regexes])
                for text in texts:
                    rec = {"tok": "regex:" + name, "text": text, "pieces": [p for p, _ in seq.pre_tokenize_str(text)]}
                    f.write(json.dumps(rec, ensure_ascii=False) + "\n")
        if a.tiktoken_holed:
            try:
                import tiktoken
                from tiktoken.load import load_tiktoken_bpe
                from tiktoken_ext import openai_public
            except ImportError:
                sys.exit(4)
            # tiktoken's own regexes: its encoding constructors, with the rank
            # download replaced (no network here; the ranks come from files).
            openai_public.load_tiktoken_bpe = lambda *args, **kw: {}
            openai_public.data_gym_to_mergeable_bpe_ranks = lambda *args, **kw: {}
            r50k_pat = openai_public.r50k_base()["pat_str"]
            o200k_pat = openai_public.o200k_base()["pat_str"]
            holed = tiktoken.Encoding("holed", pat_str=r50k_pat, mergeable_ranks=load_tiktoken_bpe(a.tiktoken_holed),
                                      special_tokens={"<|endoftext|>": 50256})
            cl = os.path.join(a.testdata, "tokenizers", "cl100k_base.tiktoken")
            o200k = tiktoken.Encoding("o200k-on-cl100k", pat_str=o200k_pat, mergeable_ranks=load_tiktoken_bpe(cl),
                                      special_tokens={})
            for text in texts:
                f.write(json.dumps({"tok": "tiktoken-holed", "text": text, "ids": holed.encode_ordinary(text),
                                    "ids_special": holed.encode(text, allowed_special="all")}, ensure_ascii=False) + "\n")
                f.write(json.dumps({"tok": "tiktoken-o200k", "text": text, "ids": o200k.encode_ordinary(text)},
                                   ensure_ascii=False) + "\n")
            f.write(json.dumps({"tok": "o200k-regex", "text": o200k_pat}, ensure_ascii=False) + "\n")
            print(f"hf_crosscheck: tiktoken {tiktoken.__version__}")
    import tokenizers
    print(f"hf_crosscheck: tokenizers {tokenizers.__version__}, {len(toks)} tokenizers x {a.n} texts -> {a.out}")


if __name__ == "__main__":
    main()
