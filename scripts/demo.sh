#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# The demo (./kvq.sh demo runs it after building).
#  1. A real model: stories260K (models/stories260K/, MIT) compiled by kvq-run
#     for every cache method -- kvq-import, --kvq-quantize-kv-cache,
#     --kvq-to-llvm, JIT -- the same greedy continuation per method, then the
#     perplexity table on models/stories260K/eval.txt (how it was made:
#     models/README.md).
#  2. The synthetic-stream table of the example decoder layer.
# Usage: scripts/demo.sh BUILD_DIR
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$here/build}"
model="$here/models/stories260K/stories260K.bin"
methods="fp16,kivi,kivi_sink,kvquant,kvquant{refit-interval=0}"
# Pre-RoPE keys (--kvq-quantize-kv-cache="pre-rope=true"): the cache stores
# each key before its RoPE and rotates it inside attention.
rope="kvquant{refit-interval=0 pre-rope=true}"
rope_table="kivi{pre-rope=true},kvquant{pre-rope=true},$rope,kvquant{bits=2},kvquant{bits=2 pre-rope=true}"

printf '\n== 1a. stories260K, greedy continuation per KV-cache method\n'
"$build/bin/kvq-run" "$model" --prompt "Once upon a time, there was a little dog" \
  --steps 48 --method "$methods,$rope"

printf '\n== 1b. stories260K perplexity per KV-cache method\n'
printf '   (kivi, kivi_sink: 2-bit, 5 sinks; kvquant: 3-bit with the default\n'
printf '    refit every 128 tokens, and with the seed'"'"'s frozen levels;\n'
printf '    {pre-rope=true}: keys stored before their RoPE, rotated in attention)\n\n'
"$build/bin/kvq-run" "$model" --perplexity "$here/models/stories260K/eval.txt" \
  --method "$methods,$rope_table" 2>/dev/null

# The build compiled examples/decoder_layer.mlir once per method (see
# examples/CMakeLists.txt):
#   kvq-opt decoder_layer.mlir --kvq-configure-caches="method=<m> ..." --kvq-to-llvm
#   | mlir-translate --mlir-to-llvmir | llc -filetype=obj | cc -shared
printf '\n== 2. The example decoder layer on a synthetic K/V stream\n'
exec "$build/bin/kvq-demo" --graphs "$build/examples"
