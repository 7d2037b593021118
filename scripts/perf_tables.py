#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# perf_tables.py — the markdown tables of docs/PERFORMANCE.md from one run.
#
#   scripts/perf_tables.py docs/perf-results.json > /tmp/tables.md
#   scripts/perf_tables.py docs/perf-results.json --check docs/PERFORMANCE.md
#   scripts/perf_tables.py docs/perf-results.json --summary --check README.md
#   scripts/perf_tables.py docs/perf-longctx.json --long-context --check \
#       docs/PERFORMANCE.md   (a `kvq-run --bench --json` run)
#
# A partial run (the file cut off, sections missing: a killed run, --only)
# renders the tables it can and names the rest, on the page and on stderr
# (ctest perf-tables-partial-run).
#
# --check exits 1 unless the page holds the rendering verbatim (ctest
# perf-doc-matches-its-run), so the page cannot drift from its JSON.
#
# Reads what `kvq-bench --json` printed and writes every table the
# performance page quotes (the run's machine and load, attention against
# the bound and against fp16, the GQA factor, the targets, threads,
# pre-RoPE ratios, quantize), so the page's figures are copied from the
# tool's output by a program, never by hand.
import contextlib
import io
import json
import sys


def rows(doc, **want):
    out = []
    for r in doc["attention"]:
        if all(r.get(k, "none" if k == "rope" else None) == v
               for k, v in want.items()):
            out.append(r)
    return out


def one(doc, **want):
    found = rows(doc, **want)
    return found[0] if found else None


def llc_text(llc_bytes):
    """kvq-bench writes llc_bytes 0 where the system does not report it."""
    if llc_bytes > 0:
        return "last-level cache %.0f MB" % (llc_bytes / 2**20)
    return "last-level cache not reported by the system"


def attention_shape(doc):
    """The caches in the order of the run, and its context lengths."""
    caches = []
    for r in doc["attention"]:
        if r["cache"] not in caches:
            caches.append(r["cache"])
    return caches, sorted({r["tokens"] for r in doc["attention"]})


def run_header(doc):
    base, machine, load = doc["baseline"], doc["machine"], doc["load_average"]
    commit = ", commit `%s`" % doc["commit"] if doc.get("commit") else ""
    print("**Run:** %s, %s%s, kernel table `%s`, mode %s; load average %.2f "
          "at the start, %.2f at the end. Best read loop `%s`: %.1f GB/s "
          "(memcpy %.1f GB/s); %s, %.0f MB evicted before each cold "
          "repetition.\n" %
          (machine["date"], machine["cpu"], commit, doc["kernels"],
           doc["mode"], load["start"], load["end"], base["read_loop"],
           base["read_gbps"], base["memcpy_gbps"],
           llc_text(base["llc_bytes"]), base["evict_bytes"] / 2**20))
    if base.get("read_gbps_huge_pages", 0) > 0:
        print("Best read on 4 KB pages %.1f GB/s, on 2 MB pages %.1f GB/s "
              "(%.0f %% of that buffer granted 2 MB pages).\n" %
              (base["read_gbps_small_pages"], base["read_gbps_huge_pages"],
               100 * base["huge_page_share"]))
    else:
        print("Every read loop ran on 4 KB pages (no 2 MB pages measured: "
              "runs before 2026-12-03 did not try them).\n")

    rechecks = base.get("read_rechecks", [])  # runs since 2026-12-04
    if doc.get("rounds", 1) > 1:
        print("Attention rows: each the median of %d rounds of alternating "
              "order; the best loop timed again before each round read %s "
              "GB/s (the bound is the best read of the run).\n" %
              (doc["rounds"], ", ".join("%.1f" % g for g in rechecks)))


def attention_tables(doc):
    caches, lengths = attention_shape(doc)
    for T in lengths:
        print("\n**Attention at %d tokens**, one thread, 8 KV heads x 128, "
              "post-RoPE keys; x bound = cold ms / (bytes / best read "
              "bandwidth); GQA = 4 query heads per KV head over 1:\n" % T)
        print("| cache | MB read | cold ms | x bound | warm x bound | "
              "x faster than fp16 | GQA 4/1 |")
        print("|---|---|---|---|---|---|---|")
        fp16 = one(doc, cache="fp16", tokens=T, q_per_kv=1, rope="none")
        for c in caches:
            a = one(doc, cache=c, tokens=T, q_per_kv=1, rope="none")
            g = one(doc, cache=c, tokens=T, q_per_kv=4, rope="none")
            if not a:
                continue
            vs = "%.2f" % (fp16["ms"] / a["ms"]) if fp16 else "-"
            gqa = "%.2f" % (g["ms"] / a["ms"]) if g else "-"
            print("| %s | %.1f | %.3f | %.2f | %.2f | %s | %s |" %
                  (c, a["bytes_read"] / 1e6, a["ms"], a["ms"] / a["bound_ms"],
                   a["warm_ms"] / a["bound_ms"], vs, gqa))


def targets(doc):
    # The targets at 32K, cold, one query head per KV head.
    caches, lengths = attention_shape(doc)
    if not lengths:
        raise Missing("no attention rows")
    T = 32768 if 32768 in lengths else lengths[-1]
    print("\n**The targets** (%d tokens, cold, one thread):\n" % T)
    print("| target | measured | |")
    print("|---|---|---|")

    def target(name, caches_, limit, key):
        for c in caches_:
            a = one(doc, cache=c, tokens=T, q_per_kv=1, rope="none")
            g = one(doc, cache=c, tokens=T, q_per_kv=4, rope="none")
            if not a:
                continue
            v = a["ms"] / a["bound_ms"] if key == "bound" else g["ms"] / a["ms"]
            print("| %s %s <= %.1fx | %.2fx | %s |" %
                  (c, name, limit, v,
                   "met" if v <= limit else "missed by %.2fx" % (v / limit)))

    target("x bound", ["fp16"], 1.3, "bound")
    target("x bound", ["kivi2", "kivi3", "kivi4", "kivi_sink2"], 2.0, "bound")
    target("x bound", ["kvquant3", "kvquant4"], 3.0, "bound")
    target("4 q/kv over 1 q/kv", caches, 1.5, "gqa")


def threads(doc):
    t = doc["threads"]
    if t:
        print("\n**Threads** (a host pool of %d, kvq_cache_set_parallel; "
              "cold):\n" % t["workers"])
        print("| cache | tokens | q/kv | 1 thread ms | %d threads ms | "
              "speedup |" % t["workers"])
        print("|---|---|---|---|---|---|")
        for r in t["rows"]:
            print("| %s | %d | %d | %.3f | %.3f | %.2fx |" %
                  (r["cache"], r["tokens"], r["q_per_kv"], r["ms_1"], r["ms_n"],
                   r["speedup"]))


def pre_rope(doc):
    caches, lengths = attention_shape(doc)
    pre = [r for r in doc["attention"] if r.get("rope", "none") != "none"]
    if pre:
        print("\n**Pre-RoPE key caches** (rope style `%s`): time over the "
              "same method's post-RoPE row, cold (warm):\n" % pre[0]["rope"])
        print("| cache | tokens | 1 q/kv | 4 q/kv |")
        print("|---|---|---|---|")
        for c in caches:
            for T2 in lengths:
                a = [r for r in pre if r["cache"] == c and r["tokens"] == T2]
                if not a:
                    continue
                by = {r["q_per_kv"]: r for r in a}
                cell = lambda r: "%.2fx (%.2fx)" % (
                    r["vs_post_rope"], r["warm_vs_post_rope"]) if r else "-"
                print("| %s | %d | %s | %s |" %
                      (c, T2, cell(by.get(1)), cell(by.get(4))))


def quantize(doc):
    rows, deq_rows = doc["quantize"], doc["dequantize"]
    if not rows:
        raise Missing("no quantize rows")
    print("\n**Quantize and dequantize** (fp16-equivalent GB/s, cold; warm "
          "in brackets; the scalar reference beside):\n")
    print("| method | bits | quantize | reference | dequantize |")
    print("|---|---|---|---|---|")
    deq = {(r["method"], r["bits"]): r for r in deq_rows}
    for r in rows:
        d = deq.get((r["method"], r["bits"]))
        print("| %s | %d | %.2f (%.2f) | %.2f | %s |" %
              (r["method"], r["bits"], r["gbps"], r["warm_gbps"],
               r["ref_gbps"],
               "%.2f (%.2f)" % (d["gbps"], d["warm_gbps"]) if d else "-"))


def append(doc):
    app = doc["append"]
    print("\nAppend (kivi2, one token): %.0f ns at 1K tokens, %.0f ns at 64K "
          "(%.2fx)." % (app["ns_at_1k"], app["ns_at_64k"],
                        app["ns_at_64k"] / app["ns_at_1k"]))
    if app.get("caches"):  # runs before 2026-12-03 time kivi2 only
        print("Append at 1K tokens, ns per token: %s." % ", ".join(
            "%s %.0f" % (a["cache"], a["ns"]) for a in app["caches"]))
        if all("max_ns" in a for a in app["caches"]):  # since 2026-12-04
            print("Slowest single append at 1K tokens, us: %s." % ", ".join(
                "%s %.1f" % (a["cache"], a["max_ns"] / 1e3)
                for a in app["caches"]))


def compile_time(doc):
    if "compile" not in doc:
        raise KeyError("compile")
    if doc["compile"]:
        print("Compile (`kvq-opt --kvq-to-llvm`, %d layers): %.3f s." %
              (doc["compile"]["layers"], doc["compile"]["seconds"]))


def summary(doc):
    """README.md's table: every cache at 32K tokens (or the run's longest),
    cold, one thread, against the bound, fp16, one query head per KV head
    and its post-RoPE self."""
    caches, lengths = attention_shape(doc)
    if not lengths:
        raise Missing("no attention rows")
    T = 32768 if 32768 in lengths else lengths[-1]
    commit = " (commit `%s`)" % doc["commit"] if doc.get("commit") else ""
    print("kvq-bench, %s%s, %s, %d tokens, cold, one thread; x bound = "
          "time over bytes read / the best read loop of the run (%.1f "
          "GB/s):\n" % (doc["machine"]["date"], commit, doc["machine"]["cpu"],
                        T, doc["baseline"]["read_gbps"]))
    print("| cache | MB read | ms | x bound | x faster than fp16 | "
          "4 q/kv over 1 | pre-RoPE over post-RoPE |")
    print("|---|---|---|---|---|---|---|")
    fp16 = one(doc, cache="fp16", tokens=T, q_per_kv=1, rope="none")
    for c in caches:
        a = one(doc, cache=c, tokens=T, q_per_kv=1, rope="none")
        if not a:
            continue
        g = one(doc, cache=c, tokens=T, q_per_kv=4, rope="none")
        pre = [r for r in doc["attention"]
               if r["cache"] == c and r["tokens"] == T and r["q_per_kv"] == 1
               and r.get("rope", "none") != "none"]
        print("| %s | %.1f | %.3f | %.2fx | %s | %s | %s |" %
              (c, a["bytes_read"] / 1e6, a["ms"], a["ms"] / a["bound_ms"],
               "%.2fx" % (fp16["ms"] / a["ms"]) if fp16 else "-",
               "%.2fx" % (g["ms"] / a["ms"]) if g else "-",
               "%.2fx" % pre[0]["vs_post_rope"] if pre else "-"))


# The end-to-end targets at long context: a decode step with the
# quantized cache over the step with the fp16 cache, same model and context
# (keys: the method specs of the run's command line).
LONG_CONTEXT_TARGETS = {"kivi{bits=2}": 0.7, "kvquant{bits=3}": 0.8}


def long_context(doc):
    """PERFORMANCE.md's opening table, from one `kvq-run --bench --json`
    run: the whole decode step at long context per cache, against fp16's."""
    rows_ = doc["rows"]
    if not rows_:
        raise Missing("no decode rows")
    c, machine, load = doc["config"], doc["machine"], doc["load_average"]
    weights = doc["weight_bytes"] / 1e6
    print("**Run:** %s, %d cores, %s, commit `%s`; load average %.2f at the "
          "start, %.2f at the end; %d thread%s, fastest of %d steps; the "
          "model: %d layers, dim %d, %d query / %d KV heads (head_dim %d), "
          "hidden %d, vocab %d, %.0f MB of %s weights; read bound %.1f GB/s "
          "(the best read loop of the run).\n" %
          (machine["cpu"], machine["cores"], machine["date"], doc["commit"],
           load["start"], load["end"], doc["threads"],
           "" if doc["threads"] == 1 else "s", doc["repetitions"],
           c["layers"], c["dim"], c["heads"], c["kv_heads"],
           c["dim"] // c["heads"], c["hidden_dim"], c["vocab"], weights,
           doc["weight_type"], doc["read_gbps"]))
    print("| cache | context | cache MB | step ms | step over fp16's | "
          "target | attention ms | attention x bound | dense ms | tokens/s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    fp16 = {r["context"]: r for r in rows_ if r["method"] == "fp16"}
    for r in rows_:
        base = fp16.get(r["context"])
        ratio = r["step_ms"] / base["step_ms"] if base else None
        limit = LONG_CONTEXT_TARGETS.get(r["method"])
        if limit is None or ratio is None:
            verdict = "-"
        else:
            verdict = "<= %.1f: %s" % (limit, "met" if ratio <= limit else
                                        "missed by %.2fx" % (ratio / limit))
        # Attention reads the whole cache once: its bound is those bytes
        # at the run's best read bandwidth.
        bound_ms = r["cache_bytes"] / (doc["read_gbps"] * 1e9) * 1e3
        print("| %s | %d | %.0f | %.1f | %s | %s | %.1f | %.1fx | %.1f | "
              "%.2f |" %
              (r["method"], r["context"], r["cache_bytes"] / 1e6,
               r["step_ms"], "%.2f" % ratio if ratio is not None else "-",
               verdict, r["attention_ms"], r["attention_ms"] / bound_ms,
               r["dense_ms"], r["tokens_per_second"]))


class Missing(Exception):
    """A section the run holds no figures for."""


# Every part of the page, in its order: (name in messages, renderer).
SECTIONS = [
    ("run header", run_header),
    ("attention tables", attention_tables),
    ("targets", targets),
    ("threads", threads),
    ("pre-RoPE rows", pre_rope),
    ("quantize and dequantize", quantize),
    ("append", append),
    ("compile", compile_time),
]


def load(path):
    """The run's JSON, and a note when the file was cut off: then the
    members complete before the cut are read (a run killed while its output
    was written, a file copied in part)."""
    text = open(path, encoding="utf-8").read()
    try:
        doc = json.loads(text)
        if not isinstance(doc, dict):
            raise ValueError("not a JSON object")
        return doc, None
    except ValueError as e:
        error = str(e)
    # The end of the last complete top-level member: a comma at depth 1,
    # outside strings.
    depth, in_string, escaped, cut = 0, False, False, None
    for i, ch in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
        elif ch == "," and depth == 1:
            cut = i
    if cut is not None:
        try:
            doc = json.loads(text[:cut] + "}")
            if isinstance(doc, dict):
                return doc, "%s is cut off (%s); read the %d members before " \
                    "the cut" % (path, error, len(doc))
        except ValueError:
            pass
    return {}, "%s is not a kvq-bench JSON object (%s)" % (path, error)


def main(sections=SECTIONS):
    doc, note = load(sys.argv[1])
    missing = []
    for name, render in sections:
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out):
                render(doc)
        except Missing as e:
            missing.append("%s (%s)" % (name, e))
            continue
        except (KeyError, IndexError, TypeError, ValueError,
                ZeroDivisionError) as e:
            what = "no key %s" % e if isinstance(e, KeyError) else \
                "%s: %s" % (type(e).__name__, e)
            missing.append("%s (%s)" % (name, what))
            continue
        sys.stdout.write(out.getvalue())
    if note or missing:
        # Said on the page (a table rendered from a partial run must not
        # pass for a whole one) and on stderr.
        lines = ["", "**Partial run.**" + (" " + note + "." if note else "")]
        if missing:
            lines.append("Not rendered: %s." % "; ".join(missing))
        text = "\n".join(lines)
        print(text)
        sys.stderr.write("perf_tables.py: partial run: %s\n" %
                         "; ".join(([note] if note else []) + missing))


if __name__ == "__main__":
    usage = ("usage: perf_tables.py RESULTS.json [--summary | "
             "--long-context] [--check MARKDOWN_FILE]")
    if len(sys.argv) < 2 or sys.argv[1].startswith("--"):
        sys.exit(usage)
    args = sys.argv[2:]
    # --summary: README.md's one table instead of the page's.
    sections = SECTIONS
    if "--summary" in args:
        args.remove("--summary")
        sections = [("summary", summary)]
    # --long-context: a `kvq-run --bench --json` run, PERFORMANCE.md's
    # opening table.
    if "--long-context" in args:
        args.remove("--long-context")
        sections = [("long context", long_context)]
    if len(args) == 2 and args[0] == "--check":
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            main(sections)
        page = open(args[1], encoding="utf-8").read()
        if out.getvalue().strip() not in page:
            sys.exit("%s does not hold the tables of %s (run "
                     "scripts/perf_tables.py and paste them)" %
                     (args[1], sys.argv[1]))
        print("%s holds the tables of %s" % (args[1], sys.argv[1]))
    elif not args:
        main(sections)
    else:
        sys.exit(usage)
