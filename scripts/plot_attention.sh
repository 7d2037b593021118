#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# plot_attention.sh — attention time vs context length per cache type.
#
#   scripts/plot_attention.sh RESULTS.json OUT.png [Q_PER_KV]
#
# Reads the JSON that `kvq-bench --json` prints (the "attention" list),
# writes one data block per cache type and renders a log-log plot with
# gnuplot (Debian: gnuplot-nox, installed by ./kvq.sh). The dashed lines are
# each cache's bandwidth bound (bytes read / measured read bandwidth).
set -euo pipefail

json="${1:?usage: plot_attention.sh RESULTS.json OUT.png [Q_PER_KV]}"
out="${2:?usage: plot_attention.sh RESULTS.json OUT.png [Q_PER_KV]}"
qpk="${3:-1}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
data="$(mktemp)"
trap 'rm -f "$data"' EXIT

# One gnuplot data block per cache: tokens, ms, bound_ms.
python3 - "$json" "$qpk" > "$data" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
qpk = int(sys.argv[2])
# Post-RoPE rows only (pre-RoPE key caches carry "rope": "half" etc.).
rows = [r for r in doc["attention"]
        if r["q_per_kv"] == qpk and r.get("rope", "none") == "none"]
caches = []
for r in rows:
    if r["cache"] not in caches:
        caches.append(r["cache"])
for c in caches:
    print('"%s"' % c)
    for r in sorted((r for r in rows if r["cache"] == c), key=lambda r: r["tokens"]):
        print(r["tokens"], r["ms"], r["bound_ms"])
    print()
    print()
PY

blocks="$(grep -c '^"' "$data")"
names="$(grep '^"' "$data" | tr -d '"' | tr '\n' ' ')"
gnuplot -e "datafile='$data'; outfile='$out'; blocks=$blocks; qpk=$qpk; names='$names'" \
  "$here/plot_attention.gnuplot"
echo "wrote $out"
