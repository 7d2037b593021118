#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""stories260K as a Hugging Face folder and as GGUF gives what the llama2.c
file gives.

    hf_stories_test.py KVQ_RUN SOURCE_ROOT SCRATCH_DIR

scripts/llama2c_to_hf.py converts models/stories260K (q_proj / k_proj rows
permuted for the half-split RoPE); kvq-run on the folder and on the
llama2.c file must print the same greedy story and the same perplexity
table (to rounding: the dot products add the channels in another order).
The GGUF conversion (f32, llama.cpp's interleaved q/k rows) must give the
llama2.c results exactly, with its embedded vocabulary as with tok512.bin;
its Q8_0 and Q4_0 conversions must stay close.
"""
import json
import os
import shutil
import subprocess
import sys

kvq_run, root, scratch = sys.argv[1:4]
models = os.path.join(root, "models", "stories260K")
ckpt = os.path.join(models, "stories260K.bin")
folder = os.path.join(scratch, "stories260K-hf")
shutil.rmtree(folder, ignore_errors=True)
script = os.path.join(root, "scripts", "llama2c_to_hf.py")
gguf = {}
for kind in ("f32", "f16", "q8_0", "q4_0"):
    gguf[kind] = os.path.join(scratch, "stories260K-%s.gguf" % kind)
    subprocess.run([sys.executable, script, ckpt, folder, "--tokenizer",
                    os.path.join(models, "tok512.bin"), "--gguf", gguf[kind],
                    "--gguf-type", kind], check=True)
tok = ["--tokenizer", os.path.join(models, "tok512.bin")]


def run(model, *args):
    return subprocess.run([kvq_run, model] + list(args), check=True,
                          stdout=subprocess.PIPE, text=True).stdout


story = run(ckpt, "--steps", "60", "--method", "none").splitlines()[0]
assert "Lily" in story, story  # the model's published greedy story
hf_story = run(folder, "--steps", "60", "--method", "none").splitlines()[0]
assert hf_story == story, (hf_story, story)

methods = "fp16,kivi,kivi{pre-rope=true}"
eval_txt = os.path.join(models, "eval.txt")
tables = [json.loads(run(m, "--perplexity", eval_txt, "--method", methods,
                         "--json")) for m in (ckpt, folder)]
a, b = (t["results"] for t in tables)
assert [r["method"] for r in a] == [r["method"] for r in b] == \
    ["none", "fp16", "kivi", "kivi{pre-rope=true}"], (a, b)
assert tables[0]["decoded_tokens"] == tables[1]["decoded_tokens"] > 2000
for x, y in zip(a, b):
    # Unquantized, only f32 summation order differs; the 2-bit codes of a
    # value near a rounding boundary may flip, hence the looser bound.
    tol = 1e-5 if x["method"] in ("none", "fp16") else 2e-3
    rel = abs(x["perplexity"] - y["perplexity"]) / x["perplexity"]
    assert rel <= tol, (x, y, rel)
    assert x["cache_bytes"] == y["cache_bytes"], (x, y)
# GGUF: f32 is the same model in the same channel order. Without
# --tokenizer (and no tokenizer file next to it) kvq-run uses the
# vocabulary the converter embedded: the same text must give the same ids,
# hence the same story and the same perplexity of eval.txt's text.
for name in ("tokenizer.json", "tok512.bin", "tokenizer.bin"):
    assert not os.path.exists(os.path.join(scratch, name)), name
g = json.loads(run(gguf["f32"], "--perplexity", eval_txt, "--method",
                   methods, "--json"))["results"]
for x, y in zip(a, g):
    assert abs(x["perplexity"] - y["perplexity"]) <= 1e-9 * x["perplexity"], \
        (x, y)
assert run(gguf["f32"], "--steps", "60", "--method", "none") \
    .splitlines()[0] == story
assert run(gguf["f32"], *tok, "--steps", "60", "--method", "none") \
    .splitlines()[0] == story
base = a[0]["perplexity"]
for kind, tol in (("f16", 1e-3), ("q8_0", 0.01), ("q4_0", 0.2)):
    table = json.loads(run(gguf[kind], *tok, "--perplexity", eval_txt,
                           "--method", "none", "--json"))
    # F16 weights stay f16 (2 bytes each); Q8_0 / Q4_0 are dequantized to f32.
    assert table["weight_type"] == ("f16" if kind == "f16" else "f32"), table
    q = table["results"][0]
    rel = abs(q["perplexity"] - base) / base
    assert 0 < rel <= tol, (kind, q["perplexity"], base)
    print("%s: perplexity %.4f (f32 %.4f)" % (kind, q["perplexity"], base))
# A bf16 folder: kvq-run keeps its weights in bf16 by default (the weight
# bytes it reports are the safetensors data, 2 bytes a weight, not an f32
# copy); --weight-type f32 widens them to the same values.
folder16 = os.path.join(scratch, "stories260K-hf-bf16")
shutil.rmtree(folder16, ignore_errors=True)
subprocess.run([sys.executable, script, ckpt, folder16, "--dtype", "bf16"],
               check=True)
st = os.path.join(folder16, "model.safetensors")
with open(st, "rb") as f:
    header_len = int.from_bytes(f.read(8), "little")
data_bytes = os.path.getsize(st) - 8 - header_len
kept, wide = (json.loads(run(folder16, *tok, "--perplexity", eval_txt,
                             "--method", "none", "--json", *extra))
              for extra in ([], ["--weight-type", "f32"]))
assert kept["weight_type"] == "bf16" and kept["weight_bytes"] == data_bytes, \
    (kept["weight_type"], kept["weight_bytes"], data_bytes)
assert wide["weight_type"] == "f32" and wide["weight_bytes"] >= 2 * data_bytes
p16, p32 = (r["results"][0]["perplexity"] for r in (kept, wide))
assert abs(p16 - p32) <= 1e-5 * p32, (p16, p32)
assert abs(p16 - base) <= 1e-3 * base, (p16, base)
print("bf16 folder: %d weight bytes, perplexity %.6f (f32 copy %.6f)"
      % (kept["weight_bytes"], p16, p32))
print("same story and perplexities:",
      ", ".join("%s %.6f/%.6f" % (x["method"], x["perplexity"], y["perplexity"])
                for x, y in zip(a, b)))
