#!/usr/bin/env python3
"""Rebuilds llama.cpp's vocab-only GGUF files from copies that were damaged by
a UTF-8 round trip (bytes.decode("utf-8", "replace").encode()), and proves the
result: the same round trip applied to the rebuilt file gives back the damaged
copy byte for byte.

    python3 tests/tok/repair_vocab_gguf.py DAMAGED.gguf OUT.gguf

Why: ../shared/testdata/gguf-vocab/ggml-vocab-{gpt-2,llama-spm}.gguf are such
copies (every byte >= 0x80 that was not part of valid UTF-8 became U+FFFD
"\\xef\\xbf\\xbd"); lockstep's GGUF reader rightly rejects them. Strings (token
texts, merges) survive intact; binary numbers do not. The damaged numbers are
recovered as follows:
  - string lengths and array counts: the one value that lets the file parse
    (each damaged byte was >= 0x80; the candidates are tried in order);
  - other values: from what the vocabulary is known to hold, checked against
    the bytes that survived: layer-norm epsilon 1e-5; GPT-2's BOS/EOS id 50256
    (<|endoftext|>); LLaMA's rope dimension 128 (head size 4096/32); LLaMA's
    SentencePiece scores, which are 0 for the 259 control/byte pieces, then
    -(id - 259) for piece id, except -1e9 for some pieces (runs of "▁"):
    each score is the first of [-(id - 259), -1e9, 0] whose bytes agree with
    every byte that survived in the damaged copy.
The final byte-for-byte check is what makes the result trustworthy: every
byte that survived in the damaged copy is reproduced.
"""
import struct
import sys

FFFD = b"\xef\xbf\xbd"


def roundtrip(b):
    return b.decode("utf-8", "replace").encode("utf-8")


class Units:
    """The damaged file as units: an int byte, or None for a U+FFFD that
    replaced one original byte (>= 0x80). off[k] is unit k's offset in the
    damaged bytes (a U+FFFD can also stand for a 2- or 3-byte truncated
    sequence: the score reader below handles that case exactly)."""

    def __init__(self, data):
        self.u, self.off = [], []
        i = 0
        while i < len(data):
            self.off.append(i)
            if data[i:i + 3] == FFFD:
                self.u.append(None)
                i += 3
            else:
                self.u.append(data[i])
                i += 1
        self.off.append(i)


class Fail(Exception):
    pass


class Parser:
    def __init__(self, raw, hints):
        self.raw = raw
        self.units = Units(raw)
        self.u = self.units.u
        self.p = 0
        self.hints = hints
        self.out = []  # (key, type, value) in order

    def take(self, n):
        if self.p + n > len(self.u):
            raise Fail("eof")
        r = self.u[self.p:self.p + n]
        self.p += n
        return r

    def num(self, w, fmt, candidates=None):
        raw = self.take(w)
        if None not in raw:
            return struct.unpack(fmt, bytes(raw))[0], raw
        if candidates is None:
            raise Fail("damaged value without a hint")
        for c in candidates:
            b = struct.pack(fmt, c)
            if all(r is None and x >= 0x80 or r == x for r, x in zip(raw, b)):
                return c, raw
        raise Fail("no hint fits the surviving bytes")

    def string(self):
        at = self.p
        raw = self.take(8)
        unknown = [i for i, r in enumerate(raw) if r is None]
        if len(unknown) > 1:
            raise Fail(f"string length at unit {at}")
        if not unknown:
            return self.string_body(struct.unpack("<Q", bytes(raw))[0])
        # Try each value of the damaged byte; keep the first whose string is
        # followed by a plausible length (a small count) or a type tag.
        for v in range(0x80, 0x100):
            b = bytes(v if r is None else r for r in raw)
            n = struct.unpack("<Q", b)[0]
            save = self.p
            try:
                s = self.string_body(n)
                nxt = self.u[self.p:self.p + 8]
                if len(nxt) == 0 or (None not in nxt[4:8] and all(x == 0 for x in nxt[4:8])):
                    return s
            except (Fail, UnicodeDecodeError):
                pass
            self.p = save
        raise Fail(f"string length at unit {at}")

    def string_body(self, n):
        # n original bytes; a U+FFFD inside a string is a genuine character
        # (3 bytes): token texts are valid UTF-8.
        got = bytearray()
        while len(got) < n:
            if self.p >= len(self.u):
                raise Fail("eof in string")
            x = self.u[self.p]
            self.p += 1
            got += FFFD if x is None else bytes([x])
        if len(got) != n:
            raise Fail("string overran")
        return bytes(got).decode("utf-8")

    def array(self, key):
        et, _ = self.num(4, "<I")
        raw = self.take(8)
        if None not in raw:
            return et, self.elements(key, et, struct.unpack("<Q", bytes(raw))[0])
        start = self.p
        for v in range(0x80, 0x100):
            n = struct.unpack("<Q", bytes(v if r is None else r for r in raw))[0]
            self.p = start
            try:
                vals = self.elements(key, et, n)
                # The array must end at the next key (a short ASCII string) or at the end.
                if self.p == len(self.u):
                    return et, vals
                nxt = self.u[self.p:self.p + 8]
                if None not in nxt and struct.unpack("<Q", bytes(nxt))[0] < 128:
                    klen = struct.unpack("<Q", bytes(nxt))[0]
                    k = self.u[self.p + 8:self.p + 8 + klen]
                    if None not in k and bytes(k).startswith((b"tokenizer.", b"general.")):
                        return et, vals
            except Fail:
                pass
        raise Fail(f"array count of {key}")

    def elements(self, key, et, n):
        if et == 8:
            return [self.string() for _ in range(n)]
        fmt = {5: "<i", 6: "<f", 4: "<I"}[et]
        if et == 6 and key in self.hints:
            return self.hints[key](self, n)
        vals = []
        for _ in range(n):
            v, _ = self.num(4, fmt)
            vals.append(v)
        return vals

    def parse(self):
        magic = bytes(self.take(4))
        if magic != b"GGUF":
            raise Fail("magic")
        version, _ = self.num(4, "<I")
        nt, _ = self.num(8, "<Q")
        nkv, _ = self.num(8, "<Q")
        if nt != 0:
            raise Fail("vocab files hold no tensors")
        for _ in range(nkv):
            key = self.string()
            t, _ = self.num(4, "<I")
            if t == 9:
                et, vals = self.array(key)
                self.out.append((key, t, (et, vals)))
            elif t == 8:
                self.out.append((key, t, self.string()))
            else:
                fmt, w = {4: ("<I", 4), 5: ("<i", 4), 6: ("<f", 4), 7: ("<?", 1), 10: ("<Q", 8)}[t]
                v, _ = self.num(w, fmt, self.hints.get(key))
                self.out.append((key, t, v))
        if self.p != len(self.u):
            raise Fail("trailing data")
        return version


def spm_scores(parser, n):
    # Exact: run Python's incremental UTF-8 decoder (errors="replace") over
    # the candidate bytes and require its output to be the damaged bytes,
    # backtracking when a choice only fails later.
    import codecs
    damaged, q0 = parser.raw, parser.units.off[parser.p]
    dec = codecs.getincrementaldecoder("utf-8")("replace")
    stack = []  # (i, candidate index, decoder state, q, candidates)
    scores, i, q, k = [], 0, q0, 0
    while i < n:
        cands = [-float(i - 259), -1e9, 0.0] if i >= 259 else [0.0]
        state = dec.getstate()
        while k < len(cands):
            dec.setstate(state)
            out = dec.decode(struct.pack("<f", cands[k])).encode("utf-8")
            if damaged.startswith(out, q):
                break
            k += 1
        if k == len(cands):
            if not stack:
                raise Fail(f"score {i}")
            i, k, st, q, _ = stack.pop()
            dec.setstate(st)
            scores.pop()
            k += 1
            continue
        stack.append((i, k, state, q, cands))
        if len(stack) > 64:
            stack.pop(0)
        scores.append(cands[k])
        q += len(out)
        i, k = i + 1, 0
    tail = dec.decode(b"", final=True).encode("utf-8")
    if not damaged.startswith(tail, q):
        raise Fail("scores tail")
    q += len(tail)
    parser.p = parser.units.off.index(q)
    return scores


HINTS = {
    "gpt2.attention.layer_norm_epsilon": [1e-5],
    "llama.attention.layer_norm_rms_epsilon": [1e-5, 1e-6],
    "tokenizer.ggml.bos_token_id": [50256, 1],
    "tokenizer.ggml.eos_token_id": [50256, 2],
    "llama.rope.dimension_count": [128],
    "tokenizer.ggml.scores": spm_scores,
}


def write(version, kvs):
    def s(x):
        b = x.encode("utf-8")
        return struct.pack("<Q", len(b)) + b
    out = bytearray(b"GGUF" + struct.pack("<IQQ", version, 0, len(kvs)))
    for key, t, v in kvs:
        out += s(key) + struct.pack("<I", t)
        if t == 9:
            et, vals = v
            out += struct.pack("<IQ", et, len(vals))
            if et == 8:
                for x in vals:
                    out += s(x)
            else:
                out += struct.pack("<%d%s" % (len(vals), {5: "i", 6: "f", 4: "I"}[et]), *vals)
        elif t == 8:
            out += s(v)
        else:
            out += struct.pack({4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q"}[t], v)
    return bytes(out)


def main():
    damaged = open(sys.argv[1], "rb").read()
    p = Parser(damaged, HINTS)
    version = p.parse()
    rebuilt = write(version, p.out)
    if roundtrip(rebuilt) != damaged:
        sys.exit("repair_vocab_gguf: the rebuilt file does not reproduce the damaged copy")
    if rebuilt == damaged:
        print("repair_vocab_gguf: the input was not damaged")
    open(sys.argv[2], "wb").write(rebuilt)
    print(f"repair_vocab_gguf: {sys.argv[2]}: {len(rebuilt)} bytes, {len(p.out)} keys; "
          f"round trip reproduces all {len(damaged)} bytes of the damaged copy")


if __name__ == "__main__":
    main()
