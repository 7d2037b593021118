#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Checks that every "not adopted" remark of kvq-quantize-kv-cache has a lit
test whose expected-remark shows it.

usage: remark_coverage.py PASS_DIR TEST_DIR

PASS_DIR is passes/transforms: the pass (QuantizeKvCache.cpp) and every
source of kvcache/ are read.

A remark is a C++ message built from string literals and non-literal pieces
(Twine(n), a type name). It is found
  - in any file, from a literal containing "not adopted: " onwards;
  - as `notSoftmax(op, "...")`, surfacing as
    "not adopted: this is not a softmax: ...";
  - in kvcache/Layout.cpp, as `fail(op, "...")`, which the pass reports as
    "not adopted: <reason>";
  - in kvcache/BlockedSoftmax.cpp, as `refuse("...")`, which the pass
    reports as "not adopted: the cache is read in blocks inside a loop that
    kvq cannot read as one online softmax: <reason>".
A message whose reason is only a forwarded string (`"not adopted: " + why`)
is not a remark of its own: its reasons are the ones above.

A remark is covered when some `expected-remark` in TEST_DIR/*.mlir matches
its first literal characters (at least 40 of them, or all), the non-literal
pieces standing for any text. Exits 1 listing the uncovered ones.
"""

import glob
import os
import re
import sys

MIN_CHARS = 40
HOLE = None  # a non-literal piece of a message

# Remarks no graph can trigger, proven by trying; key: the start of the
# reason as extracted, value: why it cannot be reached.
UNREACHABLE = {
    "the written K/V's shape does not match the write's sizes":
        "tensor.insert_slice's verifier already rejects a source whose "
        "shape is not the sizes with unit dims dropped, the same rank "
        "reduction this check computes",
    "the cache is read in blocks inside a loop that kvq cannot read as one "
    "online softmax: the running sum does not reduce the block weights":
        "linalg.generic's verifier requires invertible indexing maps, so a "
        "one-input reduction over the weights' own dims reads them through "
        "a permutation",
    "the cache is read in blocks inside a loop that kvq cannot read as one "
    "online softmax: the block's scores are not one per position":
        "the whole read differs from a block only in the blocked dim's "
        "extent, which generics carry to the scores unchanged in size",
}


def tokenize(text):
    """String literals (adjacent ones not yet joined), identifiers and
    punctuation, with comments and character literals dropped."""
    toks = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            i = text.find("\n", i)
            i = n if i < 0 else i
        elif text.startswith("/*", i):
            i = text.find("*/", i + 2)
            i = n if i < 0 else i + 2
        elif c == '"':
            j, buf = i + 1, []
            while text[j] != '"':
                if text[j] == "\\":
                    esc = text[j + 1]
                    buf.append({"n": "\n", "t": "\t"}.get(esc, esc))
                    j += 2
                else:
                    buf.append(text[j])
                    j += 1
            toks.append(("str", "".join(buf)))
            i = j + 1
        elif c == "'":
            j = i + 1
            while text[j] != "'":
                j += 2 if text[j] == "\\" else 1
            toks.append(("chr", text[i:j + 1]))
            i = j + 1
        elif c.isalnum() or c == "_":
            j = i
            while j < n and (text[j].isalnum() or text[j] == "_"):
                j += 1
            toks.append(("id", text[i:j]))
            i = j
        elif c.isspace():
            i += 1
        elif text.startswith("<<", i) or text.startswith("::", i) or \
                text.startswith("->", i):
            toks.append(("p", text[i:i + 2]))
            i += 2
        else:
            toks.append(("p", c))
            i += 1
    return toks


def skip_expr(toks, k):
    """Index after one operand of a `+`/`<<` chain starting at k."""
    depth = 0
    while k < len(toks):
        kind, v = toks[k]
        if kind == "p":
            if v in "([{":
                depth += 1
            elif v in ")]}":
                if depth == 0:
                    return k
                depth -= 1
            elif depth == 0 and v in ("+", "<<", ",", ";", "?", ":"):
                return k
        k += 1
    return k


def message(toks, k, first):
    """The pieces of the message whose first literal is toks[k], starting
    with the text `first` (the literal's part that belongs to the reason)."""
    pieces = [first]
    k += 1
    while k < len(toks):
        kind, v = toks[k]
        if kind == "str":  # adjacent literals are one
            if pieces[-1] is HOLE:
                pieces.append(v)
            else:
                pieces[-1] += v
            k += 1
        elif kind == "p" and v in ("+", "<<"):
            k += 1
            if k < len(toks) and toks[k][0] == "str":
                continue
            k = skip_expr(toks, k)
            if pieces[-1] is not HOLE:
                pieces.append(HOLE)
        else:
            break
    return pieces


def call_messages(toks, name):
    """Messages passed as the second argument of `name(x, "...")`."""
    for k in range(len(toks) - 2):
        if toks[k] != ("id", name) or toks[k + 1] != ("p", "("):
            continue
        j = skip_expr(toks, k + 2)
        if j + 1 < len(toks) and toks[j] == ("p", ",") and \
                toks[j + 1][0] == "str":
            yield message(toks, j + 1, toks[j + 1][1])


def first_arg_messages(toks, name):
    """Messages passed as the first argument of `name("...")`."""
    for k in range(len(toks) - 2):
        if toks[k] == ("id", name) and toks[k + 1] == ("p", "(") and \
                toks[k + 2][0] == "str":
            yield message(toks, k + 2, toks[k + 2][1])


BLOCKED = ("the cache is read in blocks inside a loop that kvq cannot read "
           "as one online softmax: ")


def sources(pass_dir):
    return [os.path.join(pass_dir, "QuantizeKvCache.cpp")] + sorted(
        glob.glob(os.path.join(pass_dir, "kvcache", "*.cpp")))


def extract(paths):
    """(file, reason pieces, characters a test must show) of every remark,
    the reason without the leading "not adopted: "."""
    remarks = []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            toks = tokenize(f.read())
        for k, (kind, v) in enumerate(toks):
            if kind != "str" or "not adopted: " not in v:
                continue
            pieces = message(toks, k, v.split("not adopted: ", 1)[1])
            literal = "".join(p for p in pieces if p is not HOLE)
            # "not adopted: " + why, or "this is not a softmax: " + why:
            # the reasons are the fail()/notSoftmax() messages.
            if pieces[-1] is HOLE and len(pieces) == 2 and \
                    (literal == "" or literal.endswith(": ")):
                continue
            if not literal.strip():
                continue
            remarks.append((path, pieces, MIN_CHARS))
        for pieces in call_messages(toks, "notSoftmax"):
            pieces[0] = "this is not a softmax: " + pieces[0]
            remarks.append((path, pieces, MIN_CHARS))
        if os.path.basename(path) == "Layout.cpp":
            for pieces in call_messages(toks, "fail"):
                remarks.append((path, pieces, MIN_CHARS))
        if os.path.basename(path) == "BlockedSoftmax.cpp":
            for pieces in first_arg_messages(toks, "refuse"):
                if pieces[0] is HOLE or not pieces[0]:
                    continue
                pieces[0] = BLOCKED + pieces[0]
                # The shared opening says nothing of the reason.
                remarks.append((path, pieces, len(BLOCKED) + MIN_CHARS))
    return remarks


def norm(s):
    return re.sub(r"\s+", " ", s).strip()


def pattern(pieces, min_chars):
    """A regex for the reason's first MIN_CHARS literal characters (all of
    them when shorter), each non-literal piece matching any text."""
    out, chars = [], 0
    for p in pieces:
        if chars >= min_chars:
            break
        if p is HOLE:
            out.append(".+?")
            continue
        p = norm(p) if not out else re.sub(r"\s+", " ", p)
        take = p[:max(min_chars - chars, 0)] if chars + len(p) > min_chars \
            else p
        # A piece cut short is extended to a word end, so that "covers "
        # does not match "covers no".
        if len(take) < len(p):
            take = p[:len(take) + len(re.match(r"\S*", p[len(take):])[0])]
        out.append(re.escape(take))
        chars += len(take)
    while out and out[-1] == ".+?":
        out.pop()
    return re.compile("not adopted: " + "".join(out))


def expected_remarks(test_dir):
    texts = []
    for path in sorted(glob.glob(os.path.join(test_dir, "*.mlir"))):
        with open(path, encoding="utf-8") as f:
            for line in f:
                m = re.search(r"expected-remark\S*\s*\{\{(.*)\}\}", line)
                if m:
                    texts.append(norm(m.group(1)))
    return texts


def shown(pieces):
    return "".join("<...>" if p is HOLE else p for p in pieces)


def main(argv):
    if len(argv) != 3:
        sys.stderr.write(__doc__)
        return 2
    remarks = extract(sources(argv[1]))
    tests = expected_remarks(argv[2])
    # The pass has dozens of remarks; a handful means the sources moved.
    if len(remarks) < 40:
        print("only %d remarks found under %s: are all sources read?"
              % (len(remarks), argv[1]))
        return 1
    uncovered, seen, unreachable = [], set(), 0
    for path, pieces, min_chars in remarks:
        text = shown(pieces)
        if text in seen:
            continue
        seen.add(text)
        if any(text.startswith(k) for k in UNREACHABLE):
            unreachable += 1
            continue
        pat = pattern(pieces, min_chars)
        if not any(pat.search(t) for t in tests):
            uncovered.append((path, text))
    for path, text in uncovered:
        print("%s: no lit test for remark: not adopted: %s"
              % (os.path.basename(path), norm(text)))
    reachable = len(seen) - unreachable
    if uncovered:
        print("%d of %d remarks have no lit test"
              % (len(uncovered), reachable))
        return 1
    print("all %d remarks have a lit test (%d more allowed as unreachable)"
          % (reachable, unreachable))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
