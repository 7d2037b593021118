#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# perf_tables_test.py — scripts/perf_tables.py on partial runs.
#
#   scripts/perf_tables_test.py RESULTS.json
#
# From a whole kvq-bench JSON (docs/perf-results.json), makes two partial
# ones: the file cut off inside its attention list (a run killed while it
# wrote), and a whole object without its quantize, append and compile
# sections. perf_tables.py must render the tables it can, name what is
# missing on the page and on stderr, exit 0, and never print a traceback.
import json
import os
import subprocess
import sys
import tempfile

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                      "perf_tables.py")
failures = []


def render(text):
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        f.write(text)
    try:
        run = subprocess.run([sys.executable, SCRIPT, f.name],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             universal_newlines=True, timeout=60)
    finally:
        os.unlink(f.name)
    return run


def expect(case, run, present, absent):
    if run.returncode != 0:
        failures.append("%s: exit status %d" % (case, run.returncode))
    if "Traceback" in run.stdout + run.stderr:
        failures.append("%s: traceback:\n%s" % (case, run.stderr))
    for s in present:
        if s not in run.stdout:
            failures.append("%s: output lacks %r" % (case, s))
    for s in absent:
        if s in run.stdout:
            failures.append("%s: output has %r" % (case, s))
    if "partial run" not in run.stderr:
        failures.append("%s: stderr does not say the run is partial" % case)


def main():
    whole = json.load(open(sys.argv[1], encoding="utf-8"))
    # Written as kvq-bench writes it (indented), then cut in the middle of
    # the attention list: what came before is read, the rest is named.
    text = json.dumps(whole, indent=2)
    cut = text.index('"attention"')
    cut = text.index('"ms"', cut)  # inside the first attention row
    run = render(text[:cut])
    # kvq-bench writes quantize before attention: those tables stay.
    expect("cut inside attention", run,
           ["**Run:** %s" % whole["machine"]["date"], "**Partial run.**",
            "is cut off", "**Quantize and dequantize**",
            "attention tables (no key 'attention')",
            "append (no key 'append')", "compile (no key 'compile')"],
           ["**Attention at", "Append (kivi2"])
    # The sections a run with --only=attention,threads would lack.
    part = {k: v for k, v in whole.items()
            if k not in ("quantize", "dequantize", "append", "compile")}
    run = render(json.dumps(part))
    expect("sections missing", run,
           ["**Run:**", "**Attention at 1024 tokens**", "**The targets**",
            "**Partial run.**",
            "Not rendered: quantize and dequantize (no key 'quantize'); "
            "append (no key 'append'); compile (no key 'compile')."],
           ["is cut off", "**Quantize and dequantize**", "Append (kivi2"])
    # Not JSON at all: nothing to render, said so.
    run = render("kvq-bench: killed\n")
    expect("not JSON", run,
           ["**Partial run.**", "is not a kvq-bench JSON object",
            "run header (no key"], ["**Run:**"])
    if failures:
        print("\n".join(failures))
        sys.exit(1)
    print("perf_tables.py renders partial runs: 3 cases")


if __name__ == "__main__":
    main()
