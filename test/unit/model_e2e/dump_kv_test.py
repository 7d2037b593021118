#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""kvq-run --dump-kv writes what kvq-eval reads, and what it writes is the
model's keys, values and queries.

    dump_kv_test.py KVQ_RUN KVQ_EVAL SOURCE_ROOT SCRATCH_DIR

On models/stories260K (the llama2.c file, its Hugging Face folder and its
f32 GGUF from scripts/llama2c_to_hf.py), independently of kvq:
  - layer 0's pre-RoPE keys, values and post-RoPE queries are recomputed
    here from the checkpoint's floats (embedding, RMSNorm, projections,
    RoPE written out below);
  - every layer's post-RoPE keys are the pre-RoPE keys rotated here by the
    model's RoPE (interleaved pairs for llama2.c and GGUF, half-split for
    the folder);
  - the folder's dump is the llama2.c dump with each head's channels in
    half-split order, the GGUF's is the same dump;
  - kvq-eval loads the dump (post-RoPE, and pre-RoPE with --pre-rope) and
    reports 5 layers, 4 KV heads, 8 query heads.
Bad output paths and a --method other than none are one-line errors.
Python standard library only.
"""
import json
import math
import os
import shutil
import struct
import subprocess
import sys

kvq_run, kvq_eval, root, scratch = sys.argv[1:5]
models = os.path.join(root, "models", "stories260K")
ckpt = os.path.join(models, "stories260K.bin")
tok = os.path.join(models, "tok512.bin")
folder = os.path.join(scratch, "dump-kv-hf")
gguf = os.path.join(scratch, "dump-kv.gguf")
shutil.rmtree(folder, ignore_errors=True)
subprocess.run([sys.executable, os.path.join(root, "scripts", "llama2c_to_hf.py"),
                ckpt, folder, "--tokenizer", tok, "--gguf", gguf], check=True)


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack_from("<Q", data, 0)
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__")
    out = {}
    for name, e in header.items():
        assert e["dtype"] == "F32", e
        b, end = e["data_offsets"]
        count = (end - b) // 4
        out[name] = (e["shape"], struct.unpack_from("<%df" % count, data,
                                                    8 + n + b))
    return meta, out


def read_llama2c(path):
    with open(path, "rb") as f:
        data = f.read()
    h = struct.unpack_from("<7i", data, 0)
    w = struct.unpack_from("<%df" % ((len(data) - 28) // 4), data, 28)
    return h, w


def run(*args, ok=True):
    p = subprocess.run([kvq_run] + list(args), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    if ok:
        assert p.returncode == 0, (args, p.stderr)
    return p


(dim, hidden, layers, heads, kv_heads, vocab, seq_len), W = read_llama2c(ckpt)
hd = dim // heads
kv_dim = kv_heads * hd
assert (dim, layers, heads, kv_heads) == (64, 5, 8, 4)

ids = [1, 403, 407, 261, 378, 442, 259, 1, 17, 302, 455, 95, 30, 2, 511, 300]
ids_file = os.path.join(scratch, "dump-kv-ids.txt")
with open(ids_file, "w") as f:
    f.write(" ".join(map(str, ids)) + "\n" + "5 6 7\n")


def dump(model, name, *extra):
    path = os.path.join(scratch, name)
    if os.path.exists(path):
        os.remove(path)
    out = run(model, "--dump-kv", path, *extra).stdout
    assert "layout lthd" in out, out
    return read_safetensors(path), path


def angle(pos, i):
    return pos * 10000.0 ** (-2.0 * i / hd)


def rotate(row, pos, half):
    """One head's channels rotated by RoPE at pos."""
    out = list(row)
    for i in range(hd // 2):
        a, b = (i, i + hd // 2) if half else (2 * i, 2 * i + 1)
        c, s = math.cos(angle(pos, i)), math.sin(angle(pos, i))
        out[a] = row[a] * c - row[b] * s
        out[b] = row[a] * s + row[b] * c
    return out


def close(x, y, tol, what):
    worst = max(abs(a - b) for a, b in zip(x, y))
    scale = max(1.0, max(abs(a) for a in x))
    assert len(x) == len(y) and worst <= tol * scale, (what, worst, scale)
    return worst


def check_rope(t, half, what):
    """Every layer's keys are its pre-RoPE keys rotated at 0, 1, 2, ..."""
    shape, post = t["keys"]
    _, pre = t["keys_pre_rope"]
    L, T, H, D = shape
    worst = 0
    for l in range(L):
        for p in range(T):
            for h in range(H):
                at = ((l * T + p) * H + h) * D
                worst = max(worst, close(post[at:at + D],
                                         rotate(pre[at:at + D], p, half),
                                         2e-5, (what, l, p, h)))
    return worst


# The llama2.c file on token ids: layer 0 recomputed from the floats.
(meta, t), path_ids = dump(ckpt, "dump-kv-ids.safetensors", "--tokens",
                           ids_file)
assert meta["layout"] == "lthd" and meta["rope_style"] == "interleaved", meta
assert [int(x) for x in meta["token_ids"].split()] == ids, meta
T = len(ids)
assert t["keys"][0] == t["values"][0] == t["keys_pre_rope"][0] == \
    [layers, T, kv_heads, hd], {k: v[0] for k, v in t.items()}
assert t["queries"][0] == [layers, T, heads, hd]
emb, attn_norm = 0, vocab * dim
wq = attn_norm + layers * dim
wk = wq + layers * dim * dim
wv = wk + layers * kv_dim * dim


def matvec(base, rows, x):
    return [sum(W[base + r * dim + c] * x[c] for c in range(dim))
            for r in range(rows)]


for p, token in enumerate(ids):
    x = W[emb + token * dim:emb + (token + 1) * dim]
    r = 1 / math.sqrt(sum(v * v for v in x) / dim + 1e-5)
    xb = [x[i] * r * W[attn_norm + i] for i in range(dim)]
    k, v, q = matvec(wk, kv_dim, xb), matvec(wv, kv_dim, xb), \
        matvec(wq, dim, xb)
    q = sum((rotate(q[h * hd:(h + 1) * hd], p, False) for h in range(heads)),
            [])
    close(k, t["keys_pre_rope"][1][p * kv_dim:(p + 1) * kv_dim], 1e-5,
          ("pre-RoPE keys", p))
    close(v, t["values"][1][p * kv_dim:(p + 1) * kv_dim], 1e-5, ("values", p))
    close(q, t["queries"][1][p * dim:(p + 1) * dim], 1e-5, ("queries", p))
print("layer 0 recomputed: keys, values, queries match")
print("RoPE (llama2.c): worst %.3g" % check_rope(t, False, "llama2.c"))

# The same ids through the Hugging Face folder and the GGUF file.
(meta_hf, t_hf), _ = dump(folder, "dump-kv-hf.safetensors", "--tokens",
                          ids_file)
assert meta_hf["rope_style"] == "half", meta_hf
print("RoPE (folder): worst %.3g" % check_rope(t_hf, True, "folder"))
for name in ("keys", "keys_pre_rope"):
    a, b = t[name][1], t_hf[name][1]
    # Folder channel i <-> llama2.c channel 2i, i + hd/2 <-> 2i + 1.
    perm = [2 * i for i in range(hd // 2)] + [2 * i + 1 for i in range(hd // 2)]
    close(a, [b[(j // hd) * hd + perm.index(j % hd)] for j in range(len(b))],
          1e-4, ("folder", name))
close(t["values"][1], t_hf["values"][1], 1e-4, "folder values")
(meta_g, t_g), _ = dump(gguf, "dump-kv-gguf.safetensors", "--tokens",
                        ids_file)
assert meta_g["rope_style"] == "interleaved", meta_g
for name in t:
    assert t_g[name] == t[name], ("gguf", name)

# Generation: the prompt and its greedy continuation; kvq-eval reads it.
(meta_gen, t_gen), path_gen = dump(ckpt, "dump-kv-gen.safetensors",
                                   "--tokenizer", tok, "--steps", "30")
T_gen = int(meta_gen["tokens"])
assert 20 < T_gen <= 31 + 10, meta_gen
check_rope(t_gen, False, "generation")
for extra in ([], ["--pre-rope", "--rope-style", "interleaved"]):
    keys = path_gen + (":keys_pre_rope" if extra else ":keys")
    p = subprocess.run([kvq_eval, "--keys", keys, "--values",
                        path_gen + ":values", "--queries", path_gen,
                        "--layout", "lthd", "--method", "kivi", "--bits",
                        "4", "--prefill", "8", "--json"] + extra,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True)
    assert p.returncode == 0, p.stderr
    j = json.loads(p.stdout)
    assert (j["layers"], j["kv_heads"], j["q_heads"], j["head_dim"],
            j["tokens"]) == (layers, kv_heads, heads, hd, T_gen), j
    assert bool(extra) == ((j["rope"] or {}).get("style") == "interleaved"), j

# Bad input: one line, exit 2, nothing written.
for args, message in (
        (["--dump-kv", os.path.join(scratch, "no-such-dir", "x.safetensors")],
         "cannot write"),
        (["--dump-kv", os.path.join(scratch, "x.safetensors"), "--method",
          "kivi"], "--method must be none")):
    p = run(ckpt, "--tokenizer", tok, *args, ok=False)
    assert p.returncode == 2 and message in p.stderr and \
        len(p.stderr.strip().splitlines()) == 1, (args, p.stderr)
print("dump-kv: ok")
