#!/usr/bin/env python3
"""A whole Llama decode graph in a frontend's form, quantized and run.

    whole_model.py --form torch|stablehlo --checkpoint MODEL.bin
        --text FILE --tokens N --out DIR --run "RUNNER" [--kvq-opt P]
        [--kvq-run P] [--methods LIST]

Writes the checkpoint as a Hugging Face folder (scripts/llama2c_to_hf.py)
and, from that folder's weights, one decode step of the whole model as a
frontend emits it, with the weights as constants:

  torch      torch-mlir's form of Hugging Face's LlamaForCausalLM with a
             StaticCache: caches [batch, kv_heads, capacity, head_dim] per
             layer written by insert_slice at cache_position, weights
             transposed by linalg.transpose into 2-D linalg.matmul,
             linalg.batch_matmul attention over the whole capacity with the
             additive attention_mask argument, the scale on the scores,
             repeat_kv as expand_shape + broadcast generic + collapse_shape,
             torch's max.dim/sub/exp/sum/div softmax, rotate_half as
             extract_slice + negate + tensor.concat.
  stablehlo  StableHLO's legalization of a JAX Llama: caches [batch,
             capacity, kv_heads, head_dim] written at a clamped index
             (dynamic_update_slice), dot_general as linalg.matmul with
             [in, out] kernels and as generic contractions for attention,
             the scale on the queries, K/V repeated by linalg.broadcast, the
             causal mask built in the graph (iota/compare/select with -inf),
             reduce max/sum softmax, SiLU as x * logistic(x).

The first N tokens of FILE (the ids kvq-run reads from it, taken from a
--dump-kv file's metadata) are fed one per step. The graph runs as written
(caches threaded from step to step) and rewritten by
--kvq-quantize-kv-cache=method=M for each method, and kvq-run runs the same
folder (kvq-import's model) on the same ids with --prefill 1, so both
decode one token per step. Checked, with a nonzero exit on failure:
  - the fp16 rewrite's logits equal the graph's own within fp16 rounding;
  - the graph's own perplexity equals kvq-run's method none, and each
    method's perplexity equals kvq-run's for that method (relative 1e-3).
Prints one line per method.
"""
import argparse
import json
import math
import os
import re
import shlex
import struct
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import equivalence  # noqa: E402  (its reader of printed memrefs)


def run(cmd, what, stdin=None):
    p = subprocess.run(cmd, input=stdin, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("whole_model: %s failed (%d):\n%s" % (what, p.returncode,
                                                       p.stderr[:4000]))
    return p.stdout


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack_from("<Q", data, 0)
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out, meta = {}, header.pop("__metadata__", {})
    for name, h in header.items():
        if h["dtype"] != "F32":
            continue
        a, b = h["data_offsets"]
        out[name] = (h["shape"], data[base + a:base + b])
    return out, meta


class Graph:
    """Builds MLIR text with fresh SSA names."""

    def __init__(self):
        self.lines, self.n = [], 0

    def v(self, hint="v"):
        self.n += 1
        return "%%%s%d" % (hint, self.n)

    def emit(self, line):
        self.lines.append("  " + line)

    def const(self, value, t):
        r = self.v("c")
        self.emit("%s = arith.constant %s : %s" % (r, value, t))
        return r

    def empty(self, t):
        r = self.v("e")
        self.emit("%s = tensor.empty() : %s" % (r, t))
        return r

    def fill(self, value, t):
        c = self.const(value, "f32")
        r = self.v("f")
        self.emit("%s = linalg.fill ins(%s : f32) outs(%s : %s) -> %s" % (
            r, c, self.empty(t), t, t))
        return r

    def generic(self, ins, out_t, body, rank, red=(), out_map=None,
                init=None, captures=None):
        """ins: (value, type, map); body(names) -> lines, last yields."""
        ids = ", ".join("d%d" % k for k in range(rank))
        maps = ["affine_map<(%s) -> (%s)>" % (ids, m) for _, _, m in ins]
        maps.append("affine_map<(%s) -> (%s)>" % (
            ids, out_map if out_map else ids))
        its = ", ".join('"reduction"' if k in red else '"parallel"'
                        for k in range(rank))
        dst = init if init else self.empty(out_t)
        r = self.v("g")
        ins_s = ""
        if ins:
            ins_s = " ins(%s : %s)" % (", ".join(x for x, _, _ in ins),
                                       ", ".join(t for _, t, _ in ins))
        self.emit("%s = linalg.generic {indexing_maps = [%s], iterator_types"
                  " = [%s]}%s outs(%s : %s) {" % (
                      r, ", ".join(maps), its, ins_s, dst, out_t))
        names = ["%%a%d_%d" % (self.n, k) for k in range(len(ins) + 1)]
        el = [element_type(t) for _, t, _ in ins + [(None, out_t, None)]]
        self.emit("^bb0(%s):" % ", ".join(
            "%s: %s" % (n, e) for n, e in zip(names, el)))
        for line in body(names):
            self.emit("  " + line)
        self.emit("} -> %s" % out_t)
        return r


def element_type(t):
    return t[len("tensor<"):-1].split("x")[-1]


def f32(shape):
    return "tensor<%sxf32>" % "x".join(str(s) for s in shape)


def hexdense(blob):
    return 'dense<"0x%s">' % blob.hex().upper()


class Model:
    def __init__(self, folder, capacity):
        cfg = json.load(open(os.path.join(folder, "config.json")))
        self.w, _ = read_safetensors(os.path.join(folder,
                                                  "model.safetensors"))
        self.dim = cfg["hidden_size"]
        self.hidden = cfg["intermediate_size"]
        self.layers = cfg["num_hidden_layers"]
        self.heads = cfg["num_attention_heads"]
        self.kv = cfg["num_key_value_heads"]
        self.hd = self.dim // self.heads
        self.vocab = cfg["vocab_size"]
        self.eps = cfg["rms_norm_eps"]
        self.theta = cfg["rope_theta"]
        self.tied = cfg["tie_word_embeddings"]
        self.cap = capacity

    def weight(self, g, name, transpose=False):
        shape, blob = self.w[name]
        if transpose:  # [out, in] as a JAX kernel [in, out]
            rows, cols = shape
            vals = struct.unpack("<%df" % (rows * cols), blob)
            blob = struct.pack("<%df" % (rows * cols), *(
                vals[r * cols + c] for c in range(cols) for r in range(rows)))
            shape = [cols, rows]
        return g.const(hexdense(blob), f32(shape)), shape

    def rope_tables(self, g):
        half = self.hd // 2
        cos, sin = [], []
        for p in range(self.cap):
            for c in range(self.hd):
                f = p * self.theta ** (-2.0 * (c % half) / self.hd)
                cos.append(math.cos(f))
                sin.append(math.sin(f))
        pack = lambda v: struct.pack("<%df" % len(v), *v)
        t = f32([self.cap, self.hd])
        return g.const(hexdense(pack(cos)), t), g.const(hexdense(pack(sin)), t)


def rmsnorm(g, m, x, name):
    """x: [1, 1, dim] -> x * rsqrt(mean(x^2) + eps) * w."""
    w, _ = m.weight(g, name)
    t = f32([1, 1, m.dim])
    eps = g.const("%.9e" % m.eps, "f32")
    n = g.const("%d.0" % m.dim, "f32")
    ss = g.generic([(x, t, "d0, d1, d2")], f32([1, 1]), lambda a: [
        "%s_m = arith.mulf %s, %s : f32" % (a[0], a[0], a[0]),
        "%s_s = arith.addf %s, %s_m : f32" % (a[0], a[1], a[0]),
        "linalg.yield %s_s : f32" % a[0]], 3, red=(2,), out_map="d0, d1",
        init=g.fill("0.0", f32([1, 1])))
    return g.generic([(x, t, "d0, d1, d2"), (ss, f32([1, 1]), "d0, d1"),
                      (w, f32([m.dim]), "d2")], t, lambda a: [
        "%s_d = arith.divf %s, %s : f32" % (a[0], a[1], n),
        "%s_e = arith.addf %s_d, %s : f32" % (a[0], a[0], eps),
        "%s_r = math.rsqrt %s_e : f32" % (a[0], a[0]),
        "%s_x = arith.mulf %s, %s_r : f32" % (a[0], a[0], a[0]),
        "%s_y = arith.mulf %s_x, %s : f32" % (a[0], a[0], a[2]),
        "linalg.yield %s_y : f32" % a[0]], 3)


def linear(g, m, x, name, n_in, n_out, form):
    """x: [1, 1, n_in] -> [1, 1, n_out] by the [n_out, n_in] weight."""
    x2 = g.v("x")
    g.emit("%s = tensor.collapse_shape %s [[0, 1], [2]] : %s into %s" % (
        x2, x, f32([1, 1, n_in]), f32([1, n_in])))
    if form == "torch":
        w, _ = m.weight(g, name)
        wt = g.v("wt")
        g.emit("%s = linalg.transpose ins(%s : %s) outs(%s : %s) "
               "permutation = [1, 0]" % (wt, w, f32([n_out, n_in]),
                                         g.empty(f32([n_in, n_out])),
                                         f32([n_in, n_out])))
    else:
        wt, _ = m.weight(g, name, transpose=True)
    y = g.v("mm")
    g.emit("%s = linalg.matmul ins(%s, %s : %s, %s) outs(%s : %s) -> %s" % (
        y, x2, wt, f32([1, n_in]), f32([n_in, n_out]),
        g.fill("0.0", f32([1, n_out])), f32([1, n_out]), f32([1, n_out])))
    r = g.v("y")
    g.emit("%s = tensor.expand_shape %s [[0, 1], [2]] output_shape [1, 1, %d]"
           " : %s into %s" % (r, y, n_out, f32([1, n_out]),
                              f32([1, 1, n_out])))
    return r


def add(g, a, b, t, rank):
    ids = ", ".join("d%d" % k for k in range(rank))
    return g.generic([(a, t, ids), (b, t, ids)], t, lambda n: [
        "%s_r = arith.addf %s, %s : f32" % (n[0], n[0], n[1]),
        "linalg.yield %s_r : f32" % n[0]], rank)


def rope(g, m, x, heads, cos, sin, pos, layout):
    """Hugging Face's half-split RoPE of x, whose head_dim is the last dim:
    x * cos + rotate_half(x) * sin, rotate_half by slices and a concat."""
    hd, half = m.hd, m.hd // 2
    shape = [1, heads, 1, hd] if layout == "bhsd" else [1, 1, heads, hd]
    hshape = shape[:3] + [half]
    t, ht = f32(shape), f32(hshape)
    lo, hi = g.v("lo"), g.v("hi")
    sizes = ", ".join(str(s) for s in hshape)
    g.emit("%s = tensor.extract_slice %s[0, 0, 0, 0] [%s] [1, 1, 1, 1] : "
           "%s to %s" % (lo, x, sizes, t, ht))
    g.emit("%s = tensor.extract_slice %s[0, 0, 0, %d] [%s] [1, 1, 1, 1] : "
           "%s to %s" % (hi, x, half, sizes, t, ht))
    neg = g.generic([(hi, ht, "d0, d1, d2, d3")], ht, lambda n: [
        "%s_r = arith.negf %s : f32" % (n[0], n[0]),
        "linalg.yield %s_r : f32" % n[0]], 4)
    rot = g.v("rot")
    g.emit("%s = tensor.concat dim(3) %s, %s : (%s, %s) -> %s" % (
        rot, neg, lo, ht, ht, t))
    cs = []
    for tab in (cos, sin):
        s = g.v("cs")
        g.emit("%s = tensor.extract_slice %s[%s, 0] [1, %d] [1, 1] : %s to %s"
               % (s, tab, pos, hd, f32([m.cap, hd]), f32([1, hd])))
        cs.append(s)
    seq = "d2" if layout == "bhsd" else "d1"
    return g.generic([(x, t, "d0, d1, d2, d3"), (rot, t, "d0, d1, d2, d3"),
                      (cs[0], f32([1, hd]), "%s, d3" % seq),
                      (cs[1], f32([1, hd]), "%s, d3" % seq)], t, lambda n: [
        "%s_a = arith.mulf %s, %s : f32" % (n[0], n[0], n[2]),
        "%s_b = arith.mulf %s, %s : f32" % (n[0], n[1], n[3]),
        "%s_r = arith.addf %s_a, %s_b : f32" % (n[0], n[0], n[0]),
        "linalg.yield %s_r : f32" % n[0]], 4)


def torch_softmax(g, x, shape):
    """max.dim with its index, sub, exp, sum with keepdim, div."""
    t = f32(shape)
    red_t = f32(shape[:3])
    ninf = g.const("0xFF800000", "f32")
    mv = g.v("mv")
    g.emit("%s = linalg.fill ins(%s : f32) outs(%s : %s) -> %s" % (
        mv, ninf, g.empty(red_t), red_t, red_t))
    zi = g.const("0", "i64")
    it = red_t.replace("f32", "i64")
    mi = g.v("mi")
    g.emit("%s = linalg.fill ins(%s : i64) outs(%s : %s) -> %s" % (
        mi, zi, g.empty(it), it, it))
    mx = g.v("mx")
    ids4 = "affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>"
    red = "affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>"
    g.emit("%s:2 = linalg.generic {indexing_maps = [%s, %s, %s], "
           "iterator_types = [\"parallel\", \"parallel\", \"parallel\", "
           "\"reduction\"]} ins(%s : %s) outs(%s, %s : %s, %s) {" % (
               mx, ids4, red, red, x, t, mv, mi, red_t, it))
    g.emit("^bb0(%in: f32, %old: f32, %oldi: i64):")
    for line in ["%ti = linalg.index 3 : index",
                 "%tl = arith.index_cast %ti : index to i64",
                 "%gt = arith.cmpf ogt, %in, %old : f32",
                 "%nv = arith.maximumf %in, %old : f32",
                 "%ni = arith.select %gt, %tl, %oldi : i64",
                 "linalg.yield %nv, %ni : f32, i64"]:
        g.emit("  " + line)
    g.emit("} -> (%s, %s)" % (red_t, it))
    keep_t = f32(shape[:3] + [1])
    mk = g.v("mk")
    g.emit("%s = tensor.expand_shape %s#0 [[0], [1], [2, 3]] output_shape "
           "[%s, 1] : %s into %s" % (mk, mx, ", ".join(map(str, shape[:3])),
                                     red_t, keep_t))
    keep = "d0, d1, d2, 0"
    d = g.generic([(x, t, "d0, d1, d2, d3"), (mk, keep_t, keep)], t,
                  lambda n: ["%s_r = arith.subf %s, %s : f32" % (
                      n[0], n[0], n[1]), "linalg.yield %s_r : f32" % n[0]], 4)
    e = g.generic([(d, t, "d0, d1, d2, d3")], t, lambda n: [
        "%s_r = math.exp %s : f32" % (n[0], n[0]),
        "linalg.yield %s_r : f32" % n[0]], 4)
    z = g.generic([(e, t, "d0, d1, d2, d3")], keep_t, lambda n: [
        "%s_r = arith.addf %s, %s : f32" % (n[0], n[0], n[1]),
        "linalg.yield %s_r : f32" % n[0]], 4, red=(3,), out_map=keep,
        init=g.fill("0.0", keep_t))
    return g.generic([(e, t, "d0, d1, d2, d3"), (z, keep_t, keep)], t,
                     lambda n: ["%s_r = arith.divf %s, %s : f32" % (
                         n[0], n[0], n[1]), "linalg.yield %s_r : f32" % n[0]],
                     4)


def attention_torch(g, m, q, k, v, kc, vc, mask, pos, cos, sin):
    """q [1,1,dim], k/v [1,1,kv*hd] -> ([1,1,dim], kc', vc')."""
    H, KV, hd, C = m.heads, m.kv, m.hd, m.cap
    grp = H // KV

    def heads(x, n):
        e, t = g.v("h"), g.v("ht")
        g.emit("%s = tensor.expand_shape %s [[0], [1], [2, 3]] output_shape "
               "[1, 1, %d, %d] : %s into %s" % (
                   e, x, n, hd, f32([1, 1, n * hd]), f32([1, 1, n, hd])))
        g.emit("%s = linalg.transpose ins(%s : %s) outs(%s : %s) "
               "permutation = [0, 2, 1, 3]" % (
                   t, e, f32([1, 1, n, hd]), g.empty(f32([1, n, 1, hd])),
                   f32([1, n, 1, hd])))
        return t

    qh = rope(g, m, heads(q, H), H, cos, sin, pos, "bhsd")
    kh = rope(g, m, heads(k, KV), KV, cos, sin, pos, "bhsd")
    vh = heads(v, KV)
    ct = f32([1, KV, C, hd])
    kw, vw = g.v("kw"), g.v("vw")
    for dst, src, cache in ((kw, kh, kc), (vw, vh, vc)):
        g.emit("%s = tensor.insert_slice %s into %s[0, 0, %s, 0] "
               "[1, %d, 1, %d] [1, 1, 1, 1] : %s into %s" % (
                   dst, src, cache, pos, KV, hd, f32([1, KV, 1, hd]), ct))

    def repeat_kv(x):
        e, c = g.v("rx"), g.v("rc")
        g.emit("%s = tensor.expand_shape %s [[0], [1, 2], [3], [4]] "
               "output_shape [1, %d, 1, %d, %d] : %s into %s" % (
                   e, x, KV, C, hd, ct, f32([1, KV, 1, C, hd])))
        b = g.generic([(e, f32([1, KV, 1, C, hd]), "d0, d1, 0, d3, d4")],
                      f32([1, KV, grp, C, hd]),
                      lambda n: ["linalg.yield %s : f32" % n[0]], 5)
        g.emit("%s = tensor.collapse_shape %s [[0], [1, 2], [3], [4]] : "
               "%s into %s" % (c, b, f32([1, KV, grp, C, hd]),
                               f32([1, H, C, hd])))
        return c

    kr, vr = repeat_kv(kw), repeat_kv(vw)
    kt, q3, k3, s3, s4 = (g.v(h) for h in ("kt", "q3", "k3", "s3", "s4"))
    g.emit("%s = linalg.transpose ins(%s : %s) outs(%s : %s) permutation = "
           "[0, 1, 3, 2]" % (kt, kr, f32([1, H, C, hd]),
                             g.empty(f32([1, H, hd, C])), f32([1, H, hd, C])))
    g.emit("%s = tensor.collapse_shape %s [[0, 1], [2], [3]] : %s into %s" % (
        q3, qh, f32([1, H, 1, hd]), f32([H, 1, hd])))
    g.emit("%s = tensor.collapse_shape %s [[0, 1], [2], [3]] : %s into %s" % (
        k3, kt, f32([1, H, hd, C]), f32([H, hd, C])))
    g.emit("%s = linalg.batch_matmul ins(%s, %s : %s, %s) outs(%s : %s) -> %s"
           % (s3, q3, k3, f32([H, 1, hd]), f32([H, hd, C]),
              g.fill("0.0", f32([H, 1, C])), f32([H, 1, C]), f32([H, 1, C])))
    g.emit("%s = tensor.expand_shape %s [[0, 1], [2], [3]] output_shape "
           "[1, %d, 1, %d] : %s into %s" % (s4, s3, H, C, f32([H, 1, C]),
                                            f32([1, H, 1, C])))
    st = f32([1, H, 1, C])
    scale = g.const("%.9e" % (1.0 / math.sqrt(hd)), "f32")
    ss = g.generic([(s4, st, "d0, d1, d2, d3"),
                    (mask, f32([1, 1, 1, C]), "d0, 0, d2, d3")], st,
                   lambda n: ["%s_s = arith.mulf %s, %s : f32" % (
                       n[0], n[0], scale),
                       "%s_r = arith.addf %s_s, %s : f32" % (n[0], n[0], n[1]),
                       "linalg.yield %s_r : f32" % n[0]], 4)
    p = torch_softmax(g, ss, [1, H, 1, C])
    p3, v3, o3, o4, ot, o = (g.v(h) for h in ("p3", "v3", "o3", "o4", "ot",
                                              "o"))
    g.emit("%s = tensor.collapse_shape %s [[0, 1], [2], [3]] : %s into %s" % (
        p3, p, st, f32([H, 1, C])))
    g.emit("%s = tensor.collapse_shape %s [[0, 1], [2], [3]] : %s into %s" % (
        v3, vr, f32([1, H, C, hd]), f32([H, C, hd])))
    g.emit("%s = linalg.batch_matmul ins(%s, %s : %s, %s) outs(%s : %s) -> %s"
           % (o3, p3, v3, f32([H, 1, C]), f32([H, C, hd]),
              g.fill("0.0", f32([H, 1, hd])), f32([H, 1, hd]),
              f32([H, 1, hd])))
    g.emit("%s = tensor.expand_shape %s [[0, 1], [2], [3]] output_shape "
           "[1, %d, 1, %d] : %s into %s" % (o4, o3, H, hd, f32([H, 1, hd]),
                                            f32([1, H, 1, hd])))
    g.emit("%s = linalg.transpose ins(%s : %s) outs(%s : %s) permutation = "
           "[0, 2, 1, 3]" % (ot, o4, f32([1, H, 1, hd]),
                             g.empty(f32([1, 1, H, hd])), f32([1, 1, H, hd])))
    g.emit("%s = tensor.collapse_shape %s [[0], [1], [2, 3]] : %s into %s" % (
        o, ot, f32([1, 1, H, hd]), f32([1, 1, H * hd])))
    return o, kw, vw


def attention_stablehlo(g, m, q, k, v, kc, vc, pos, wpos, cos, sin):
    """JAX layout: caches [1, C, KV, hd]; mask from iota/compare/select."""
    H, KV, hd, C = m.heads, m.kv, m.hd, m.cap
    grp = H // KV

    def heads(x, n):
        e = g.v("h")
        g.emit("%s = tensor.expand_shape %s [[0], [1], [2, 3]] output_shape "
               "[1, 1, %d, %d] : %s into %s" % (
                   e, x, n, hd, f32([1, 1, n * hd]), f32([1, 1, n, hd])))
        return e

    qh = rope(g, m, heads(q, H), H, cos, sin, pos, "bshd")
    kh = rope(g, m, heads(k, KV), KV, cos, sin, pos, "bshd")
    vh = heads(v, KV)
    ct = f32([1, C, KV, hd])
    kw, vw = g.v("kw"), g.v("vw")
    for dst, src, cache in ((kw, kh, kc), (vw, vh, vc)):
        g.emit("%s = tensor.insert_slice %s into %s[0, %s, 0, 0] "
               "[1, 1, %d, %d] [1, 1, 1, 1] : %s into %s" % (
                   dst, src, cache, wpos, KV, hd, f32([1, 1, KV, hd]), ct))

    def repeat(x):
        b, c = g.v("b"), g.v("bc")
        bt = f32([1, C, KV, grp, hd])
        g.emit("%s = linalg.broadcast ins(%s : %s) outs(%s : %s) "
               "dimensions = [3]" % (b, x, ct, g.empty(bt), bt))
        g.emit("%s = tensor.collapse_shape %s [[0], [1], [2, 3], [4]] : "
               "%s into %s" % (c, b, bt, f32([1, C, H, hd])))
        return c

    kr, vr = repeat(kw), repeat(vw)
    qt = f32([1, 1, H, hd])
    scale = g.const("%.9e" % (1.0 / math.sqrt(hd)), "f32")
    qs = g.generic([(qh, qt, "d0, d1, d2, d3")], qt, lambda n: [
        "%s_r = arith.mulf %s, %s : f32" % (n[0], n[0], scale),
        "linalg.yield %s_r : f32" % n[0]], 4)
    # einsum bnhd,bthd->bhnt with dims (b, h, n, t, d)
    st = f32([1, H, 1, C])
    s = g.generic([(qs, qt, "d0, d2, d1, d4"),
                   (kr, f32([1, C, H, hd]), "d0, d3, d1, d4")], st,
                  lambda n: ["%s_m = arith.mulf %s, %s : f32" % (
                      n[0], n[0], n[1]),
                      "%s_r = arith.addf %s, %s_m : f32" % (n[0], n[2], n[0]),
                      "linalg.yield %s_r : f32" % n[0]], 5, red=(4,),
                  out_map="d0, d1, d2, d3", init=g.fill("0.0", st))
    # where(iota(t) <= pos, s, -inf)
    ninf = g.const("0xFF800000", "f32")
    masked = g.generic([(s, st, "d0, d1, d2, d3")], st, lambda n: [
        "%s_t = linalg.index 3 : index" % n[0],
        "%s_c = arith.cmpi sle, %s_t, %s : index" % (n[0], n[0], pos),
        "%s_r = arith.select %s_c, %s, %s : f32" % (n[0], n[0], n[0], ninf),
        "linalg.yield %s_r : f32" % n[0]], 4)
    rt = f32([1, H, 1])
    mx = g.generic([(masked, st, "d0, d1, d2, d3")], rt, lambda n: [
        "%s_r = arith.maximumf %s, %s : f32" % (n[0], n[0], n[1]),
        "linalg.yield %s_r : f32" % n[0]], 4, red=(3,),
        out_map="d0, d1, d2", init=g.fill("0xFF800000", rt))
    e = g.generic([(masked, st, "d0, d1, d2, d3"), (mx, rt, "d0, d1, d2")],
                  st, lambda n: [
                      "%s_d = arith.subf %s, %s : f32" % (n[0], n[0], n[1]),
                      "%s_r = math.exp %s_d : f32" % (n[0], n[0]),
                      "linalg.yield %s_r : f32" % n[0]], 4)
    z = g.generic([(e, st, "d0, d1, d2, d3")], rt, lambda n: [
        "%s_r = arith.addf %s, %s : f32" % (n[0], n[0], n[1]),
        "linalg.yield %s_r : f32" % n[0]], 4, red=(3,),
        out_map="d0, d1, d2", init=g.fill("0.0", rt))
    p = g.generic([(e, st, "d0, d1, d2, d3"), (z, rt, "d0, d1, d2")], st,
                  lambda n: ["%s_r = arith.divf %s, %s : f32" % (
                      n[0], n[0], n[1]), "linalg.yield %s_r : f32" % n[0]], 4)
    # einsum bhnt,bthd->bnhd with dims (b, n, h, d, t)
    o = g.generic([(p, st, "d0, d2, d1, d4"),
                   (vr, f32([1, C, H, hd]), "d0, d4, d2, d3")], qt,
                  lambda n: ["%s_m = arith.mulf %s, %s : f32" % (
                      n[0], n[0], n[1]),
                      "%s_r = arith.addf %s, %s_m : f32" % (n[0], n[2], n[0]),
                      "linalg.yield %s_r : f32" % n[0]], 5, red=(4,),
                  out_map="d0, d1, d2, d3", init=g.fill("0.0", qt))
    of = g.v("o")
    g.emit("%s = tensor.collapse_shape %s [[0], [1], [2, 3]] : %s into %s" % (
        of, o, qt, f32([1, 1, H * hd])))
    return of, kw, vw


def forward(m, form):
    g = Graph()
    KV, hd, C, D = m.kv, m.hd, m.cap, m.dim
    ct = f32([1, KV, C, hd] if form == "torch" else [1, C, KV, hd])
    caches = []
    for i in range(m.layers):
        caches += ["%%k%d" % i, "%%v%d" % i]
    if form == "torch":
        args = ["%ids: tensor<1x1xi64>", "%cache_position: tensor<1xi64>",
                "%attention_mask: " + f32([1, 1, 1, C])]
        idt = "i64"
    else:
        args = ["%ids: tensor<1x1xi32>", "%pos_arg: tensor<i32>"]
        idt = "i32"
    args += ["%s: %s" % (c, ct) for c in caches]
    results = [f32([1, 1, m.vocab])] + [ct] * len(caches)
    c0 = g.const("0", "index")
    if form == "torch":
        p64 = g.v("p")
        g.emit("%s = tensor.extract %%cache_position[%s] : tensor<1xi64>" % (
            p64, c0))
        pos = g.v("pos")
        g.emit("%s = arith.index_cast %s : i64 to index" % (pos, p64))
        wpos = pos
    else:
        p32, pos = g.v("p"), g.v("pos")
        g.emit("%s = tensor.extract %%pos_arg[] : tensor<i32>" % p32)
        g.emit("%s = arith.index_cast %s : i32 to index" % (pos, p32))
        # dynamic_update_slice clamps its start into [0, C - 1].
        lo, hi = g.v("lo"), g.v("cl")
        g.emit("%s = arith.maxsi %s, %s : index" % (lo, pos, c0))
        last = g.const("%d" % (C - 1), "index")
        g.emit("%s = arith.minsi %s, %s : index" % (hi, lo, last))
        wpos = hi
    emb, _ = m.weight(g, "model.embed_tokens.weight")
    xt = f32([1, 1, D])
    x = g.generic([], xt, lambda n: [
        "%s_i = linalg.index 0 : index" % n[0],
        "%s_j = linalg.index 1 : index" % n[0],
        "%s_c = linalg.index 2 : index" % n[0],
        "%s_t = tensor.extract %%ids[%s_i, %s_j] : tensor<1x1x%s>" % (
            n[0], n[0], n[0], idt),
        "%s_x = arith.index_cast %s_t : %s to index" % (n[0], n[0], idt),
        "%s_e = tensor.extract %s[%s_x, %s_c] : %s" % (
            n[0], emb, n[0], n[0], f32([m.vocab, D])),
        "linalg.yield %s_e : f32" % n[0]], 3)
    cos, sin = m.rope_tables(g)
    new_caches = []
    for i in range(m.layers):
        p = "model.layers.%d." % i
        h = rmsnorm(g, m, x, p + "input_layernorm.weight")
        q = linear(g, m, h, p + "self_attn.q_proj.weight", D, D, form)
        k = linear(g, m, h, p + "self_attn.k_proj.weight", D, KV * hd, form)
        v = linear(g, m, h, p + "self_attn.v_proj.weight", D, KV * hd, form)
        if form == "torch":
            a, kw, vw = attention_torch(g, m, q, k, v, "%%k%d" % i,
                                        "%%v%d" % i, "%attention_mask", pos,
                                        cos, sin)
        else:
            a, kw, vw = attention_stablehlo(g, m, q, k, v, "%%k%d" % i,
                                            "%%v%d" % i, pos, wpos, cos, sin)
        new_caches += [kw, vw]
        x = add(g, x, linear(g, m, a, p + "self_attn.o_proj.weight", D, D,
                             form), xt, 3)
        h = rmsnorm(g, m, x, p + "post_attention_layernorm.weight")
        gate = linear(g, m, h, p + "mlp.gate_proj.weight", D, m.hidden, form)
        up = linear(g, m, h, p + "mlp.up_proj.weight", D, m.hidden, form)
        ft = f32([1, 1, m.hidden])
        one = g.const("1.0", "f32")
        act = g.generic([(gate, ft, "d0, d1, d2"), (up, ft, "d0, d1, d2")],
                        ft, lambda n: [
                            "%s_n = arith.negf %s : f32" % (n[0], n[0]),
                            "%s_e = math.exp %s_n : f32" % (n[0], n[0]),
                            "%s_d = arith.addf %s, %s_e : f32" % (
                                n[0], one, n[0]),
                            "%s_s = arith.divf %s, %s_d : f32" % (
                                n[0], n[0], n[0]),
                            "%s_r = arith.mulf %s_s, %s : f32" % (
                                n[0], n[0], n[1]),
                            "linalg.yield %s_r : f32" % n[0]], 3)
        x = add(g, x, linear(g, m, act, p + "mlp.down_proj.weight", m.hidden,
                             D, form), xt, 3)
    x = rmsnorm(g, m, x, "model.norm.weight")
    head = ("model.embed_tokens.weight" if m.tied else "lm_head.weight")
    logits = linear(g, m, x, head, D, m.vocab, form)
    rets = [logits] + new_caches
    g.emit("return %s : %s" % (", ".join(rets), ", ".join(results)))
    return ("func.func @forward(%s) -> (%s) {\n%s\n}\n" % (
        ", ".join(args), ", ".join(results), "\n".join(g.lines)), results)


class Tosa:
    """TOSA ops as torch-mlir's TOSA backend writes them (TOSA 1.0 forms:
    zero points and shifts as operands, shapes as tosa.const_shape)."""

    def __init__(self, g):
        self.g = g
        self.shift = self.const("dense<0> : tensor<1xi8>", "tensor<1xi8>")
        self.zp = self.const("dense<0.0> : tensor<1xf32>", f32([1]))

    def const(self, value, t):
        r = self.g.v("tc")
        self.g.emit('%s = "tosa.const"() {values = %s} : () -> %s' % (
            r, value if ":" in value else "%s : %s" % (value, t), t))
        return r

    def shape(self, dims):
        r = self.g.v("sh")
        self.g.emit("%s = tosa.const_shape {values = dense<[%s]> : "
                    "tensor<%dxindex>} : () -> !tosa.shape<%d>" % (
                        r, ", ".join(map(str, dims)), len(dims), len(dims)))
        return r, "!tosa.shape<%d>" % len(dims)

    def op(self, name, operands, types, out_t, attrs=""):
        r = self.g.v(name.split(".")[-1][:4])
        self.g.emit("%s = %s %s%s : (%s) -> %s" % (
            r, name, ", ".join(operands), attrs, ", ".join(types), out_t))
        return r

    def reshape(self, x, xs, shape):
        s, st = self.shape(shape)
        return self.op("tosa.reshape", [x, s], [f32(xs), st], f32(shape))

    def transpose(self, x, xs, perms):
        return self.op("tosa.transpose", [x], [f32(xs)],
                       f32([xs[p] for p in perms]),
                       " {perms = array<i32: %s>}" % ", ".join(map(str,
                                                                  perms)))

    def binary(self, name, a, ash, b, bsh):
        out = [max(x, y) for x, y in zip(ash, bsh)]
        if name == "tosa.mul":
            return self.op(name, [a, b, self.shift],
                           [f32(ash), f32(bsh), "tensor<1xi8>"], f32(out))
        return self.op(name, [a, b], [f32(ash), f32(bsh)], f32(out))

    def unary(self, name, x, xs):
        if name == "tosa.negate":
            return self.op(name, [x, self.zp, self.zp],
                           [f32(xs), f32([1]), f32([1])], f32(xs))
        return self.op(name, [x], [f32(xs)], f32(xs))

    def reduce(self, name, x, xs, axis):
        out = list(xs)
        out[axis] = 1
        return self.op(name, [x], [f32(xs)], f32(out),
                       " {axis = %d : i32}" % axis)

    def matmul(self, a, ash, b, bsh):
        return self.op("tosa.matmul", [a, b, self.zp, self.zp],
                       [f32(ash), f32(bsh), f32([1]), f32([1])],
                       f32([ash[0], ash[1], bsh[2]]))


def forward_tosa(m):
    """stories260K's decode step in TOSA: caches [1, kv_heads, capacity,
    head_dim] seen as [kv_heads, capacity, head_dim] for tosa.scatter, the
    position as a [1, 1] i32 tensor, the additive mask an argument."""
    g = Graph()
    T = Tosa(g)
    H, KV, hd, C, D = m.heads, m.kv, m.hd, m.cap, m.dim
    grp, half = H // KV, hd // 2
    ct = f32([1, KV, C, hd])
    caches = []
    for i in range(m.layers):
        caches += ["%%k%d" % i, "%%v%d" % i]
    args = ["%ids: tensor<1x1xi32>", "%pos: tensor<1x1xi32>",
            "%attention_mask: " + f32([1, 1, C])]
    args += ["%s: %s" % (c, ct) for c in caches]
    results = [f32([1, 1, m.vocab])] + [ct] * len(caches)

    def weight(name, transpose=False):
        shape, blob = m.w[name]
        if transpose:  # [out, in] -> [1, in, out] for tosa.matmul
            rows, cols = shape
            vals = struct.unpack("<%df" % (rows * cols), blob)
            blob = struct.pack("<%df" % (rows * cols), *(
                vals[r * cols + c] for c in range(cols) for r in range(rows)))
            shape = [1, cols, rows]
        else:
            shape = [1] * (3 - len(shape)) + list(shape)
        return T.const(hexdense(blob) + " : " + f32(shape), f32(shape))

    def rmsnorm(x, name):
        sq = T.binary("tosa.mul", x, [1, 1, D], x, [1, 1, D])
        ss = T.reduce("tosa.reduce_sum", sq, [1, 1, D], 2)
        inv_n = T.const("dense<%.9e>" % (1.0 / D), f32([1, 1, 1]))
        eps = T.const("dense<%.9e>" % m.eps, f32([1, 1, 1]))
        mean = T.binary("tosa.mul", ss, [1, 1, 1], inv_n, [1, 1, 1])
        r = T.unary("tosa.rsqrt", T.binary("tosa.add", mean, [1, 1, 1], eps,
                                           [1, 1, 1]), [1, 1, 1])
        xn = T.binary("tosa.mul", x, [1, 1, D], r, [1, 1, 1])
        return T.binary("tosa.mul", xn, [1, 1, D], weight(name), [1, 1, D])

    def linear(x, name, n_in, n_out):
        return T.matmul(x, [1, 1, n_in], weight(name, transpose=True),
                        [1, n_in, n_out])

    def table(values):
        blob = struct.pack("<%df" % len(values), *values)
        return T.const(hexdense(blob) + " : " + f32([1, C, hd]),
                       f32([1, C, hd]))

    cos, sin = [], []
    for p in range(C):
        for c in range(hd):
            f = p * m.theta ** (-2.0 * (c % half) / hd)
            cos.append(math.cos(f))
            sin.append(math.sin(f))
    cos_t, sin_t = table(cos), table(sin)
    ids_t = "tensor<1x1xi32>"
    cs = [T.op("tosa.gather", [tab, "%pos"], [f32([1, C, hd]), ids_t],
               f32([1, 1, hd])) for tab in (cos_t, sin_t)]

    def rope(x, n):
        """x [n, 1, hd]: x * cos + rotate_half(x) * sin."""
        xs = [n, 1, hd]
        lo_s, hi_s = [], []
        start0, st = T.shape([0, 0, 0])
        start1, _ = T.shape([0, 0, half])
        size, _ = T.shape([n, 1, half])
        lo = T.op("tosa.slice", [x, start0, size], [f32(xs), st, st],
                  f32([n, 1, half]))
        hi = T.op("tosa.slice", [x, start1, size], [f32(xs), st, st],
                  f32([n, 1, half]))
        rot = T.op("tosa.concat", [T.unary("tosa.negate", hi, [n, 1, half]),
                                   lo],
                   [f32([n, 1, half])] * 2, f32(xs), " {axis = 2 : i32}")
        a = T.binary("tosa.mul", x, xs, cs[0], [1, 1, hd])
        b = T.binary("tosa.mul", rot, xs, cs[1], [1, 1, hd])
        return T.binary("tosa.add", a, xs, b, xs)

    def heads(x, n):
        """[1, 1, n * hd] -> [n, 1, hd]."""
        return T.reshape(x, [1, 1, n * hd], [n, 1, hd])

    emb = weight("model.embed_tokens.weight")
    x = T.op("tosa.gather", [emb, "%ids"], [f32([1, m.vocab, D]), ids_t],
             f32([1, 1, D]))
    zeros = T.const("dense<0>", "tensor<%dx1xi32>" % KV)
    idx = T.op("tosa.add", [zeros, "%pos"], ["tensor<%dx1xi32>" % KV, ids_t],
               "tensor<%dx1xi32>" % KV)
    scale = T.const("dense<%.9e>" % (1.0 / math.sqrt(hd)), f32([1, 1, 1]))
    new_caches = []
    for i in range(m.layers):
        p = "model.layers.%d." % i
        h = rmsnorm(x, p + "input_layernorm.weight")
        q = rope(heads(linear(h, p + "self_attn.q_proj.weight", D, D), H), H)
        k = rope(heads(linear(h, p + "self_attn.k_proj.weight", D, KV * hd),
                       KV), KV)
        v = heads(linear(h, p + "self_attn.v_proj.weight", D, KV * hd), KV)
        outs = []
        for new, cache in ((k, "%%k%d" % i), (v, "%%v%d" % i)):
            c3 = T.reshape(cache, [1, KV, C, hd], [KV, C, hd])
            w = T.op("tosa.scatter", [c3, idx, new],
                     [f32([KV, C, hd]), "tensor<%dx1xi32>" % KV,
                      f32([KV, 1, hd])], f32([KV, C, hd]))
            new_caches.append(T.reshape(w, [KV, C, hd], [1, KV, C, hd]))
            # repeat_kv: [KV, C, hd] -> [H, C, hd]
            r4 = T.reshape(w, [KV, C, hd], [KV, 1, C, hd])
            mul, mt = T.shape([1, grp, 1, 1])
            tiled = T.op("tosa.tile", [r4, mul], [f32([KV, 1, C, hd]), mt],
                         f32([KV, grp, C, hd]))
            outs.append(T.reshape(tiled, [KV, grp, C, hd], [H, C, hd]))
        kr, vr = outs
        kt = T.transpose(kr, [H, C, hd], [0, 2, 1])
        s = T.matmul(q, [H, 1, hd], kt, [H, hd, C])
        s = T.binary("tosa.mul", s, [H, 1, C], scale, [1, 1, 1])
        s = T.binary("tosa.add", s, [H, 1, C], "%attention_mask", [1, 1, C])
        mx = T.reduce("tosa.reduce_max", s, [H, 1, C], 2)
        e = T.unary("tosa.exp", T.binary("tosa.sub", s, [H, 1, C], mx,
                                          [H, 1, 1]), [H, 1, C])
        z = T.unary("tosa.reciprocal",
                    T.reduce("tosa.reduce_sum", e, [H, 1, C], 2), [H, 1, 1])
        pr = T.binary("tosa.mul", e, [H, 1, C], z, [H, 1, 1])
        o = T.matmul(pr, [H, 1, C], vr, [H, C, hd])
        a = T.reshape(o, [H, 1, hd], [1, 1, D])
        x = T.binary("tosa.add", x, [1, 1, D],
                     linear(a, p + "self_attn.o_proj.weight", D, D),
                     [1, 1, D])
        h = rmsnorm(x, p + "post_attention_layernorm.weight")
        ft = [1, 1, m.hidden]
        gate = linear(h, p + "mlp.gate_proj.weight", D, m.hidden)
        up = linear(h, p + "mlp.up_proj.weight", D, m.hidden)
        act = T.binary("tosa.mul", T.binary(
            "tosa.mul", gate, ft, T.unary("tosa.sigmoid", gate, ft), ft), ft,
            up, ft)
        x = T.binary("tosa.add", x, [1, 1, D],
                     linear(act, p + "mlp.down_proj.weight", m.hidden, D),
                     [1, 1, D])
    x = rmsnorm(x, "model.norm.weight")
    head = ("model.embed_tokens.weight" if m.tied else "lm_head.weight")
    logits = linear(x, head, D, m.vocab)
    rets = [logits] + new_caches
    g.emit("return %s : %s" % (", ".join(rets), ", ".join(results)))
    return ("func.func @forward(%s) -> (%s) {\n%s\n}\n" % (
        ", ".join(args), ", ".join(results), "\n".join(g.lines)), results)


def driver(m, form, ids, cache_type=None):
    """@main: the ids one per step; prints each step's logits."""
    g = Graph()
    C, KV, hd = m.cap, m.kv, m.hd
    ct = f32([1, C, KV, hd] if form == "stablehlo" else [1, KV, C, hd])
    n = 2 * m.layers
    if cache_type:
        cache = g.v("cache")
        g.emit("%s = call @kv_cache_create() : () -> %s" % (cache,
                                                              cache_type))
    else:
        z = g.fill("0.0", ct)
        state = [z] * n
    lt = f32([1, 1, m.vocab])
    for step, tok in enumerate(ids):
        if form == "torch":
            operands = [g.const("dense<%d>" % tok, "tensor<1x1xi64>"),
                        g.const("dense<%d>" % step, "tensor<1xi64>")]
            mask = ", ".join("0.0" if t <= step else "0xFF7FFFFF"
                             for t in range(C))
            operands.append(g.const("dense<[[[[%s]]]]>" % mask,
                                    f32([1, 1, 1, C])))
            types = ["tensor<1x1xi64>", "tensor<1xi64>", f32([1, 1, 1, C])]
        elif form == "tosa":
            mask = ", ".join("0.0" if t <= step else "0xFF7FFFFF"
                             for t in range(C))
            operands = [g.const("dense<%d>" % tok, "tensor<1x1xi32>"),
                        g.const("dense<%d>" % step, "tensor<1x1xi32>"),
                        g.const("dense<[[[%s]]]>" % mask, f32([1, 1, C]))]
            types = ["tensor<1x1xi32>", "tensor<1x1xi32>", f32([1, 1, C])]
        else:
            operands = [g.const("dense<%d>" % tok, "tensor<1x1xi32>"),
                        g.const("dense<%d>" % step, "tensor<i32>")]
            types = ["tensor<1x1xi32>", "tensor<i32>"]
        if cache_type:
            # The rewrite puts the !kvq.cache where the first cache was.
            operands.append(cache)
            types.append(cache_type)
            rtypes = [lt]
        else:
            operands += state
            types += [ct] * n
            rtypes = [lt] + [ct] * n
        outs = [g.v("r") for _ in rtypes]
        g.emit("%s = call @forward(%s) : (%s) -> (%s)" % (
            ", ".join(outs), ", ".join(operands), ", ".join(types),
            ", ".join(rtypes)))
        if not cache_type:
            state = outs[1:]
        u = g.v("u")
        g.emit("%s = tensor.cast %s : %s to tensor<*xf32>" % (u, outs[0], lt))
        g.emit("call @printMemrefF32(%s) : (tensor<*xf32>) -> ()" % u)
    if cache_type:
        g.emit("call @kv_cache_destroy(%s) : (%s) -> ()" % (cache,
                                                              cache_type))
    return ("func.func @main() {\n%s\n  return\n}\n"
            "func.func private @printMemrefF32(tensor<*xf32>)\n" %
            "\n".join(g.lines))


def logits_of(text, vocab, steps):
    vals = equivalence.numbers(text)
    if len(vals) != vocab * steps:
        sys.exit("whole_model: %d logits printed, %d expected" % (
            len(vals), vocab * steps))
    return [vals[i * vocab:(i + 1) * vocab] for i in range(steps)]


def perplexity(logits, ids):
    total = 0.0
    for step in range(len(ids) - 1):
        row = logits[step]
        top = max(row)
        lse = top + math.log(sum(math.exp(x - top) for x in row))
        total += lse - row[ids[step + 1]]
    return math.exp(total / (len(ids) - 1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--form", choices=["torch", "stablehlo", "tosa"],
                    required=True)
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--text", required=True)
    ap.add_argument("--tokens", type=int, default=96)
    ap.add_argument("--capacity", type=int, default=128)
    ap.add_argument("--out", required=True)
    ap.add_argument("--run", required=True)
    ap.add_argument("--kvq-opt", default="kvq-opt")
    ap.add_argument("--kvq-run", default="kvq-run")
    ap.add_argument("--methods", default="fp16,kivi,kivi_sink,kvquant")
    ap.add_argument("--print-graph", action="store_true",
                    help="print the graph and exit")
    opts = ap.parse_args()
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.normpath(os.path.join(here, "..", "..", ".."))
    os.makedirs(opts.out, exist_ok=True)
    folder = os.path.join(opts.out, "hf")
    run([sys.executable, os.path.join(root, "scripts", "llama2c_to_hf.py"),
         opts.checkpoint, folder], "writing the Hugging Face folder")
    m = Model(folder, opts.capacity)
    graph, _ = (forward_tosa(m) if opts.form == "tosa" else
                forward(m, opts.form))
    if opts.print_graph:
        print(graph)
        return
    # The ids kvq-run reads from the text: the dump's metadata names them.
    dump = os.path.join(opts.out, "ids.safetensors")
    tok = os.path.join(os.path.dirname(opts.checkpoint), "tok%d.bin" %
                       m.vocab)
    run([opts.kvq_run, folder, "--tokenizer", tok, "--perplexity", opts.text,
         "--dump-kv", dump], "reading the text's ids")
    _, meta = read_safetensors(dump)
    ids = [int(x) for x in meta["token_ids"].split()][:opts.tokens]
    if len(ids) < opts.tokens or opts.tokens > m.cap:
        sys.exit("whole_model: need %d ids within capacity %d" % (
            opts.tokens, m.cap))
    ids_file = os.path.join(opts.out, "ids.txt")
    with open(ids_file, "w") as f:
        f.write(" ".join(map(str, ids)) + "\n")
    methods = opts.methods.split(",")
    ref = json.loads(run([opts.kvq_run, folder, "--tokens", ids_file,
                          "--prefill", "1", "--json", "--method",
                          ",".join(["none"] + methods)], "kvq-run"))
    ref_ppl = {r["method"]: r["perplexity"] for r in ref["results"]}

    runner = shlex.split(opts.run)
    module = "module {\n%s}\n" % graph

    def execute(mod, cache_type, what):
        full = mod.rstrip()[:-1] + driver(m, opts.form, ids, cache_type) + \
            "}\n"
        lowered = run([opts.kvq_opt, "-", "--kvq-to-llvm"], "lowering " + what,
                      full)
        return logits_of(run(runner, "running " + what, lowered), m.vocab,
                         len(ids))

    plain = execute(run([opts.kvq_opt, "-"], "parsing the graph", module),
                    None, "the graph")
    failed = False

    def report(label, got, want):
        nonlocal failed
        rel = abs(got - want) / want
        ok = rel <= 1e-3
        failed = failed or not ok
        print("%s: perplexity %.4f, kvq-run %.4f: %s" % (
            label, got, want, "equal" if ok else "DIFFERENT (rel %.2g)" % rel))

    report("graph", perplexity(plain, ids), ref_ppl["none"])
    for method in methods:
        rewritten = run([opts.kvq_opt, "-", "--kvq-quantize-kv-cache=method=" +
                         method], "the rewrite (%s)" % method, module)
        if rewritten.count("kvq.cache_attend") != m.layers:
            sys.exit("whole_model: %s: %d of %d attentions rewritten" % (
                method, rewritten.count("kvq.cache_attend"), m.layers))
        cache_type = re.search(r"^(!\w+) = !kvq\.cache<", rewritten,
                               re.M).group(1)
        got = execute(rewritten, cache_type, method)
        if method == "fp16":
            worst = max(abs(a - b) for ra, rb in zip(plain, got)
                        for a, b in zip(ra, rb))
            scale = max(abs(a) for r in plain for a in r)
            ok = worst <= 2e-3 * max(1.0, scale)
            failed = failed or not ok
            print("fp16: %d logits over %d steps %s the graph's (max |diff| "
                  "%.2g)" % (m.vocab * len(ids), len(ids),
                             "equal" if ok else "DIFFER FROM", worst))
        report(method, perplexity(got, ids), ref_ppl[method])
        # A method the tolerance cannot tell from fp16 would pass for any
        # quantized cache: the text must be long enough to separate them.
        if method != "fp16" and abs(ref_ppl[method] - ref_ppl["fp16"]) <= \
                2e-3 * ref_ppl["fp16"]:
            failed = True
            print("%s: kvq-run's perplexity is within 0.2 %% of fp16's; "
                  "use more --tokens" % method)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
