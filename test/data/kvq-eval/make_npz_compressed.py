#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# ===- make_npz_compressed.py - NumPy-made inputs of kvq-eval's tests ----=== #
#
# Writes, with NumPy itself (np.save, np.savez, np.savez_compressed), the
# small dumps with which kvq_eval_tests check that other layouts and
# archives give the numbers of the equivalent [tokens, heads, dim] .npy
# files: 96 tokens x 2 KV heads x 32 dims of keys and values and 4 query
# heads, float32 in thd layout (k/v/q.npy, and k1/v1/q1.npy for a second
# layer), and the same data as a compressed .npz (long names), as float16
# in bhtd layout (batch 1) under the short names k/v/q, as htd .npy files,
# and both layers stacked [layers, batch, heads, tokens, dim] in an
# np.savez archive.
# Run with a Python that has NumPy; the outputs are checked in (the test
# machines need no NumPy).
#
# ===--------------------------------------------------------------------=== #
import os

import numpy as np

out = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(15)
k = rng.standard_normal((96, 2, 32)).astype(np.float32)
k[50] *= 25  # a high-norm token, as in the tests' own dumps
v = rng.standard_normal((96, 2, 32)).astype(np.float32)
q = (0.3 * rng.standard_normal((96, 4, 32))).astype(np.float32)

np.save(os.path.join(out, "k.npy"), k)
np.save(os.path.join(out, "v.npy"), v)
np.save(os.path.join(out, "q.npy"), q)
np.savez_compressed(os.path.join(out, "kvq_compressed.npz"),
                    keys=k, values=v, queries=q)
# [batch, heads, tokens, head_dim] float16, as a Hugging Face cache layer.
bhtd = lambda x: np.ascontiguousarray(x.transpose(1, 0, 2)[None].astype(np.float16))
np.savez_compressed(os.path.join(out, "kvq_compressed_f16_bhtd.npz"),
                    k=bhtd(k), v=bhtd(v), q=bhtd(q))
np.save(os.path.join(out, "k_f16.npy"), k.astype(np.float16))
np.save(os.path.join(out, "v_f16.npy"), v.astype(np.float16))
np.save(os.path.join(out, "q_f16.npy"), q.astype(np.float16))

# A second layer; the htd files of layer 0; both layers stacked (lbhtd).
k1 = rng.standard_normal((96, 2, 32)).astype(np.float32)
v1 = rng.standard_normal((96, 2, 32)).astype(np.float32)
q1 = (0.3 * rng.standard_normal((96, 4, 32))).astype(np.float32)
np.save(os.path.join(out, "k1.npy"), k1)
np.save(os.path.join(out, "v1.npy"), v1)
np.save(os.path.join(out, "q1.npy"), q1)
htd = lambda x: np.ascontiguousarray(x.transpose(1, 0, 2))
np.save(os.path.join(out, "k_htd.npy"), htd(k))
np.save(os.path.join(out, "v_htd.npy"), htd(v))
np.save(os.path.join(out, "q_htd.npy"), htd(q))
lbhtd = lambda a, b: np.stack([htd(a)[None], htd(b)[None]])
np.savez(os.path.join(out, "kvq_layers_lbhtd.npz"),
         keys=lbhtd(k, k1), values=lbhtd(v, v1), queries=lbhtd(q, q1))
