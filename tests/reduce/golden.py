#!/usr/bin/env python3
"""Independent known answers for tests/reduce: the canonical reduction order
and the Philox-derived samplers, recomputed in pure Python (no lockstep code,
no numpy) straight from docs/NUMERICS.md.

    python3 tests/reduce/golden.py            # prints the C++ tables
    python3 tests/reduce/golden.py --big      # also the 3-level sum (slow, ~1 min)
    python3 tests/reduce/golden.py --hash     # the XXH3-64 known answers (pip install xxhash)

The printed tables are pasted into golden_test.cpp. float32 arithmetic:
  * add: the float64 sum of two float32 values rounded to float32 is the
    correctly rounded float32 sum (double rounding is innocuous for +,-,*,/
    when 53 >= 2*24 + 2; Figueroa 1995);
  * fma(a, b, c): a*b + c exactly as a Fraction, rounded to float32 by hand.
"""
import math
from fractions import Fraction
import struct
import sys

M64 = (1 << 64) - 1
CHUNK = 4096
LANES = 32


def f32(x):
    """Round a float64 to the nearest float32 (ties to even), as a float64."""
    if math.isnan(x) or math.isinf(x):
        return x
    try:
        return struct.unpack('<f', struct.pack('<f', x))[0]
    except OverflowError:
        return math.copysign(math.inf, x)


def f32_bits(x):
    return struct.unpack('<I', struct.pack('<f', x))[0]


def f32_from_bits(u):
    return struct.unpack('<f', struct.pack('<I', u))[0]


def add(a, b):
    return f32(a + b)


def round_f32_exact(q):
    """Round an exact rational (Fraction, nonzero) to float32, ties to even."""
    sign = -1.0 if q < 0 else 1.0
    q = abs(q)
    e = q.numerator.bit_length() - q.denominator.bit_length()  # 2^e <= q < 2^(e+2)
    if Fraction(2) ** e > q:
        e -= 1
    elif Fraction(2) ** (e + 1) <= q:
        e += 1
    quantum = Fraction(2) ** max(e - 23, -149)  # subnormals: fixed quantum 2^-149
    m = q / quantum
    n = m.numerator // m.denominator
    rem = m - n
    if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and n % 2 == 1):
        n += 1
    value = n * quantum
    if value >= Fraction(2) ** 128:
        return sign * math.inf
    return sign * float(value)  # exact: n <= 2^24


def fma(a, b, c):
    """float32 fma(a, b, c) = round(a*b + c), one rounding, exactly."""
    if not (math.isfinite(a) and math.isfinite(b) and math.isfinite(c)):
        return f32(a * b + c)  # inf/nan propagate as in IEEE (a*b exact here)
    q = Fraction(a) * Fraction(b) + Fraction(c)
    if q == 0:  # exact zero: -0 only when a*b and c are both -0
        p_neg = math.copysign(1.0, a) * math.copysign(1.0, b) < 0
        return -0.0 if (p_neg and math.copysign(1.0, c) < 0) else 0.0
    return round_f32_exact(q)


def fmax(a, b):
    if math.isnan(a) or math.isnan(b):
        return math.nan
    if a == b:
        return b if math.copysign(1.0, a) < 0 else a
    return a if a > b else b


def fmin(a, b):
    if math.isnan(a) or math.isnan(b):
        return math.nan
    if a == b:
        return a if math.copysign(1.0, a) < 0 else b
    return a if a < b else b


def level(v, w, identity, fold, combine):
    """One level of the canonical order: a partial per chunk of 4096."""
    out = []
    n = len(v)
    starts = range(0, n, CHUNK) if n else [0]
    for c in starts:
        lane = [identity] * LANES
        for i in range(c, min(n, c + CHUNK)):
            j = (i - c) % LANES
            lane[j] = fold(lane[j], v[i], w[i] if w else None)
        off = LANES // 2
        while off >= 1:
            for j in range(off):
                lane[j] = combine(lane[j], lane[j + off])
            off //= 2
        out.append(lane[0])
    return out


def canonical(kind, x, y=None):
    if kind == 'sum':
        first, later, comb, ident = (lambda a, v, _: add(a, v)), (lambda a, v, _: add(a, v)), add, 0.0
    elif kind == 'sumsq':
        first, later, comb, ident = (lambda a, v, _: fma(v, v, a)), (lambda a, v, _: add(a, v)), add, 0.0
    elif kind == 'dot':
        first, later, comb, ident = (lambda a, v, u: fma(v, u, a)), (lambda a, v, _: add(a, v)), add, 0.0
    elif kind == 'max':
        first = later = (lambda a, v, _: fmax(a, v))
        comb, ident = fmax, -math.inf
    elif kind == 'min':
        first = later = (lambda a, v, _: fmin(a, v))
        comb, ident = fmin, math.inf
    v = level(x, y, ident, first, comb)
    while len(v) > 1:
        v = level(v, None, ident, later, comb)
    r = v[0]
    return 0x7FC00000 if math.isnan(r) else f32_bits(r)


def mix64(z):
    """splitmix64's output function (the test's data generator)."""
    z = (z + 0x9E3779B97F4A7C15) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def data(seed, n):
    """x[i]: sign, 16 binades [2^-8, 2^8), 23 mantissa bits from mix64(seed<<32 | i)."""
    out = []
    for i in range(n):
        h = mix64(((seed << 32) | i) & M64)
        sign = h & 1
        exp = 127 - 8 + ((h >> 1) & 15)
        mant = (h >> 8) & 0x7FFFFF
        out.append(f32_from_bits((sign << 31) | (exp << 23) | mant))
    return out


def naive(x):
    acc = 0.0
    for v in x:
        acc = add(acc, v)
    return f32_bits(acc)


# ---- Philox4x32-10, written from Salmon et al. (SC'11) / Random123 -----------
def philox(ctr, key):
    c0, c1, c2, c3 = ctr
    k0, k1 = key
    for r in range(10):
        if r:
            k0 = (k0 + 0x9E3779B9) & 0xFFFFFFFF
            k1 = (k1 + 0xBB67AE85) & 0xFFFFFFFF
        p0 = 0xD2511F53 * c0
        p1 = 0xCD9E8D57 * c2
        c0, c1, c2, c3 = ((p1 >> 32) ^ c1 ^ k0, p1 & 0xFFFFFFFF, (p0 >> 32) ^ c3 ^ k1,
                          p0 & 0xFFFFFFFF)
    return [c0, c1, c2, c3]


def bits32(seed, stream, i):
    L = lambda v: v & 0xFFFFFFFF
    H = lambda v: (v >> 32) & 0xFFFFFFFF
    b = i // 4
    return philox([L(b), H(b), L(stream), H(stream)], [L(seed), H(seed)])[i % 4]


def uniform01(seed, stream, i):
    return (bits32(seed, stream, i) >> 8) * 2.0 ** -24


def uniform_ab(seed, stream, i, a, b):
    r = fma(f32(b - a), uniform01(seed, stream, i), a)
    if r < b:
        return f32_bits(r)
    u = f32_bits(b)
    if u & 0x7FFFFFFF == 0:
        return 0x80000001
    return u - 1 if u < 0x80000000 else u + 1


def f32_bytes(values):
    return b''.join(struct.pack('<f', v) for v in values)


def record(dtype_code, shape, raw):
    """hash_tensor's record: u32 dtype | u32 rank | u64 dims | raw bytes (little-endian)."""
    return struct.pack('<II', dtype_code, len(shape)) + b''.join(struct.pack('<Q', d) for d in shape) + raw


def hash_answers():
    import xxhash  # Python binding of the reference xxHash C library
    h = lambda b, seed=0: '0x%016xull' % xxhash.xxh3_64_intdigest(b, seed=seed)
    small = f32_bytes([1.0, -0.0, 0.0, f32_from_bits(0x7FC00000), -math.inf, f32(3.14159)])
    thousand = f32_bytes(data(5, 1000))
    big = f32_bytes(data(6, 100000))
    f32c, i32c = 1, 9
    print('// XXH3-64 known answers from Python xxhash %s (tests/reduce/golden.py --hash)' %
          xxhash.VERSION)
    print('empty           ', h(b''))
    print('"lockstep"      ', h(b'lockstep'))
    print('small floats    ', h(small))
    print('small, seed 12345', h(small, 12345))
    print('1000 floats     ', h(thousand))
    print('100000 floats   ', h(big))
    print('tensor f32 [2,3]', h(record(f32c, [2, 3], small)))
    print('tensor f32 [3,2]', h(record(f32c, [3, 2], small)))
    print('tensor f32 [6]  ', h(record(f32c, [6], small)))
    print('tensor i32 [2,3]', h(record(i32c, [2, 3], small)))
    print('tensor f32 []   ', h(record(f32c, [], struct.pack('<f', 2.5))))
    print('two records     ', h(record(f32c, [2, 3], small) + record(f32c, [100000], big)))


def main():
    big = '--big' in sys.argv
    if '--hash' in sys.argv:
        hash_answers()
        return
    # Self-checks of the helpers against the Random123 known answers.
    assert philox([0, 0, 0, 0], [0, 0]) == [0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8]
    assert philox([0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344], [0xa4093822, 0x299f31d0]) == \
        [0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1]
    assert fma(1.0 + 2.0 ** -23, 1.0 - 2.0 ** -23, -1.0) == -(2.0 ** -46)
    assert add(1.0, 2.0 ** -24) == 1.0 and add(1.0, 2.0 ** -24 + 2.0 ** -40) == 1.0 + 2.0 ** -23
    assert fma(2.0 ** -75, 2.0 ** -74, 0.0) == 2.0 ** -149  # subnormal, exact
    assert fma(2.0 ** -75, 2.0 ** -75, 0.0) == 0.0  # half the smallest subnormal: tie to even 0
    assert fma(3 * 2.0 ** -76, 2.0 ** -74, 0.0) == 2.0 ** -148  # 1.5 quanta: tie to even 2
    assert fma(2.0 ** 64, 2.0 ** 64, 0.0) == math.inf  # overflow

    lengths = [0, 1, 31, 32, 33, 4095, 4096, 4097, 65537, 1000003]
    if big:
        lengths.append(CHUNK * CHUNK + 4097)
    print('// Generated by tests/reduce/golden.py: {n, sum, sumsq, dot, max, min, naive sum}')
    print('// (float bits) for x = data(1, n), y = data(2, n).')
    for n in lengths:
        x = data(1, n)
        kinds = ['sum', 'sumsq', 'dot', 'max', 'min'] if n < 10**7 else ['sum']
        y = data(2, n) if 'dot' in kinds else None
        vals = [canonical(k, x, y if k == 'dot' else None) for k in kinds]
        while len(vals) < 5:
            vals.append(0)
        print('    {%du, 0x%08xu, 0x%08xu, 0x%08xu, 0x%08xu, 0x%08xu, 0x%08xu},' %
              (n, *vals, naive(x)), flush=True)
    print('// Philox samplers: {seed, stream, index, bits32, uniform01 bits, uniform(-3, 0.5) bits}')
    for seed, stream, i in [(0, 0, 0), (1, 0, 5), (0x0123456789ABCDEF, 7, 1000003),
                            (42, 0xFFFFFFFFFFFFFFFF, 0xFFFFFFFFFFFFFFFF), (2024, 3, 123456789)]:
        print('    {0x%xull, 0x%xull, 0x%xull, 0x%08xu, 0x%08xu, 0x%08xu},' %
              (seed, stream, i, bits32(seed, stream, i), f32_bits(uniform01(seed, stream, i)),
               uniform_ab(seed, stream, i, -3.0, 0.5)))


if __name__ == '__main__':
    main()
