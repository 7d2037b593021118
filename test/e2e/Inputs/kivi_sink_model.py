#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""An independent model of cross-arch.mlir's graph, to check its values.

Reads the test's K/V/Q constants and cache type from the .mlir file, models
KIVI-Sink the way docs/RUNTIME.md describes it (fp16 rows; keys quantized
per channel in groups of G tokens leaving a sliding window of R, values per
token in groups of G channels; the top-k key-norm tokens kept fp16 as sinks,
decided when they leave the window, and left out of their group's min/max;
codes rint((x - z) / s) with z = fp16(min), s = fp16((max - min) / (2^b - 1)),
dequantized as code * s + z in float32), attends in float64 and computes the
effective bits from the storage layout. Then compares with the printed
output (C99 hex floats): attention within 1e-4, effective bits exactly.

  kivi_sink_model.py TEST.mlir OUTPUT
"""
import math
import re
import struct
import sys


def f16(x):
    return struct.unpack("<e", struct.pack("<e", x))[0]


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def constant(text, name):
    m = re.search(r"%" + name + r" = arith.constant dense<(.*?)> : tensor<([0-9x]+)xf32>",
                  text, re.S)
    values = [float(v) for v in re.findall(r"-?[0-9]+\.[0-9]+", m.group(1))]
    shape = [int(d) for d in m.group(2).split("x")]
    return values, shape


def param(text, key):
    return int(re.search(key + r" = ([0-9]+)", text).group(1))


def quantize(xs, exclude, bits):
    """Codes and dequantized values of one group (excluded entries: None)."""
    kept = [x for x, e in zip(xs, exclude) if not e]
    lo, hi = min(kept), max(kept)
    z = f16(lo)
    s = f16(f32(f32(hi - lo) / ((1 << bits) - 1)))
    out = []
    for x, e in zip(xs, exclude):
        if e:
            out.append(None)
            continue
        if s == 0.0:
            code = 0
        else:
            q = round(f32(f32(x - z) / s))  # Python rounds half to even
            code = max(0, min((1 << bits) - 1, q))
        out.append(f32(f32(code * s) + z))
    return out


def main(mlir, output):
    text = open(mlir).read()
    k, (T, H, D) = constant(text, "k")
    v, _ = constant(text, "v")
    q, (_, QH, _) = constant(text, "q")
    G, R, S = (param(text, n) for n in ("group_size", "residual_length",
                                        "n_sink_tokens"))
    kb, vb = param(text, "key_bits"), param(text, "value_bits")
    C = H * D
    prefill = int(re.search(r"%kp = .*\[(\d+), 2, 8\]", text).group(1))
    K = [[f16(k[t * C + c]) for c in range(C)] for t in range(T)]
    V = [[f16(v[t * C + c]) for c in range(C)] for t in range(T)]

    def norm(t):
        return f32(sum(math.sqrt(sum(K[t][h * D + d] ** 2 for d in range(D)))
                       for h in range(H)) / H)

    # Updates as in the test: a prefill, then one decode token.
    top, sink = [], set()  # top: (norm, position), ties to the earlier
    key_done = value_done = decided = 0
    for L0, L1 in ((0, prefill), (prefill, T)):
        for p in range(L0, L1):
            n = norm(p)
            if len(top) < S:
                top.append((n, p))
                continue
            weakest = min(range(len(top)), key=lambda i: (top[i][0], -top[i][1]))
            if n > top[weakest][0]:
                top[weakest] = (n, p)
        kT = max(key_done, G * ((L1 - R) // G) if L1 > R else 0)
        vT = max(value_done, L1 - R if L1 > R else 0)
        leave = max(kT, vT, decided)
        for p in range(decided, leave):
            if len(sink) < S and any(e[1] == p for e in top):
                sink.add(p)
        key_done, value_done, decided = kT, vT, leave

    # Dequantized K/V as the cache holds them.
    Kq = [row[:] for row in K]
    Vq = [row[:] for row in V]
    code_bytes = sz_bytes = 0
    for g0 in range(0, key_done, G):
        rows = range(g0, g0 + G)
        coded = [t for t in rows if t not in sink]
        if coded:
            sz_bytes += 4 * C
            code_bytes += (len(coded) * C * kb + 7) // 8
        for c in range(C):
            col = quantize([K[t][c] for t in rows], [t in sink for t in rows], kb)
            for t, x in zip(rows, col):
                if x is not None:
                    Kq[t][c] = x
    for t in range(value_done):
        if t in sink:
            continue
        sz_bytes += 4 * (C // G)
        code_bytes += (C * vb + 7) // 8
        for g0 in range(0, C, G):
            Vq[t][g0:g0 + G] = quantize(V[t][g0:g0 + G], [False] * G, vb)
    fp16_rows = sum(1 for t in range(T) if t in sink or t >= key_done) + \
        sum(1 for t in range(T) if t in sink or t >= value_done)
    total = code_bytes + sz_bytes + fp16_rows * C * 2
    bits = f32(8.0 * total / (T * C * 2))

    # One query step over all T positions, q head h on KV head h // (QH / H).
    expect = []
    for h in range(QH):
        kv = h // (QH // H)
        qv = q[h * D:(h + 1) * D]
        scores = [sum(qv[d] * Kq[t][kv * D + d] for d in range(D)) / math.sqrt(D)
                  for t in range(T)]
        m = max(scores)
        w = [math.exp(s - m) for s in scores]
        expect += [sum(w[t] * Vq[t][kv * D + d] for t in range(T)) / sum(w)
                   for d in range(D)]
    expect.append(bits)

    lines = open(output).read().split("\n")
    got = [float.fromhex(l) for l in lines[1:1 + len(expect)]]
    bad = [(i, g, e) for i, (g, e) in enumerate(zip(got, expect))
           if (abs(g - e) > 1e-4 if i < len(expect) - 1 else g != e)]
    for i, g, e in bad:
        print("element %d: got %.9g, model %.9g" % (i, g, e))
    print("sinks %s; %d attention values and effective bits %.6g: %s" %
          (sorted(sink), len(expect) - 1, bits, "MISMATCH" if bad else "match"))
    return 1 if bad or len(got) != len(expect) else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
