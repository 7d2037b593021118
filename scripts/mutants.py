#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Mutation testing of kvq: can the test suite fail?

Reads the curated mutant list (test/mutants/mutants.txt), and for each mutant
applies its one-text replacement to a scratch copy of the tree
(build-mutants/src-BUILD; the real tree is never touched), rebuilds the scratch
build the mutant needs incrementally, runs the mutant's test subset and
reports it killed (with the first failing test), survived, or invalid (the
mutant does not build, or its anchor is missing or ambiguous).

  scripts/mutants.py [--check] [--list] [--worktree] [--build B] [ID ...]

--check only validates the list against the tree (every anchor occurs
exactly once in its file, every field present); ctest runs it. Exit status:
0 when every mutant is killed or survives with a written `equivalent:`
reason, 1 otherwise. The report is printed as a table and written to
build-mutants/report.json.
"""
import argparse
import datetime
import io
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tarfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIST = os.path.join(ROOT, "test", "mutants", "mutants.txt")
WORK = os.path.join(ROOT, "build-mutants")
JOBS = os.environ.get("KVQ_JOBS", str(os.cpu_count() or 2))

COMMON = ["-G", "Ninja", "-DCMAKE_C_COMPILER=clang-22",
          "-DCMAKE_CXX_COMPILER=clang++-22"]
# The runtime's CPU test executables: rebuilt for every runtime mutant (the
# others, e.g. the Metal shim's and the tools', are built once unmutated).
RUNTIME_TESTS = ["kvq_runtime_tests", "kvq_runtime_internal_tests",
                 "kvq_attend_property_tests", "kvq_real_kv_tests",
                 "kvq_lifecycle_tests"]
# name -> (cmake arguments, targets of the unmutated build, targets rebuilt
# for each mutant). A ctest subset must only select tests of the latter.
BUILDS = {
    "rt": (COMMON + ["-DCMAKE_BUILD_TYPE=Release", "-DKVQ_RUNTIME_ONLY=ON"],
           ["all"], RUNTIME_TESTS),
    "arm64": (["-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
               "-DKVQ_RUNTIME_ONLY=ON",
               "-DCMAKE_TOOLCHAIN_FILE=" + os.path.join(
                   WORK, "src-arm64", "cmake", "aarch64-linux-gnu.cmake")],
              ["all"], RUNTIME_TESTS),
    "full": (COMMON + ["-DCMAKE_BUILD_TYPE=Release",
                       "-DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir",
                       "-DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit"],
             ["kvq-opt", "kvq_runtime_cpu"], ["kvq-opt", "kvq_runtime_cpu"]),
}
LIT = "/usr/lib/llvm-22/bin/lit"
FIELDS = {"id", "file", "anchor", "replace", "desc", "build", "ctest", "lit",
          "equivalent"}
TIMEOUT = 600  # seconds per test run: a mutant that hangs is killed


class ListError(Exception):
    pass


def unescape(s):
    # `\n` and `\t` in anchors/replacements; `\\` for a backslash.
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(
        m.group(1), m.group(1)), s)


def parse_list(path=LIST):
    """Blocks of `key: value` lines separated by blank lines; # comments."""
    mutants, block, lineno = [], {}, 0
    with open(path) as f:
        lines = f.read().split("\n")
    for raw in lines + [""]:
        lineno += 1
        line = raw.rstrip()
        if line.startswith("#"):
            continue
        if not line:
            if block:
                mutants.append(block)
                block = {}
            continue
        key, sep, value = line.partition(":")
        key = key.strip()
        if not sep or key not in FIELDS:
            raise ListError("%s:%d: expected `key: value` with key in %s" %
                            (path, lineno, sorted(FIELDS)))
        if key in block:
            raise ListError("%s:%d: %s given twice" % (path, lineno, key))
        block[key] = value.strip() if key not in ("anchor", "replace") \
            else unescape(value[1:] if value.startswith(" ") else value)
        block.setdefault("_line", lineno)
    return mutants


def validate(mutants, tree):
    """One message per problem; empty when the list matches the tree."""
    errors, seen = [], set()
    for m in mutants:
        where = "%s:%d" % (os.path.relpath(LIST, ROOT), m["_line"])
        mid = m.get("id", "?")
        for key in ("id", "file", "anchor", "replace", "desc", "build"):
            if not m.get(key) and not (key == "replace" and key in m):
                errors.append("%s: mutant %s has no %s" % (where, mid, key))
        if mid in seen:
            errors.append("%s: duplicate id %s" % (where, mid))
        seen.add(mid)
        if m.get("build") not in BUILDS:
            errors.append("%s: %s: build must be one of %s" %
                          (where, mid, ", ".join(BUILDS)))
        if ("ctest" in m) == ("lit" in m):
            errors.append("%s: %s: give exactly one of ctest: or lit:" %
                          (where, mid))
        if m.get("anchor") == m.get("replace"):
            errors.append("%s: %s: replacement equals the anchor" %
                          (where, mid))
        path = os.path.join(tree, m.get("file", ""))
        if not os.path.isfile(path):
            errors.append("%s: %s: no file %s" % (where, mid, m.get("file")))
            continue
        with open(path) as f:
            n = f.read().count(m.get("anchor") or "\0")
        if n != 1:
            errors.append("%s: %s: anchor occurs %d times in %s (must be "
                          "exactly once; update the list if the code moved)"
                          % (where, mid, n, m["file"]))
    return errors


def run(cmd, cwd=None, timeout=None):
    env = dict(os.environ, KVQ_MUTANT_RUN="1")
    p = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=timeout,
                       env=env)
    return p.returncode, p.stdout


def tree_files(worktree):
    """(path, bytes, mode) of the tree to mutate: the committed tree (HEAD,
    what a fresh clone holds), or with --worktree the working tree's
    tracked and unignored files."""
    if worktree:
        names = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others",
             "--exclude-standard"], cwd=ROOT, stdout=subprocess.PIPE,
            check=True).stdout.split(b"\0")
        for rel in filter(None, (n.decode() for n in names)):
            path = os.path.join(ROOT, rel)
            if os.path.isfile(path) and not os.path.islink(path):
                with open(path, "rb") as f:
                    yield rel, f.read(), os.stat(path).st_mode
        return
    archive = subprocess.run(["git", "archive", "--format=tar", "HEAD"],
                             cwd=ROOT, stdout=subprocess.PIPE,
                             check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        for info in tar:
            if info.isfile():
                yield info.name, tar.extractfile(info).read(), info.mode


def src_dir(build):
    """Each build has its own scratch copy (build-mutants/src-BUILD), so runs
    for different builds can go on at the same time."""
    return os.path.join(WORK, "src-" + build)


def sync_scratch(src, worktree=False):
    """Copy the tree into `src`, writing only files whose content differs so
    incremental builds stay incremental."""
    changed = 0
    for rel, data, mode in tree_files(worktree):
        dst = os.path.join(src, rel)
        try:
            with open(dst, "rb") as f:
                if f.read() == data:
                    continue
        except FileNotFoundError:
            os.makedirs(os.path.dirname(dst), exist_ok=True)
        with open(dst, "wb") as f:
            f.write(data)
        os.chmod(dst, mode | 0o600)
        changed += 1
    return changed


def build_dir(name):
    return os.path.join(WORK, name)


def configure(name):
    d = build_dir(name)
    if os.path.exists(os.path.join(d, "build.ninja")):
        return
    args = BUILDS[name][0]
    rc, out = run(["cmake", "-S", src_dir(name), "-B", d] + args)
    if rc:
        sys.exit("configuring build-mutants/%s failed:\n%s" % (name, out))


def build(name, baseline=False):
    targets = BUILDS[name][1 if baseline else 2]
    return run(["ninja", "-C", build_dir(name), "-j", JOBS] + targets)


def run_tests(m):
    """(killed?, first failing test or '', output tail)."""
    d = build_dir(m["build"])
    try:
        if "ctest" in m:
            log = os.path.join(d, "Testing", "Temporary", "LastTestsFailed.log")
            if os.path.exists(log):
                os.remove(log)
            rc, out = run(["ctest", "--test-dir", d] + shlex.split(m["ctest"]) +
                          ["-j", JOBS, "--stop-on-failure", "--no-tests=error",
                           "--timeout", str(TIMEOUT)], timeout=4 * TIMEOUT)
            first = ""
            if os.path.exists(log):
                with open(log) as f:
                    names = [l.split(":", 1)[1].strip() for l in f if ":" in l]
                first = names[0] if names else ""
        else:
            # (lit's own --timeout needs psutil; the run as a whole is
            # bounded below instead.)
            rc, out = run([LIT, "-v", "--max-failures=1", "--filter", m["lit"],
                           os.path.join(d, "test")], timeout=4 * TIMEOUT)
            hit = re.search(r"^(?:FAIL|TIMEOUT|UNRESOLVED): KVQ :: (\S+)",
                            out, re.M)
            first = hit.group(1) if hit else ""
            if rc == 0 and "Passed" not in out:
                rc, first = 1, "(no lit test matched)"
    except subprocess.TimeoutExpired:
        return True, "(timeout)", ""
    return rc != 0, first or ("(exit %d)" % rc if rc else ""), out[-3000:]


def write_report(results, build, start, final):
    """Writes the JSON report (after every mutant, so an interrupted run
    keeps what it measured); the final call also prints the table."""
    killed = sum(r["status"] == "killed" for r in results)
    equiv = sum(r["status"] == "equivalent" for r in results)
    invalid = sum(r["status"] == "invalid" for r in results)
    valid = len(results) - invalid
    score = 100.0 * killed / max(1, valid - equiv)
    report = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(
        timespec="seconds"), "complete": final, "killed": killed,
        "equivalent": equiv,
        "survived": sum(r["status"] == "SURVIVED" for r in results),
        "invalid": invalid, "score_percent": round(score, 1),
        "mutants": results}
    name = "report-%s.json" % build if build else "report.json"
    with open(os.path.join(WORK, name), "w") as f:
        json.dump(report, f, indent=1)
    if not final:
        return report
    print("\n%-28s %-6s %-10s %s" % ("mutant", "build", "status",
                                     "killed by / reason"))
    for r in results:
        print("%-28s %-6s %-10s %s" % (
            r["id"], r["build"], r["status"],
            r["killed_by"] or r.get("equivalent", "") or r["desc"]))
    print("\nscore: %d killed of %d non-equivalent (%.1f %%), %d equivalent, "
          "%d invalid, %.0f min" % (killed, valid - equiv, score, equiv,
                                    invalid, (time.time() - start) / 60))
    print("report: %s" % os.path.relpath(os.path.join(WORK, name), ROOT))
    return report


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("ids", nargs="*", help="run only these mutants")
    ap.add_argument("--check", action="store_true",
                    help="only validate the list against the tree")
    ap.add_argument("--list", action="store_true", help="list the mutants")
    ap.add_argument("--worktree", action="store_true",
                    help="mutate a copy of the working tree, not of HEAD")
    ap.add_argument("--no-sync", action="store_true",
                    help="mutate the scratch copies as they are (no copy of "
                    "HEAD first): a partial run against an older snapshot")
    ap.add_argument("--build", choices=list(BUILDS),
                    help="run only the mutants of this build")
    ap.add_argument("--tree", default=ROOT,
                    help="tree to validate with --check (default: this one)")
    a = ap.parse_args()
    try:
        mutants = parse_list()
    except ListError as e:
        sys.exit(str(e))
    def check(tree):
        errors = validate(mutants, tree)
        if errors:
            print("\n".join(errors), file=sys.stderr)
            sys.exit("mutant list: %d problem(s) against %s" %
                     (len(errors), tree))
    if a.check:
        if os.environ.get("KVQ_MUTANT_RUN"):
            print("inside a mutant run: the scratch copy is mutated on purpose")
            return 0
        check(a.tree)
        print("mutant list: %d mutants, every anchor unique" % len(mutants))
        return 0
    if a.list:
        for m in mutants:
            print("%-28s %-5s %s" % (m["id"], m["build"], m["desc"]))
        return 0
    if a.ids:
        unknown = set(a.ids) - {m["id"] for m in mutants}
        if unknown:
            sys.exit("unknown mutant id(s): " + " ".join(sorted(unknown)))
        mutants = [m for m in mutants if m["id"] in a.ids]
    if a.build:
        mutants = [m for m in mutants if m["build"] == a.build]

    # An interrupted run still restores the file it mutated (and the next
    # run's sync would revert it anyway).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    for b in sorted({m["build"] for m in mutants}):
        src = src_dir(b)
        os.makedirs(src, exist_ok=True)
        if a.no_sync:
            print("scratch copy %s used as it is (--no-sync)" %
                  os.path.relpath(src, ROOT), flush=True)
        else:
            print("scratch copy of %s: %d file(s) updated in %s" % (
                "the working tree" if a.worktree else "HEAD",
                sync_scratch(src, a.worktree), os.path.relpath(src, ROOT)),
                flush=True)
        check(src)
    order = list(BUILDS)
    mutants.sort(key=lambda m: order.index(m["build"]))
    results, baseline = [], {}
    start = time.time()
    for i, m in enumerate(mutants, 1):
        b = m["build"]
        subset = ("ctest", m["ctest"]) if "ctest" in m else ("lit", m["lit"])
        if (b, subset) not in baseline:
            configure(b)
            rc, out = build(b, baseline=True)
            if rc:
                sys.exit("build-mutants/%s does not build unmutated:\n%s" %
                         (b, out[-4000:]))
            failed, first, out = run_tests(dict(m, build=b))
            if failed:
                sys.exit("unmutated tree fails %s %s (%s):\n%s" %
                         (subset[0], subset[1], first, out))
            baseline[(b, subset)] = True
        path = os.path.join(src_dir(b), m["file"])
        with open(path) as f:
            original = f.read()
        t0 = time.time()
        try:
            with open(path, "w") as f:
                f.write(original.replace(m["anchor"], m["replace"], 1))
            rc, out = build(b)
            if rc:
                status, first, tail = "invalid", "(does not build)", out[-2000:]
            else:
                killed, first, tail = run_tests(m)
                status = "killed" if killed else (
                    "equivalent" if m.get("equivalent") else "SURVIVED")
        finally:
            with open(path, "w") as f:
                f.write(original)
        r = {"id": m["id"], "build": b, "file": m["file"], "desc": m["desc"],
             "status": status, "killed_by": first if status == "killed" else "",
             "seconds": round(time.time() - t0, 1)}
        if m.get("equivalent"):
            r["equivalent"] = m["equivalent"]
        if status in ("SURVIVED", "invalid"):
            r["output"] = tail
        results.append(r)
        write_report(results, a.build, start, final=False)
        print("[%2d/%d] %-28s %-10s %s" % (i, len(mutants), m["id"], status,
                                           r["killed_by"] or m["desc"]),
              flush=True)

    report = write_report(results, a.build, start, final=True)
    bad = [r for r in results if r["status"] in ("SURVIVED", "invalid")]
    for r in bad:
        print("\n== %s %s (%s)\n%s" % (r["status"], r["id"], r["desc"],
                                       r["output"]), file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
