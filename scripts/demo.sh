#!/usr/bin/env bash
# The demo (./kvq.sh demo runs it after building): the example decoder layer
# compiled by kvq-opt for every method and run against the runtime.
# Usage: scripts/demo.sh BUILD_DIR
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$here/build}"

# The build compiled examples/decoder_layer.mlir once per method (see
# examples/CMakeLists.txt):
#   kvq-opt decoder_layer.mlir --kvq-configure-caches="method=<m> ..." --kvq-to-llvm
#   | mlir-translate --mlir-to-llvmir | llc -filetype=obj | cc -shared
exec "$build/bin/kvq-demo" --graphs "$build/examples"
