#!/bin/sh
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# kvq-run --perplexity --json on the first two eval.txt stories: the output
# is JSON with every documented field and finite perplexities.
#   kvq_run_json_test.sh KVQ_RUN MODEL_DIR SCRATCH_DIR PYTHON
set -eu
kvq_run=$1 model_dir=$2 scratch=$3 python=${4:-python3}
eval_file=$scratch/eval2.txt
out=$scratch/kvq_run_perplexity.json
head -2 "$model_dir/eval.txt" > "$eval_file"
"$kvq_run" "$model_dir/stories260K.bin" --perplexity "$eval_file" \
  --method fp16,kivi --prefill 64 --json > "$out"
"$python" -c '
import json, math, sys
d = json.load(sys.stdin)
assert d["documents"] == 2, d["documents"]
assert d["prompt_tokens"] == 64, d["prompt_tokens"]
assert d["decoded_tokens"] > 0, d["decoded_tokens"]
rows = d["results"]
# "none" (the reference) is added first when not asked for.
assert [r["method"] for r in rows] == ["none", "fp16", "kivi"], rows
for r in rows:
    for k in ("method", "effective_bits", "cache_bytes", "perplexity",
              "ppl_stderr", "delta_perplexity", "tokens_per_second", "cache"):
        assert k in r, (k, r)
    assert r["ppl_stderr"] > 0, r
    assert math.isfinite(r["perplexity"]) and r["perplexity"] > 1, r
    assert math.isfinite(r["delta_perplexity"]), r
    assert r["tokens_per_second"] > 0, r
    assert r["cache_bytes"] > 0, r
base = rows[0]["perplexity"]
for r in rows:
    assert abs(r["delta_perplexity"] - (r["perplexity"] - base)) < 1e-5, r
fp16, kivi = rows[1], rows[2]
assert abs(fp16["effective_bits"] - 16) < 1e-3, fp16
assert kivi["effective_bits"] < 16 and kivi["cache_bytes"] < fp16["cache_bytes"], kivi
assert abs(fp16["perplexity"] / base - 1) < 1e-3, (fp16, base)
print("ok:", ", ".join("%s %.4f" % (r["method"], r["perplexity"]) for r in rows))
' < "$out"
