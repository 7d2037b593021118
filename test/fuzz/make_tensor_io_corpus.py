#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# ===- make_tensor_io_corpus.py - Seed corpus of fuzz_tensor_io ----------=== #
#
# Writes the small seed files of test/fuzz/tensor_io (no NumPy needed): valid
# .npy (f32, f16 with a version 2.0 header, f64, empty, a repeated key), .npz
# as np.savez writes it (stored members, ZIP64 local headers), .safetensors
# (F16/BF16/F32), and malformed inputs (shape without
# commas, overflowing shape, control bytes, fortran order, a deflate flag
# on stored bytes, bad offsets, an unsupported dtype), and deflated .npz
# members as np.savez_compressed writes them (dynamic and fixed codes,
# stored blocks). Run it again after changing a seed.
#
# ===--------------------------------------------------------------------=== #
import json
import os
import struct
import zlib

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tensor_io")


def npy(shape, descr, data, version=1, extra=""):
    s = "(" + ", ".join(str(x) for x in shape) + ("," if len(shape) == 1 else "") + ")"
    d = "{'descr': '%s', 'fortran_order': False, 'shape': %s, %s}" % (descr, s, extra)
    pre = 10 if version == 1 else 12
    d += " " * ((64 - (pre + len(d) + 1) % 64) % 64) + "\n"
    size = struct.pack("<H", len(d)) if version == 1 else struct.pack("<I", len(d))
    return b"\x93NUMPY" + bytes([version, 0]) + size + d.encode("latin1") + data


def f32(n):
    return b"".join(struct.pack("<f", (i % 7) - 3.5) for i in range(n))


def f16(n):
    return b"".join(struct.pack("<e", (i % 5) - 2.0) for i in range(n))


def f64(n):
    return b"".join(struct.pack("<d", i * 0.25) for i in range(n))


def deflate(data, level=6, strategy=zlib.Z_DEFAULT_STRATEGY):
    c = zlib.compressobj(level, zlib.DEFLATED, -15, 8, strategy)  # raw deflate
    return c.compress(data) + c.flush()


def zipfile(members, method=0, pack=None):
    """method 8 with pack=None: the deflate flag on stored bytes (malformed)."""
    z = b""
    cd = b""
    for name, data in members:
        name = (name + ".npy").encode()
        crc = zlib.crc32(data)
        packed = pack(data) if pack else data
        off = len(z)
        z += struct.pack("<IHHHHHIIIHH", 0x04034b50, 45, 0, method, 0, 0x21, crc,
                         0xffffffff, 0xffffffff, len(name), 20) + name
        z += struct.pack("<HHQQ", 1, 16, len(data), len(packed)) + packed
        cd += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014b50, 45, 45, 0, method, 0,
                          0x21, crc, len(packed), len(data), len(name), 0, 0, 0, 0,
                          0x01800000, off) + name
    return z + cd + struct.pack("<IHHHHIIH", 0x06054b50, 0, 0, len(members),
                                len(members), len(cd), len(z), 0)


def safetensors(tensors):
    h = {"__metadata__": {"format": "pt"}}
    data = b""
    for name, dt, shape, raw in tensors:
        h[name] = {"dtype": dt, "shape": shape,
                   "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    t = json.dumps(h).encode()
    t += b" " * ((8 - len(t) % 8) % 8)
    return struct.pack("<Q", len(t)) + t + data


files = {
    "npy_f32_thd": npy((4, 2, 8), "<f4", f32(64)),
    "npy_f16_v2": npy((3, 2, 4), "<f2", f16(24), version=2),
    "npy_f64_1d": npy((5,), "<f8", f64(5)),
    "npy_empty": npy((0, 2, 4), "<f4", b""),
    "npy_dup_key": npy((2, 2, 2), "<f4", f32(8), extra="'shape': (2, 2, 2), "),
    "npy_no_commas": b"\x93NUMPY\x01\x00" + struct.pack("<H", 60) +
                     b"{'descr': '<f4', 'fortran_order': False, 'shape': (2 2 2)}\n",
    "npy_overflow": npy((17179869184, 1073741824, 1), "<f4", b"\0" * 16),
    "npy_escape": npy((1,), "<f4\x1b[0m", b"\0" * 4),
    "npy_fortran": npy((2, 2), "<f4", f32(4)).replace(b"False", b"True "),
    "npz_kvq": zipfile([("keys", npy((4, 1, 4), "<f4", f32(16))),
                        ("values", npy((4, 1, 4), "<f2", f16(16))),
                        ("queries", npy((4, 2, 4), "<f4", f32(32)))]),
    "npz_deflated_flag": zipfile([("k", npy((2, 1, 2), "<f4", f32(4)))], method=8),
    # np.savez_compressed's members: dynamic codes (zlib's default), fixed
    # codes and stored blocks inside a deflate stream.
    "npz_deflated": zipfile([("keys", npy((4, 1, 4), "<f4", f32(16))),
                             ("values", npy((4, 1, 4), "<f2", f16(16)))],
                            method=8, pack=deflate),
    "npz_deflated_fixed": zipfile([("k", npy((3, 1, 4), "<f4", f32(12)))], method=8,
                                  pack=lambda d: deflate(d, 6, zlib.Z_FIXED)),
    "npz_deflated_stored": zipfile([("k", npy((3, 1, 4), "<f4", f32(12)))], method=8,
                                   pack=lambda d: deflate(d, 0)),
    "st_f16_bf16": safetensors([("keys", "F16", [2, 1, 4], f16(8)),
                                ("values", "BF16", [2, 1, 4], b"\x80\x3f" * 8),
                                ("queries", "F32", [2, 1, 4], f32(8))]),
    "st_bad_offsets": safetensors([("k", "F32", [2, 2], f32(4))])[:-3],
    "st_i8": safetensors([("k", "I8", [4], b"\x01\x02\x03\x04")]),
}
os.makedirs(out, exist_ok=True)
for name, data in files.items():
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)
print("%d seeds, %d bytes in %s" % (len(files), sum(map(len, files.values())), out))
