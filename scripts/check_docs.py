#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Checks that the Markdown docs are usable on any machine.

  - no path of one machine (/work/, /home/, /root/): docs name files
    relative to the source tree;
  - no example command writes over a file the repository tracks (an output
    flag --plot, --save, -o or a `>` redirection naming a tracked path):
    running the docs' examples must leave the checkout unchanged (except
    where a doc is the procedure that regenerates that file: REGENERATES).

  scripts/check_docs.py [--root DIR] [PATH ...]
exits 1 naming each problem (file:line). Without PATHs, every tracked .md
file (git ls-files) is checked. ctest runs it (test kvq-docs-portable).
"""
import argparse
import pathlib
import re
import subprocess
import sys

MACHINE_PATH = re.compile(r"(?<![\w.])/(?:work|home|root)/[\w./-]*")
# The exceptions: a doc whose example is the procedure that regenerates the
# tracked file (PERFORMANCE.md's runs render its quoted results).
REGENERATES = {("docs/PERFORMANCE.md", "docs/perf-results.json"),
               ("docs/PERFORMANCE.md", "docs/perf-longctx.json")}

OUTPUT = re.compile(r"(?:--plot|--save|-o)(?:=|\s+)([^\s`'\")\]]+)|>\s*([^\s`&|>]+)")


def tracked(root):
    out = subprocess.run(["git", "-C", str(root), "ls-files"],
                         capture_output=True, text=True, check=True).stdout
    return set(out.split())


def check_file(root, rel, files):
    problems = []
    in_code = False
    for n, line in enumerate((root / rel).read_text().splitlines(), 1):
        if line.lstrip().startswith("```"):
            in_code = not in_code
        for m in MACHINE_PATH.finditer(line):
            problems.append(f"{rel}:{n}: path of one machine '{m.group(0)}'")
        if not in_code:
            continue
        for m in OUTPUT.finditer(line):
            target = (m.group(1) or m.group(2)).strip()
            if target in files and (rel, target) not in REGENERATES:
                problems.append(f"{rel}:{n}: the example writes over the "
                                f"tracked file {target}")
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=pathlib.Path,
                        default=pathlib.Path(__file__).resolve().parent.parent)
    parser.add_argument("files", nargs="*")
    args = parser.parse_args()
    files = tracked(args.root)
    docs = args.files or sorted(f for f in files if f.endswith(".md"))
    problems = []
    for rel in docs:
        problems += check_file(args.root, rel, files)
    for p in problems:
        print(p, file=sys.stderr)
    if not problems:
        print(f"{len(docs)} Markdown files: no machine paths, no example "
              "writes over a tracked file")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
