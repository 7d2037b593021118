#!/bin/sh
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# kvq-run --bench --json on stories260K, tiny: every documented field is
# there and the derived ones follow from the measured ones (rest = step -
# dense - attention, bytes = weights + cache, GB/s and tokens/s from the
# step, the prefill's rates from its time). A check of the report, never of
# a speed.
#   kvq_run_bench_test.sh KVQ_RUN MODEL_DIR SCRATCH_DIR PYTHON
set -eu
kvq_run=$1 model_dir=$2 scratch=$3 python=${4:-python3}
out=$scratch/kvq_run_bench.json
"$kvq_run" "$model_dir/stories260K.bin" --bench --json --method fp16,kivi \
  --contexts 32,64 --bench-steps 2 --prefill 16 > "$out"
"$python" -c '
import json, math, sys
d = json.load(sys.stdin)
c = d["config"]
# Where and when (tools/common/run_info.h).
assert isinstance(d["version"], str) and d["machine"]["cores"] >= 1, d
assert d["commit"] == (d["version"].split("+g", 1)[1] if "+g" in d["version"] else None), d
assert d["machine"]["cpu"] and d["machine"]["date"].endswith("Z"), d
assert d["load_average"]["start"] >= 0 and d["load_average"]["end"] >= 0, d
assert d["threads"] == 1 and d["repetitions"] == 2, d
assert d["read_gbps"] > 0, d
# The dense layers of one token: 4 bytes per weight of every projection,
# the FFN and the classifier, from the header alone.
dim, hid, kv = c["dim"], c["hidden_dim"], c["dim"] * c["kv_heads"] // c["heads"]
weights = c["layers"] * (2 * dim * dim + 2 * kv * dim + 3 * hid * dim) + c["vocab"] * dim
assert d["weight_bytes"] == 4 * weights, (d["weight_bytes"], 4 * weights)
rows = d["rows"]
assert [(r["method"], r["context"]) for r in rows] == [
    ("fp16", 32), ("fp16", 64), ("kivi", 32), ("kivi", 64)], rows
for r in rows:
    for k in ("step_ms", "dense_ms", "attention_ms", "rest_ms", "cache_bytes",
              "bytes_read", "gbps", "vs_bound", "tokens_per_second"):
        assert k in r and math.isfinite(r[k]), (k, r)
    assert r["step_ms"] > 0 and r["dense_ms"] > 0 and r["attention_ms"] > 0, r
    assert abs(r["rest_ms"] - (r["step_ms"] - r["dense_ms"] - r["attention_ms"])) < 2e-3, r
    assert r["cache_bytes"] > 0, r
    assert r["bytes_read"] == d["weight_bytes"] + r["cache_bytes"], r
    s = r["step_ms"] / 1e3
    # Relative error of a rate from the printed time (4 decimals of ms).
    rel = 0.5e-4 / r["step_ms"] + 1e-4
    assert abs(r["gbps"] - r["bytes_read"] / s / 1e9) <= 0.01 + rel * r["gbps"], r
    assert abs(r["tokens_per_second"] - 1 / s) <= 0.01 + rel / s, r
    # gbps is printed with 2 decimals: under a slow (sanitized) build it is
    # a few tenths, and its rounding alone moves the ratio by 0.005 / gbps.
    assert abs(r["vs_bound"] - d["read_gbps"] / r["gbps"]) <= \
        (0.01 + 0.005 / r["gbps"]) * r["vs_bound"] + 2e-3, r
# fp16 holds 2 bytes per K and V element; kivi fewer at the same context.
for ctx in (32, 64):
    f, k = [r for r in rows if r["context"] == ctx]
    assert f["cache_bytes"] >= ctx * c["layers"] * kv * 2 * 2, f
    assert k["cache_bytes"] < f["cache_bytes"], (k, f)
pre = d["prefill"]
assert [p["method"] for p in pre] == ["fp16", "kivi"], pre
flops = 2 * (16 * (weights - c["vocab"] * dim) + c["vocab"] * dim)
for p in pre:
    assert p["tokens"] == 16 and p["ms"] > 0, p
    t = p["ms"] / 1e3
    rel = 0.5e-4 / p["ms"] + 1e-4 # the printed time has 4 decimals of ms
    assert abs(p["tokens_per_second"] - 16 / t) <= 0.01 + rel * 16 / t, p
    assert abs(p["dense_gflops"] - flops / t / 1e9) <= 0.01 + rel * flops / t / 1e9, p
print("ok: read bound %.1f GB/s, fp16 step %.3f ms" % (d["read_gbps"], rows[0]["step_ms"]))
' < "$out"
