#!/usr/bin/python3
"""Independent reference for zshard's gradient reduction (math/bsum.h).

Evaluates the reduction from its definition, with numpy for the fp32 values
and Python integers for the exact sum:

  the fp32 bit positions 2^-149 .. 2^127 are cut into fixed bins of W = 30
  bits; t is the bin of the highest set bit over all the terms; every term
  is truncated toward zero to the grid g = 2^((t-1)W - 149); the exact sum
  of those is rounded once to the nearest fp32, ties to even; NaN if a term
  is NaN or both infinities occur, else the infinity that occurs; +0 for 0.

  bsum_ref.py R N IN OUT
      IN: R x N float32 (term r of element i at r * N + i)
      OUT: N float32 sums (bsum, element by element, in integers; checked
      against bsum_rows, the vectorized form the training references use)
"""
import sys
import numpy as np

W = 30


def top_bin(x):
    """Bin of the highest set bit of float32 x (nonzero, finite)."""
    m, e = np.frexp(np.float64(abs(x)))  # x = m * 2^e, 0.5 <= m < 1
    return (int(e) - 1 + 149) // W


def trunc_units(x, g):
    """trunc(x / 2^g) as an exact integer."""
    num, den = float(x).as_integer_ratio()  # exact: den is a power of two
    if g >= 0:
        den <<= g
    else:
        num <<= -g
    q = abs(num) // den
    return -q if num < 0 else q


def round_f32(T, g):
    """T * 2^g rounded to nearest-even float32 bits (T != 0)."""
    neg = T < 0
    mag = -T if neg else T
    n = mag.bit_length()
    # the last kept bit: 24 significant bits, never below 2^-149
    low = max(g + n - 24, -149)
    sh = low - g
    if sh > 0:
        q, rem = divmod(mag, 1 << sh)
        half = 1 << (sh - 1)
        if rem > half or (rem == half and q & 1):
            q += 1
    else:
        q = mag << -sh
    if q == 1 << 24:
        q >>= 1
        low += 1
    if q < 1 << 23:
        bits = q  # subnormal
    elif low + 150 >= 255:
        bits = 0x7F800000
    else:
        bits = ((low + 150) << 23) | (q & 0x7FFFFF)
    return bits | (0x80000000 if neg else 0)


def bsum(terms):
    """The reduction of a list of float32 values, as float32 bits."""
    if any(np.isnan(x) for x in terms):
        return 0x7FC00000
    pinf = any(np.isinf(x) and x > 0 for x in terms)
    ninf = any(np.isinf(x) and x < 0 for x in terms)
    if pinf and ninf:
        return 0x7FC00000
    if pinf or ninf:
        return 0x7F800000 if pinf else 0xFF800000
    nz = [x for x in terms if x != 0]
    if not nz:
        return 0
    t = max(top_bin(x) for x in nz)
    g = (t - 1) * W - 149
    T = sum(trunc_units(x, g) for x in nz)
    return 0 if T == 0 else round_f32(T, g)


def bsum_rows(x):
    """The reduction over axis 0 of a float32 array (R, ...), vectorized:
    the same definition, the exact sum kept as two int64 halves, rounded
    to odd at 53 bits in float64 (TwoSum gives the error), then to float32
    (round to odd, then to nearest at 24 bits or fewer, is correct)."""
    x = np.asarray(x, dtype=np.float32)
    shape = x.shape[1:]
    x = x.reshape(x.shape[0], -1).astype(np.float64)
    fin = np.isfinite(x)
    nan = np.isnan(x).any(axis=0)
    pinf = (np.isposinf(x)).any(axis=0)
    ninf = (np.isneginf(x)).any(axis=0)
    xf = np.where(fin, x, 0.0)
    _, e = np.frexp(np.abs(xf))
    tb = np.where(xf != 0, (e - 1 + 149) // W, -1)
    t = tb.max(axis=0)
    g = (t - 1) * W - 149
    q = np.trunc(np.ldexp(xf, -g[None, :]))  # exact integers below 2^60
    mag = np.abs(q).astype(np.int64)
    sign = np.where(q < 0, -1, 1)
    hi = (sign * (mag >> W)).sum(axis=0)  # each below R * 2^30: no overflow
    lo = (sign * (mag & ((1 << W) - 1))).sum(axis=0)
    a = np.ldexp(hi.astype(np.float64), W)  # exact
    b = lo.astype(np.float64)  # exact
    s = a + b
    bb = s - a
    err = (a - (s - bb)) + (b - bb)  # TwoSum: s + err == a + b exactly
    odd = (s.view(np.int64) & 1) == 1
    s = np.where((err != 0) & ~odd, np.nextafter(s, np.where(err > 0, np.inf, -np.inf)), s)
    with np.errstate(over="ignore"):
        out = np.ldexp(s, g).astype(np.float32)
    out = np.where(t < 0, np.float32(0), out)
    out = np.where(out == 0, np.float32(0), out)  # +0 for a zero sum
    out = np.where(pinf, np.float32(np.inf), out)
    out = np.where(ninf, np.float32(-np.inf), out)
    out = np.where(nan | (pinf & ninf), np.float32(np.nan), out)
    return out.astype(np.float32).reshape(shape)


def main():
    R, N = int(sys.argv[1]), int(sys.argv[2])
    x = np.fromfile(sys.argv[3], dtype=np.float32).reshape(R, N)
    out = np.array([bsum(list(x[:, i])) for i in range(N)], dtype=np.uint32)
    rows = bsum_rows(x).view(np.uint32)
    rows = np.where(np.isnan(bsum_rows(x)), np.uint32(0x7FC00000), rows)
    bad = np.nonzero(rows != out)[0]
    if bad.size:
        i = bad[0]
        sys.exit("bsum_rows differs from bsum at %d of %d elements; first %d: 0x%08x, 0x%08x"
                 % (bad.size, N, i, rows[i], out[i]))
    out.tofile(sys.argv[4])


if __name__ == "__main__":
    main()
