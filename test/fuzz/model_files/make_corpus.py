#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Writes the seed corpora of fuzz_llama2c (llama2c/) and fuzz_tokenizer
(tokenizer/) next to this script. Run it again after changing it; the
files are checked in."""
import os
import shutil
import struct

here = os.path.dirname(os.path.abspath(__file__))


def floats(n, start=0.0):
    return struct.pack("<%df" % n, *[start + 0.01 * i for i in range(n)])


def checkpoint(dim, hidden, layers, heads, kv_heads, vocab, seq_len,
               shared=True):
    """A checkpoint of that shape: llama2.c's weight arrays in file order."""
    head_dim = dim // heads
    kv_dim = kv_heads * head_dim
    n = (vocab * dim + layers * dim + layers * dim * dim +
         2 * layers * kv_dim * dim + layers * dim * dim + layers * dim +
         3 * layers * hidden * dim + dim + seq_len * head_dim)
    if not shared:
        n += vocab * dim
    header = struct.pack("<7i", dim, hidden, layers, heads, kv_heads,
                         vocab if shared else -vocab, seq_len)
    return header + floats(n)


def write(directory, name, data):
    os.makedirs(os.path.join(here, directory), exist_ok=True)
    with open(os.path.join(here, directory, name), "wb") as f:
        f.write(data)


tiny = checkpoint(4, 4, 1, 2, 1, 4, 2)
write("llama2c", "tiny", tiny)
write("llama2c", "tiny_gqa_2layers", checkpoint(8, 6, 2, 4, 2, 5, 3))
write("llama2c", "tiny_separate_classifier",
      checkpoint(4, 4, 1, 2, 1, 4, 2, shared=False))
write("llama2c", "bad_trailing", tiny + b"\0\0\0\0")
write("llama2c", "bad_truncated", tiny[:-4])
nan = bytearray(tiny)
struct.pack_into("<f", nan, 28 + 4 * 20, float("nan"))
write("llama2c", "bad_nan_weight", bytes(nan))
write("llama2c", "bad_header_only", tiny[:28])
write("llama2c", "bad_odd_head_dim", checkpoint(6, 4, 1, 2, 1, 4, 2))

# Tokenizers: max_token_length, then per token score, length, bytes.
def tokenizer(pieces, max_len=None):
    if max_len is None:
        max_len = max(len(p) for p, _ in pieces)
    out = struct.pack("<i", max_len)
    for piece, score in pieces:
        out += struct.pack("<fi", score, len(piece)) + piece
    return out


small = [(b"<unk>", 0.0), (b"\n<s>\n", 0.0), (b"\n</s>\n", 0.0)]
small += [(("<0x%02X>" % b).encode(), 0.0) for b in range(256)]
small += [(b" ", -1.0), (b"a", -2.0), (b" a", -0.5), (b"aa", -0.7)]
write("tokenizer", "small", tokenizer(small))
write("tokenizer", "three", tokenizer(small[:3]))
write("tokenizer", "bad_length", tokenizer(small[:3], max_len=2))
write("tokenizer", "bad_truncated", tokenizer(small[:3])[:-3])
shutil.copyfile(
    os.path.join(here, "..", "..", "..", "models", "stories260K", "tok512.bin"),
    os.path.join(here, "tokenizer", "tok512.bin"))
