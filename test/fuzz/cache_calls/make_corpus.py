#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# ===- make_corpus.py - Seed corpus of fuzz_cache_calls ------------------=== #
#
# Writes test/fuzz/cache_calls/corpus/*: for each method a few configurations
# (bit widths, odd head_dim, GQA heads, residual modes, two layers, an
# allocator that fails once) with a call sequence that reaches every kind
# of call: prefill and decode updates (f32 and f16), attend, fetch, stats,
# sink positions, truncate inside and beyond the residual window, fork and
# save/load. Each seed is a config byte per selector of decodeConfig() in
# fuzz_cache_calls.cpp (an index into its option lists), four
# data-seed bytes, then the calls (opcode, then the bytes that call reads).
# Run it again after changing a seed.
#
# ===--------------------------------------------------------------------=== #
import os

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")

METHODS = {"fp16": 0, "kivi": 1, "kivi_sink": 2, "kvquant": 3}


def config(method, bits=0, heads=0, dim=0, group=0, residual=0, mode=0,
           sinks=0, outliers=0, lloyd=0, refit=0, kvq_sinks=0, misc=0,
           alloc=0, seed=1):
    # Indices into decodeConfig()'s lists (0 = the first option).
    return bytes([METHODS[method], bits, bits, heads, dim, group, residual,
                  mode, sinks, outliers, lloyd, refit, kvq_sinks, misc,
                  alloc]) + seed.to_bytes(4, "little")


def update(n, layer=0, kind=0, f16=False):
    return bytes([0, layer, n - 1, kind, 2 if f16 else 0])


def attend(nq, layer=0, per_kv=1, kind=0):
    return bytes([3, layer, nq - 1, per_kv - 1, kind])


def fetch(layer=0, f16=False):
    return bytes([4, layer, 0x84 if f16 else 0])  # 0x84 % 6 == 0: capacity = length


def stats(layer=0):
    return bytes([5, layer])


def sinks(layer=0, cap=4):
    return bytes([6, layer, cap + 1])


def truncate(which):
    # 0: length - 1, 1: length - 2, 2: half, 3: 0, 4: length, 5: length + 1
    return bytes([7, which])


FORK, SAVE_LOAD = bytes([8]), bytes([9])


def session(extra=b""):
    return (update(12) + update(1) + update(1) + attend(1) + attend(4, per_kv=2)
            + fetch() + fetch(f16=True) + stats() + stats(0xf0) + sinks()
            + truncate(0) + attend(2) + update(3) + FORK + update(2)
            + bytes([0x80 | 3, 0, 0, 0, 0]) + truncate(2) + SAVE_LOAD
            + update(1) + attend(1) + extra)


seeds = {}
for m in METHODS:
    seeds[m + "_default"] = config(m) + session()
    # 3-bit codes, head_dim 5 (codes start inside a byte), 2 KV heads.
    seeds[m + "_odd_dim"] = config(m, bits=1, heads=2, dim=4, residual=4,
                                   seed=7) + session(update(5, f16=True))
    # Block residual mode, group = d / 2, two layers, 8-bit.
    seeds[m + "_two_layers"] = config(m, bits=3, heads=0, dim=1, group=1,
                                      mode=1, misc=1, refit=1, seed=3) + (
        update(9) + update(7, layer=1) + attend(3, layer=1) + update(1)
        + fetch(layer=1) + stats(0xf0) + truncate(1) + attend(1)
        + truncate(3) + update(4, layer=1) + FORK + SAVE_LOAD)
    # The allocator fails its third call; huge and NaN data along the way.
    seeds[m + "_failing"] = config(m, alloc=130, residual=2, seed=11) + (
        update(6) + update(1) + update(2, kind=8 * 2) + update(2, kind=8 * 3)
        + update(3, kind=3) + update(2, kind=8 * 4) + fetch(f16=True)
        + attend(2, kind=249) + attend(2, kind=248) + truncate(5) + FORK)

os.makedirs(out, exist_ok=True)
for name, data in sorted(seeds.items()):
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)
print("wrote %d seeds to %s" % (len(seeds), out))
