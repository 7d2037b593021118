#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Writes a copy of a llama2.c checkpoint with some weights changed.

  llama2c_patch.py IN OUT [--set INDEX VALUE]... [--fill START COUNT VALUE]...
                   [--append BYTES]

INDEX and START count floats after the 28-byte header; VALUE is a Python
float ('nan', 'inf', '1e30'). --append adds zero bytes at the end.
"""
import struct
import sys


def main(argv):
    src, dst, rest = argv[1], argv[2], argv[3:]
    data = bytearray(open(src, "rb").read())

    def put(index, value):
        struct.pack_into("<f", data, 28 + 4 * index, value)

    i = 0
    while i < len(rest):
        if rest[i] == "--set":
            put(int(rest[i + 1]), float(rest[i + 2]))
            i += 3
        elif rest[i] == "--fill":
            start, count = int(rest[i + 1]), int(rest[i + 2])
            for k in range(count):
                put(start + k, float(rest[i + 3]))
            i += 4
        elif rest[i] == "--append":
            data += bytes(int(rest[i + 1]))
            i += 2
        else:
            sys.exit("llama2c_patch.py: unknown argument " + rest[i])
    open(dst, "wb").write(data)


if __name__ == "__main__":
    main(sys.argv)
