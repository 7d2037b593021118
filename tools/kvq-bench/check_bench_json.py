#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# ===- check_bench_json.py - Validate kvq-bench --json output ------------=== #
#
# Runs kvq-bench (through an emulator when given) and checks that its JSON
# has every key docs/PERFORMANCE.md and the plot script rely on, with sane
# types. Exit 0 when it does. Usage: check_bench_json.py EMULATOR BENCH ARGS
# An argument --kvq-opt=ODD becomes a kvq-opt that exists and fails, in a
# fresh directory whose name holds a quote and a backslash: the compile
# note names it, so the JSON must escape both.
#
# ===--------------------------------------------------------------------=== #
import atexit
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile


def fail(msg):
    print("kvq-bench JSON check failed: " + msg)
    sys.exit(1)


def need(obj, key, kinds):
    if not isinstance(obj, dict) or key not in obj:
        fail("missing key %r in %r" % (key, obj))
    if not isinstance(obj[key], kinds):
        fail("key %r has type %s" % (key, type(obj[key]).__name__))
    return obj[key]


def main():
    emulator, bench, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    odd_note = None
    if "--kvq-opt=ODD" in args:
        odd = tempfile.mkdtemp(prefix='odd"dir\\')
        atexit.register(shutil.rmtree, odd, True)
        opt = os.path.join(odd, "kvq-opt")
        with open(opt, "w") as f:
            f.write("#!/bin/sh\nexit 1\n")
        os.chmod(opt, 0o755)
        args = [("--kvq-opt=" + opt) if a == "--kvq-opt=ODD" else a
                for a in args]
        odd_note = "kvq-opt at " + opt + ": "
    cmd = shlex.split(emulator) + [bench] + args
    run = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         universal_newlines=True, timeout=600)
    sys.stderr.write(run.stderr)
    if run.returncode != 0:
        fail("exit status %d" % run.returncode)
    try:
        doc = json.loads(run.stdout)
    except ValueError as e:
        fail("not JSON: %s" % e)
    num = (int, float)
    base = need(doc, "baseline", dict)
    for k in ("memcpy_gbps", "read_gbps"):
        if need(base, k, num) <= 0:
            fail(k + " is not positive")
    # The bound is the fastest of the read loops, and headline timings are
    # cold (the last-level cache evicted before each repetition).
    loops = need(base, "read_loops", dict)
    if need(base, "read_loop", str) not in loops:
        fail("read_loop is not one of read_loops")
    # The best loop is timed again before each attention round of several:
    # the bound is the best of all those figures.
    rechecks = need(base, "read_rechecks", list)
    best = max(list(loops.values()) + rechecks)
    if abs(best - base["read_gbps"]) > 1e-3 * base["read_gbps"]:
        fail("read_gbps is not the best of read_loops and read_rechecks")
    rounds = need(doc, "rounds", int)
    if rounds < 1:
        fail("rounds < 1")
    if rounds > 1 and not rechecks:
        fail("several rounds but no recheck of the bound")
    # Each page size's best is its loops' best; a 2 MB-page figure exists
    # exactly when some of that buffer was granted 2 MB pages.
    small = {k: v for k, v in loops.items() if not k.endswith("@2M")}
    huge = {k: v for k, v in loops.items() if k.endswith("@2M")}
    if not small:
        fail("no read loop on 4 KB pages")
    if abs(max(small.values()) - need(base, "read_gbps_small_pages", num)) > \
            1e-3 * base["read_gbps_small_pages"]:
        fail("read_gbps_small_pages is not the best of its loops")
    share = need(base, "huge_page_share", num)
    if not 0 <= share <= 1:
        fail("huge_page_share is not a fraction")
    best_huge = need(base, "read_gbps_huge_pages", num)
    if (share > 0) != bool(huge):
        fail("2 MB-page loops without a granted share, or the reverse")
    if huge and abs(max(huge.values()) - best_huge) > 1e-3 * best_huge:
        fail("read_gbps_huge_pages is not the best of its loops")
    if not huge and best_huge != 0:
        fail("read_gbps_huge_pages without 2 MB-page loops")
    if need(base, "timing", str) != "cold":
        fail("timing is not cold")
    need(base, "llc_bytes", int)
    if need(base, "evict_bytes", int) < 2 * base["llc_bytes"]:
        fail("the evicted buffer is smaller than twice the LLC")
    # Where and when (tools/common/run_info.h): the build's version and the
    # commit in it, the machine, the UTC start date, the load average.
    version = need(doc, "version", str)
    if "commit" not in doc:
        fail("missing key 'commit'")
    if "+g" in version:
        if doc["commit"] != version.split("+g", 1)[1]:
            fail("commit is not the one in version")
    elif doc["commit"] is not None:
        fail("commit without one in version")
    machine = need(doc, "machine", dict)
    need(machine, "cpu", str)
    if need(machine, "cores", int) < 1:
        fail("machine.cores < 1")
    if not re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ",
                        need(machine, "date", str)):
        fail("machine.date is not UTC ISO 8601")
    load = need(doc, "load_average", dict)
    for k in ("start", "end"):
        if need(load, k, num) < 0:
            fail("load_average.%s is negative (unknown)" % k)
    need(doc, "kernels", str)
    for section in ("quantize", "dequantize"):
        rows = need(doc, section, list)
        if not rows:
            fail(section + " is empty")
        for row in rows:
            need(row, "method", str)
            need(row, "bits", int)
            need(row, "gbps", num)
            need(row, "warm_gbps", num)
    rows = need(doc, "attention", list)
    caches, rope_caches = set(), set()
    for row in rows:
        cache = need(row, "cache", str)
        need(row, "tokens", int)
        need(row, "q_per_kv", int)
        need(row, "ms", num)
        need(row, "bytes_read", int)
        need(row, "bound_ms", num)
        need(row, "warm_ms", num)
        # ms is the median of the rounds' cold times.
        per_round = need(row, "round_ms", list)
        if len(per_round) != rounds:
            fail("round_ms has %d entries, rounds is %d" %
                 (len(per_round), rounds))
        if sorted(per_round)[len(per_round) // 2] != \
                float("%.4f" % row["ms"]):
            fail("ms is not the median of round_ms")
        if abs(row["bound_ms"] - row["bytes_read"] / (base["read_gbps"] *
                                                     1e9) * 1e3) > \
                1e-3 * row["bound_ms"] + 1e-4:
            fail("bound_ms is not bytes_read / read_gbps")
        # "rope": "none" (post-RoPE keys) or a pre-RoPE key cache's style,
        # whose rows carry their time over the post-RoPE row's.
        rope = need(row, "rope", str)
        if rope == "none":
            caches.add(cache)
        elif rope in ("half", "interleaved"):
            rope_caches.add(cache)
            if need(row, "vs_post_rope", num) <= 0:
                fail("vs_post_rope is not positive")
            need(row, "warm_vs_post_rope", num)
        else:
            fail("unknown rope %r" % rope)
    # Every method and width, or the ones --caches asked for, post-RoPE and
    # (unless --rope=none) pre-RoPE.
    wanted = ["fp16", "kivi2", "kivi3", "kivi4", "kivi_sink2", "kvquant2",
              "kvquant3", "kvquant4"]
    want_rope = True
    for i, a in enumerate(args):
        flag, value = a, None
        if "=" in a:
            flag, value = a.split("=", 1)
        elif i + 1 < len(args):
            flag, value = a, args[i + 1]
        if flag == "--caches" and value is not None:
            wanted = value.split(",")
        elif flag == "--rope" and value == "none":
            want_rope = False
    for c in wanted:
        if c not in caches:
            fail("no attention rows for " + c)
        if want_rope and c not in rope_caches:
            fail("no pre-RoPE attention rows for " + c)
    # --threads N times attention through an N-thread host pool
    # against one thread, per wanted cache; without it "threads" is null.
    threads = None
    for i, a in enumerate(args):
        if a.startswith("--threads="):
            threads = int(a.split("=", 1)[1])
        elif a == "--threads" and i + 1 < len(args):
            threads = int(args[i + 1])
    if "threads" not in doc:
        fail("missing key 'threads'")
    if threads is None or threads < 2:
        if doc["threads"] is not None:
            fail("threads is not null without --threads")
    else:
        t = need(doc, "threads", dict)
        if need(t, "workers", int) != threads:
            fail("threads.workers is not %d" % threads)
        timed = set()
        for row in need(t, "rows", list):
            timed.add(need(row, "cache", str))
            need(row, "tokens", int)
            need(row, "q_per_kv", int)
            for k in ("ms_1", "ms_n", "speedup"):
                if need(row, k, num) <= 0:
                    fail("threads row %s is not positive" % k)
        for c in wanted:
            if c not in timed:
                fail("no threads rows for " + c)
    app = need(doc, "append", dict)
    need(app, "ns_at_1k", num)
    need(app, "ns_at_64k", num)
    for row in need(app, "caches", list):
        need(row, "cache", str)
        need(row, "tokens", int)
        if need(row, "ns", num) <= 0:
            fail("append row ns is not positive")
        if need(row, "max_ns", num) < row["ns"]:
            fail("append row max_ns is below its mean ns")
    if "compile" not in doc:
        fail("missing key 'compile'")
    if doc["compile"] is not None:
        need(doc["compile"], "layers", int)
        need(doc["compile"], "seconds", num)
    if odd_note is not None:
        note = need(doc, "compile_note", str)
        if doc["compile"] is not None or not note.startswith(odd_note):
            fail("compile note %r does not name the failing kvq-opt" % note)
    print("kvq-bench JSON: %d quantize, %d attention rows, compile %s" %
          (len(doc["quantize"]), len(rows),
           "null" if doc["compile"] is None else "%.3f s" %
           doc["compile"]["seconds"]))


if __name__ == "__main__":
    main()
