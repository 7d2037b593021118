#!/usr/bin/env bash
# The demo: compile the example decoder layer for every kvq method.
# Usage: scripts/demo.sh BUILD_DIR
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$here/build}"
opt="$build/bin/kvq-opt"
graph="$here/examples/decoder_layer.mlir"

echo "kvq demo: examples/decoder_layer.mlir through kvq-opt"
echo
echo "--- the graph as written (fp16 cache), verified and printed by kvq-opt:"
"$opt" "$graph"
echo
echo "--- the same graph configured for each method (--kvq-configure-caches):"
for method in fp16 kivi kivi_sink kvquant; do
  printf '%-10s ' "$method"
  "$opt" "$graph" --kvq-configure-caches="method=$method" | head -n 1
done
echo
echo "Lowering to runtime calls and running the compiled graph come with the"
echo "lowering issue; see README.md for the status of each part."
