#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Keep the defaults quoted in the docs equal to the code's.

A cache configuration's defaults are defined once, as constants of
runtime/include/kvq/config_limits.h (kvq_config_init, the dialect's
#kvq.config and the pass options read them there). The docs quote some of
them in prose; QUOTES below lists every such quote (the file, the words
around the number, the constant). Then:

  scripts/doc_defaults.py            check: exit 1 naming each quote that
                                     differs from its constant, or that is
                                     no longer found (its words changed)
  scripts/doc_defaults.py --fix      rewrite the quoted numbers from the
                                     constants
  scripts/doc_defaults.py --self-test
                                     on a copy of the files, change each
                                     quote in turn and check that the check
                                     catches it

A new quote of a default in the docs gets a line in QUOTES. ctest runs the
check and the self-test (tests kvq-doc-defaults, kvq-doc-defaults-self-test).
"""
import argparse
import pathlib
import re
import shutil
import sys
import tempfile

HEADER = "runtime/include/kvq/config_limits.h"

# (file, regex with one group: the quoted number, constant of HEADER).
QUOTES = [
    ("docs/MODEL.md", r"a (\d+)-token\s+fp16\s+residual\s+window", "kDefaultResidualLength"),
    ("docs/MODEL.md", r"Without an explicit `group-size`, the default \((\d+)\)",
     "kDefaultGroupSize"),
    ("docs/DIALECT.md", r"except `refit_interval`: (\d+)", "kDefaultRefitInterval"),
    ("docs/DIALECT.md", r"kvquant refits its key levels every (\d+) decoded tokens",
     "kDefaultRefitInterval"),
    ("docs/MODEL.md", r"kvquant 3-bit \(refit every (\d+) tokens, the default\)",
     "kDefaultRefitInterval"),
    ("docs/RUNTIME.md", r"`KVQ_DEFAULT_REFIT_INTERVAL` = (\d+)", "kDefaultRefitInterval"),
    ("docs/RUNTIME.md", r"`refit_interval = N > 0` \(default \*\*(\d+)\*\*\)",
     "kDefaultRefitInterval"),
    ("docs/RUNTIME.md", r"defaults to `refit_interval = (\d+)`", "kDefaultRefitInterval"),
    ("docs/RUNTIME.md", r"kvquant's `refit_interval` \(default (\d+);",
     "kDefaultRefitInterval"),
    ("docs/RUNTIME.md", r"defaults: (\d+) for\s+kivi/kivi_sink", "kDefaultKiviBits"),
    ("docs/RUNTIME.md", r"kivi/kivi_sink, (\d+) for kvquant", "kDefaultKvquantBits"),
    # The #kvq.config reference (its description is the generated dialect doc).
    ("include/kvq/dialect/KvqAttrs.td", r"except\s+`refit_interval`: (\d+),",
     "kDefaultRefitInterval"),
    ("include/kvq/dialect/KvqAttrs.td", r"\| `group_size` \| `kivi_group_size` \| (\d+) \|",
     "kDefaultGroupSize"),
    ("include/kvq/dialect/KvqAttrs.td",
     r"\| `residual_length` \| `residual_length` \| (\d+) \|", "kDefaultResidualLength"),
    ("include/kvq/dialect/KvqAttrs.td", r"\| `n_sink_tokens` \| `n_sink_tokens` \| (\d+) for",
     "kDefaultKiviSinkTokens"),
    ("include/kvq/dialect/KvqAttrs.td",
     r"\| `outlier_fraction` \| `kvquant_outlier_fraction` \| ([0-9.]+) \|",
     "kDefaultOutlierFraction"),
    ("include/kvq/dialect/KvqAttrs.td", r"\| `lloyd_iters` \| `kvquant_lloyd_iters` \| (\d+) \|",
     "kDefaultLloydIters"),
    ("include/kvq/dialect/KvqAttrs.td",
     r"\| `refit_interval` \| `kvquant_refit_interval` \| (\d+) \(", "kDefaultRefitInterval"),
    ("include/kvq/dialect/KvqAttrs.td", r"\| `kvquant_n_sink` \| `kvquant_n_sink` \| (\d+) \|",
     "kDefaultKvquantNSink"),
    ("include/kvq/dialect/KvqAttrs.td",
     r"\| `kvquant_group_size` \| `kvquant_group_size` \| (\d+) \|", "kKvquantGroupSize"),
    ("include/kvq/dialect/KvqAttrs.td", r"fp16: (\d+) when left out", "kFp16Bits"),
]


def constants(root):
    """name -> value text (as the header writes it) of config_limits.h."""
    text = (root / HEADER).read_text()
    found = dict(re.findall(
        r"constexpr\s+\w+\s+(k\w+)\s*=\s*([0-9][0-9.eE+-]*f?)\s*;", text))
    return {k: v.rstrip("f") for k, v in found.items()}


def same(quoted, value):
    try:
        return float(quoted) == float(value)
    except ValueError:
        return False


def check(root, fix=False, quiet=False):
    """Problems found (empty: every quote matches); with fix, rewrites."""
    values = constants(root)
    problems = []
    texts = {}
    for path, pattern, name in QUOTES:
        if name not in values:
            problems.append(f"{HEADER}: no constant {name} (quoted by {path})")
            continue
        text = texts.setdefault(path, (root / path).read_text())
        matches = list(re.finditer(pattern, text))
        if not matches:
            problems.append(f"{path}: the quote of {name} (/{pattern}/) is not "
                            "found; update QUOTES in scripts/doc_defaults.py")
            continue
        for m in reversed(matches):
            if same(m.group(1), values[name]):
                continue
            line = text.count("\n", 0, m.start(1)) + 1
            if fix:
                text = text[:m.start(1)] + values[name] + text[m.end(1):]
            else:
                problems.append(f"{path}:{line}: quotes {m.group(1)} for {name}, "
                                f"which is {values[name]} in {HEADER}")
        texts[path] = text
    if fix:
        for path, text in texts.items():
            if (root / path).read_text() != text:
                (root / path).write_text(text)
                if not quiet:
                    print(f"rewrote {path}")
    return problems


def self_test(root):
    """Each quote, changed alone in a copy, must be reported."""
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        copy = pathlib.Path(tmp)
        files = {HEADER} | {q[0] for q in QUOTES}
        for f in files:
            (copy / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(root / f, copy / f)
        if check(copy):
            print("self-test: the tree itself does not pass the check")
            return 1
        for path, pattern, name in QUOTES:
            original = (copy / path).read_text()
            m = re.search(pattern, original)
            drifted = original[:m.start(1)] + "9" + m.group(1) + original[m.end(1):]
            (copy / path).write_text(drifted)
            problems = check(copy)
            if not any(name in p and p.startswith(path + ":") for p in problems):
                print(f"self-test: {path}: a drifted {name} was not reported")
                failures += 1
            check(copy, fix=True, quiet=True)
            if (copy / path).read_text() != original:
                print(f"self-test: {path}: --fix did not restore {name}")
                failures += 1
            (copy / path).write_text(original)
    print(f"self-test: {len(QUOTES)} quotes, {failures} failures")
    return 1 if failures else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fix", action="store_true",
                        help="rewrite the quotes from the constants")
    parser.add_argument("--self-test", action="store_true",
                        help="check that a drifted quote is caught")
    parser.add_argument("--root", type=pathlib.Path,
                        default=pathlib.Path(__file__).resolve().parent.parent)
    args = parser.parse_args()
    if args.self_test:
        return self_test(args.root)
    problems = check(args.root, fix=args.fix)
    for p in problems:
        print(p, file=sys.stderr)
    if not problems and not args.fix:
        print(f"{len(QUOTES)} quoted defaults match {HEADER}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
