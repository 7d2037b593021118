#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""A llama2.c checkpoint as a Hugging Face LlamaForCausalLM folder.

    llama2c_to_hf.py MODEL.bin OUT_DIR [--dtype f32|f16|bf16] [--shards N]
                     [--tokenizer TOK.bin]
                     [--gguf FILE [--gguf-type f32|f16|q8_0|q4_0]]

Writes OUT_DIR/config.json and OUT_DIR/model.safetensors (or N shards
model-0000i-of-0000N.safetensors and model.safetensors.index.json), the way
Hugging Face's conversion script lays a Llama out: tensor names
model.layers.{i}.self_attn.q_proj.weight and so on, and the rows of q_proj
and k_proj permuted within each head so that Hugging Face's half-split
RoPE (channel c paired with c + head_dim/2) computes what llama2.c's
interleaved RoPE (channels 2i, 2i+1) computes: row 2i + s of a head moves
to s * head_dim/2 + i. --tokenizer writes a llama2.c tokenizer file as the
folder's tokenizer.json, as Hugging Face writes a SentencePiece BPE (Llama
2's): the pieces with "\u2581" for spaces, <unk>, <s>, </s> and the
<0xNN> byte-fallback tokens, and the merges of every piece into two pieces,
ranked by the merged piece's score. --gguf also writes llama.cpp's GGUF
(see write_gguf), with the --tokenizer vocabulary embedded. Python 3 standard library only.
"""
import argparse
import json
import os
import struct
import sys


def read_llama2c(path):
    with open(path, "rb") as f:
        data = f.read()
    dim, hidden, layers, heads, kv_heads, vocab, seq_len = struct.unpack_from(
        "<7i", data, 0)
    shared = vocab > 0
    vocab = abs(vocab)
    head_dim = dim // heads
    kv_dim = kv_heads * head_dim
    floats = (len(data) - 28) // 4
    w = struct.unpack_from("<%df" % floats, data, 28)
    at = 0

    def take(n):
        nonlocal at
        out = w[at:at + n]
        if len(out) != n:
            sys.exit("llama2c_to_hf: %s is truncated" % path)
        at += n
        return out

    t = {}
    t["embedding"] = take(vocab * dim)
    t["attn_norm"] = take(layers * dim)
    t["wq"] = take(layers * dim * dim)
    t["wk"] = take(layers * kv_dim * dim)
    t["wv"] = take(layers * kv_dim * dim)
    t["wo"] = take(layers * dim * dim)
    t["ffn_norm"] = take(layers * dim)
    t["w1"] = take(layers * hidden * dim)
    t["w2"] = take(layers * dim * hidden)
    t["w3"] = take(layers * hidden * dim)
    t["final_norm"] = take(dim)
    take(seq_len * head_dim)  # the two legacy RoPE tables, unused
    if not shared:
        t["classifier"] = take(vocab * dim)
    if at != floats:
        sys.exit("llama2c_to_hf: %s has bytes after its weights" % path)
    config = dict(dim=dim, hidden=hidden, layers=layers, heads=heads,
                  kv_heads=kv_heads, vocab=vocab, seq_len=seq_len,
                  shared=shared)
    return config, t


def to_half_split(rows, heads, head_dim, cols):
    """Hugging Face's permute(): interleaved pair rows to half-split."""
    out = [None] * (heads * head_dim)
    for h in range(heads):
        for i in range(head_dim // 2):
            for s in range(2):
                src = h * head_dim + 2 * i + s
                dst = h * head_dim + s * (head_dim // 2) + i
                out[dst] = rows[src * cols:(src + 1) * cols]
    return [x for r in out for x in r]


def encode(values, dtype):
    if dtype == "F32":
        return struct.pack("<%df" % len(values), *values)
    if dtype == "F16":
        return struct.pack("<%de" % len(values), *values)
    # BF16: the high half of the f32 bits, rounded to nearest even.
    bits = struct.unpack("<%dI" % len(values),
                         struct.pack("<%df" % len(values), *values))
    out = []
    for b in bits:
        out.append((b + 0x7FFF + ((b >> 16) & 1)) >> 16 & 0xFFFF)
    return struct.pack("<%dH" % len(out), *out)


def write_safetensors(path, tensors, dtype):
    """tensors: list of (name, shape, flat values)."""
    header = {}
    blobs = []
    at = 0
    for name, shape, values in tensors:
        blob = encode(values, dtype)
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [at, at + len(blob)]}
        blobs.append(blob)
        at += len(blob)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)


def read_tokenizer(tok_path):
    """A llama2.c tokenizer file: its pieces and scores."""
    with open(tok_path, "rb") as f:
        data = f.read()
    at = 4  # max_token_length
    pieces, scores = [], []
    while at < len(data):
        score, n = struct.unpack_from("<fi", data, at)
        at += 8
        pieces.append(data[at:at + n].decode("utf-8"))
        scores.append(score)
        at += n
    return pieces, scores


def write_tokenizer_json(tok_path, out_path):
    pieces, scores = read_tokenizer(tok_path)
    specials = ["<unk>", "<s>", "</s>"]
    vocab = {}
    for i, p in enumerate(pieces):
        name = specials[i] if i < 3 else p.replace(" ", "\u2581")
        vocab.setdefault(name, i)
    # Every split of a normal piece into two normal pieces is a merge,
    # ranked by the merged piece's score (then the halves' ids).
    normal = {p: i for i, p in enumerate(pieces) if i >= 259}
    merges = []
    for p, i in normal.items():
        for k in range(1, len(p)):
            a, b = p[:k], p[k:]
            if a in normal and b in normal:
                merges.append((-scores[i], normal[a], normal[b], a, b))
    merges.sort()
    meta = lambda s: s.replace(" ", "\u2581")
    tok = {
        "version": "1.0",
        "added_tokens": [{"id": i, "content": specials[i], "single_word": False,
                          "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True}
                         for i in range(3)],
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "\u2581"},
            {"type": "Replace", "pattern": {"String": " "},
             "content": "\u2581"}]},
        "pre_tokenizer": None,
        "post_processor": {"type": "TemplateProcessing", "single": [
            {"SpecialToken": {"id": "<s>", "type_id": 0}},
            {"Sequence": {"id": "A", "type_id": 0}}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>",
                  "fuse_unk": True, "byte_fallback": True, "vocab": vocab,
                  "merges": ["%s %s" % (meta(a), meta(b))
                             for _, _, _, a, b in merges]},
    }
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(tok, f, ensure_ascii=False, indent=1)
        f.write("\n")


def gguf_string(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def quantize(values, kind):
    """GGUF blocks of 32: an f16 scale then int8 (Q8_0) or nibble codes."""
    out = bytearray()
    for b in range(0, len(values), 32):
        x = values[b:b + 32]
        if kind == 8:  # Q8_0
            d = max(abs(v) for v in x) / 127
            inv = 1 / d if d else 0
            out += struct.pack("<e", d)
            out += struct.pack("<32b", *[int(round(v * inv)) for v in x])
        else:  # Q4_0: the value of largest magnitude maps to -8
            m = max(x, key=abs)
            d = m / -8
            inv = 1 / d if d else 0
            q = [min(15, int(v * inv + 8.5)) for v in x]
            out += struct.pack("<e", d)
            out += bytes(q[j] | q[j + 16] << 4 for j in range(16))
    return bytes(out)


def write_gguf(path, c, tensors, kind, vocab=None):
    """llama.cpp's GGUF (version 3, architecture llama): its tensor names,
    dims innermost first, q/k rows in llama2.c's interleaved order (as
    llama.cpp stores llama). kind: 0 F32, 1 F16, 8 Q8_0, 2 Q4_0; a tensor
    whose rows are not whole blocks of 32 stays F32. vocab, (pieces, scores)
    of a llama2.c tokenizer, is embedded as tokenizer.ggml.* of model
    "llama": "\u2581" for spaces, <unk> <s> </s> first, token types
    unknown, control, byte (<0xNN>) and normal."""
    u32, i32, f32, boolean, string, array = 4, 5, 6, 7, 8, 9
    kvs = [("general.architecture", string, "llama"),
           ("general.alignment", u32, 32),
           ("llama.context_length", u32, c["seq_len"]),
           ("llama.embedding_length", u32, c["dim"]),
           ("llama.block_count", u32, c["layers"]),
           ("llama.feed_forward_length", u32, c["hidden"]),
           ("llama.attention.head_count", u32, c["heads"]),
           ("llama.attention.head_count_kv", u32, c["kv_heads"]),
           ("llama.attention.layer_norm_rms_epsilon", f32, 1e-5),
           ("llama.rope.freq_base", f32, 10000.0),
           ("llama.rope.dimension_count", u32, c["dim"] // c["heads"])]
    if vocab:
        pieces, scores = vocab
        specials = ["<unk>", "<s>", "</s>"]
        tokens = [specials[i] if i < 3 else p.replace(" ", "\u2581")
                  for i, p in enumerate(pieces)]
        types = [2 if i == 0 else 3 if i < 3 else
                 6 if len(p) == 6 and p.startswith("<0x") and p.endswith(">")
                 else 1 for i, p in enumerate(pieces)]
        kvs += [("tokenizer.ggml.model", string, "llama"),
                ("tokenizer.ggml.tokens", array, (string, tokens)),
                ("tokenizer.ggml.scores", array, (f32, scores)),
                ("tokenizer.ggml.token_type", array, (i32, types)),
                ("tokenizer.ggml.bos_token_id", u32, 1),
                ("tokenizer.ggml.eos_token_id", u32, 2),
                ("tokenizer.ggml.unknown_token_id", u32, 0),
                ("tokenizer.ggml.add_bos_token", boolean, True)]

    def scalar(t, v):
        return (gguf_string(v) if t == string else
                struct.pack({f32: "<f", i32: "<i", boolean: "<?"}.get(t, "<I"),
                            v))

    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs))
    for key, t, v in kvs:
        head += gguf_string(key) + struct.pack("<I", t)
        if t == array:
            el, items = v
            head += struct.pack("<IQ", el, len(items))
            head += b"".join(scalar(el, x) for x in items)
        else:
            head += scalar(t, v)
    blobs, infos, at = [], b"", 0
    for name, shape, values in tensors:
        dims = list(reversed(shape))
        k = kind if dims[0] % 32 == 0 or kind in (0, 1) else 0
        blob = (struct.pack("<%df" % len(values), *values) if k == 0 else
                struct.pack("<%de" % len(values), *values) if k == 1 else
                quantize(values, k))
        infos += gguf_string(name) + struct.pack("<I", len(dims))
        infos += struct.pack("<%dQ" % len(dims), *dims)
        infos += struct.pack("<IQ", k, at)
        blob += b"\0" * (-len(blob) % 32)
        blobs.append(blob)
        at += len(blob)
    head += infos
    head += b"\0" * (-len(head) % 32)
    with open(path, "wb") as f:
        f.write(head)
        for blob in blobs:
            f.write(blob)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("out_dir")
    ap.add_argument("--dtype", choices=["f32", "f16", "bf16"], default="f32")
    ap.add_argument("--shards", type=int, default=1)
    ap.add_argument("--tokenizer")
    ap.add_argument("--gguf", metavar="FILE",
                    help="also write the model as llama.cpp's GGUF")
    ap.add_argument("--gguf-type", choices=["f32", "f16", "q8_0", "q4_0"],
                    default="f32")
    args = ap.parse_args()
    c, t = read_llama2c(args.model)
    dim, hidden, layers = c["dim"], c["hidden"], c["layers"]
    heads, kv_heads = c["heads"], c["kv_heads"]
    head_dim = dim // heads
    kv_dim = kv_heads * head_dim

    def layer(name, i, n):
        return t[name][i * n:(i + 1) * n]

    tensors = [("model.embed_tokens.weight", [c["vocab"], dim],
                t["embedding"])]
    for i in range(layers):
        p = "model.layers.%d." % i
        tensors += [
            (p + "input_layernorm.weight", [dim], layer("attn_norm", i, dim)),
            (p + "self_attn.q_proj.weight", [dim, dim],
             to_half_split(layer("wq", i, dim * dim), heads, head_dim, dim)),
            (p + "self_attn.k_proj.weight", [kv_dim, dim],
             to_half_split(layer("wk", i, kv_dim * dim), kv_heads, head_dim,
                           dim)),
            (p + "self_attn.v_proj.weight", [kv_dim, dim],
             layer("wv", i, kv_dim * dim)),
            (p + "self_attn.o_proj.weight", [dim, dim],
             layer("wo", i, dim * dim)),
            (p + "post_attention_layernorm.weight", [dim],
             layer("ffn_norm", i, dim)),
            (p + "mlp.gate_proj.weight", [hidden, dim],
             layer("w1", i, hidden * dim)),
            (p + "mlp.down_proj.weight", [dim, hidden],
             layer("w2", i, dim * hidden)),
            (p + "mlp.up_proj.weight", [hidden, dim],
             layer("w3", i, hidden * dim)),
        ]
    tensors.append(("model.norm.weight", [dim], t["final_norm"]))
    if not c["shared"]:
        tensors.append(("lm_head.weight", [c["vocab"], dim], t["classifier"]))

    os.makedirs(args.out_dir, exist_ok=True)
    torch_dtype = {"f32": "float32", "f16": "float16",
                   "bf16": "bfloat16"}[args.dtype]
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": dim,
        "intermediate_size": hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "vocab_size": c["vocab"],
        "max_position_embeddings": c["seq_len"],
        "rms_norm_eps": 1e-05,
        "rope_theta": 10000.0,
        "rope_scaling": None,
        "hidden_act": "silu",
        "tie_word_embeddings": c["shared"],
        "attention_bias": False,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "torch_dtype": torch_dtype,
    }
    with open(os.path.join(args.out_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    dtype = {"f32": "F32", "f16": "F16", "bf16": "BF16"}[args.dtype]
    n = max(1, args.shards)
    if n == 1:
        write_safetensors(os.path.join(args.out_dir, "model.safetensors"),
                          tensors, dtype)
    else:
        weight_map = {}
        per = (len(tensors) + n - 1) // n
        for s in range(n):
            name = "model-%05d-of-%05d.safetensors" % (s + 1, n)
            part = tensors[s * per:(s + 1) * per]
            write_safetensors(os.path.join(args.out_dir, name), part, dtype)
            for tname, _, _ in part:
                weight_map[tname] = name
        with open(os.path.join(args.out_dir, "model.safetensors.index.json"),
                  "w") as f:
            json.dump({"metadata": {}, "weight_map": weight_map}, f, indent=2)
            f.write("\n")
    if args.gguf:
        names = {"model.embed_tokens.weight": "token_embd.weight",
                 "model.norm.weight": "output_norm.weight",
                 "lm_head.weight": "output.weight"}
        parts = {"input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q",
                 "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
                 "self_attn.o_proj": "attn_output",
                 "post_attention_layernorm": "ffn_norm",
                 "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
                 "mlp.down_proj": "ffn_down"}
        g = []
        for name, shape, values in tensors:
            if name in names:
                name = names[name]
            else:
                _, _, i, rest = name.split(".", 3)
                part = rest.rsplit(".", 1)[0]
                name = "blk.%s.%s.weight" % (i, parts[part])
                if part in ("self_attn.q_proj", "self_attn.k_proj"):
                    # Back to llama2.c's interleaved rows, as llama.cpp.
                    values = layer("wq" if "q_proj" in part else "wk",
                                   int(i), shape[0] * shape[1])
            g.append((name, shape, values))
        kind = {"f32": 0, "f16": 1, "q8_0": 8, "q4_0": 2}[args.gguf_type]
        write_gguf(args.gguf, c, g, kind,
                   read_tokenizer(args.tokenizer) if args.tokenizer else None)
    if args.tokenizer:
        write_tokenizer_json(args.tokenizer,
                             os.path.join(args.out_dir, "tokenizer.json"))


if __name__ == "__main__":
    main()
