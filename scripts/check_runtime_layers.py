#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Checks that the runtime's layers only point down (docs/ARCHITECTURE.md).

Every `#include "..."` (and `#include <...>` naming a runtime file) under
runtime/ is resolved the way the compiler does it: first beside the
including file, then by bare name in the folders of the layers. It fails
when
  - a folder includes a file of a layer it does not use (an upward or
    sideways include), or an ISA folder's file (kernels/x86, kernels/neon)
    from a source not of that ISA (one outside that folder whose name
    does not carry the ISA: kernels/attend/attend_avx2.cpp may include
    kernels/x86/avx2_util.h, kernels/attend/attend_ref.cpp may not);
  - a quoted include names no runtime file (quoted includes are the
    project's own, so a typo or a stale path is caught here too);
  - one bare name exists in two include folders (the lookup would depend on
    their order);
  - the layers runtime/CMakeLists.txt declares (kvq_runtime_layer ... USES)
    do not give each folder exactly the layers of LADDER below, so the
    build's include directories and this check agree.

  scripts/check_runtime_layers.py [--root DIR]    check the tree
  scripts/check_runtime_layers.py --self-test     show it fails on a bad
                                                  include (a scratch copy)
exits 1 naming each problem (file:line). ctest runs both (runtime_layering,
runtime_layering_self_test).
"""
import argparse
import pathlib
import re
import shutil
import sys
import tempfile

# Each layer and the layers it uses directly; a layer may include its own
# files and those of every layer it reaches. `include` is runtime/include
# (the public C headers); `metal` is runtime/metal, whose own files include
# each other by relative path.
LADDER = {
    "include": [],
    "base": ["include"],
    "methods": ["base"],
    "layout": ["methods", "base"],
    "kernels": ["layout"],
    "checks": ["kernels"],
    "cpu": ["kernels"],
    "metal": ["checks"],
    "api": ["cpu", "checks"],
}

# The folders a bare name is looked up in, per layer (the include
# directories runtime/CMakeLists.txt gives each object library).
INCLUDE_DIRS = {
    "include": ["include"],
    "base": ["base"],
    "methods": ["methods"],
    "layout": ["layout"],
    "kernels": ["kernels"] + [f"kernels/{op}" for op in (
        "attend", "convert", "lloyd", "matmul", "outliers", "quantize",
        "rope")],
    "checks": ["checks"],
    "cpu": ["cpu", "cpu/stores"],
    "metal": [],
    "api": ["api"],
}

# Folders whose files only the sources of their ISA may include: files in
# the folder itself, and the kernels of that ISA in the operations' folders
# (kernels/<op>/<op>_<isa>[_<trick>].cpp, the ISA one of the tokens).
PRIVATE_FOLDERS = {
    "kernels/x86": {"x86", "avx2", "avx512"},
    "kernels/neon": {"neon"},
}


def of_isa(rel, private, isas):
    """Whether runtime/<rel> is a source of the ISA of `private`."""
    if str(rel).startswith(private + "/"):
        return True
    return (len(rel.parts) == 3 and rel.parts[0] == "kernels"
            and bool(isas & set(rel.stem.split("_")[1:])))

SOURCES = {".h", ".cpp", ".def", ".mm", ".metal"}
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^">]+)[">]')
# kvq_runtime_layer(<name> USES a b ... SOURCES|INCLUDES ...)
CMAKE_LAYER = re.compile(r"kvq_runtime_layer\((\w+)([^)]*)\)", re.S)


def closure(direct):
    """Every layer reachable from each layer (itself included)."""
    out = {}
    for layer in direct:
        seen, todo = {layer}, [layer]
        while todo:
            for d in direct.get(todo.pop(), []):
                if d not in seen:
                    seen.add(d)
                    todo.append(d)
        out[layer] = seen
    return out


def layer_of(rel):
    first = rel.parts[0]
    return first if first in LADDER else None


def check_cmake(runtime):
    """The USES of runtime/CMakeLists.txt reach what LADDER reaches."""
    text = (runtime / "CMakeLists.txt").read_text()
    declared = {}
    for name, args in CMAKE_LAYER.findall(text):
        if name == "name":  # the function's own definition
            continue
        words = args.split()
        uses, on = [], False
        for w in words:
            if w in ("SOURCES", "INCLUDES"):
                on = False
            elif w == "USES":
                on = True
            elif on:
                uses.append(w)
        declared[name] = uses
    problems = []
    want = closure(LADDER)
    declared.setdefault("include", [])
    # metal is declared in runtime/metal/CMakeLists.txt (uses checks).
    metal = (runtime / "metal" / "CMakeLists.txt").read_text()
    m = re.search(r"target_link_libraries\(\$\{target\}_obj PUBLIC ([\w ]+)\)",
                  metal)
    declared["metal"] = ([w.removeprefix("kvq_rt_") for w in m.group(1).split()]
                         if m else [])
    got = closure(declared)
    for layer in LADDER:
        if layer not in declared:
            problems.append(f"runtime/CMakeLists.txt: no layer `{layer}`")
        elif got[layer] != want[layer]:
            problems.append(
                f"runtime/CMakeLists.txt: layer `{layer}` reaches "
                f"{sorted(got[layer])}, the ladder says {sorted(want[layer])}")
    return problems


def check_includes(runtime):
    problems = []
    reach = closure(LADDER)
    # Bare names: where each can be found.
    where = {}
    for layer, dirs in INCLUDE_DIRS.items():
        for d in dirs:
            for f in (runtime / d).rglob("*"):
                if f.is_file():
                    name = str(f.relative_to(runtime / d))
                    where.setdefault(name, []).append(f)
    for name, found in sorted(where.items()):
        if len(found) > 1 and "/" not in name:
            problems.append(f"runtime: `{name}` is in "
                            f"{', '.join(str(f.relative_to(runtime)) for f in found)}"
                            " (bare names must be unique)")
    for path in sorted(runtime.rglob("*")):
        if not path.is_file() or path.suffix not in SOURCES:
            continue
        rel = path.relative_to(runtime)
        src = layer_of(rel)
        if src is None:
            continue
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            kind, name = m.groups()
            target = None
            if kind == '"' and (path.parent / name).is_file():
                target = (path.parent / name).resolve()
            elif name in where:
                target = where[name][0].resolve()
            if target is None:
                if kind == '"':
                    problems.append(f"runtime/{rel}:{n}: \"{name}\" is no "
                                    "runtime file")
                continue
            try:
                trel = target.relative_to(runtime.resolve())
            except ValueError:
                problems.append(f"runtime/{rel}:{n}: \"{name}\" is outside "
                                "runtime/")
                continue
            dst = layer_of(trel)
            if dst not in reach[src]:
                problems.append(
                    f"runtime/{rel}:{n}: includes runtime/{trel}: layer "
                    f"`{src}` does not use `{dst}` (it uses "
                    f"{', '.join(sorted(reach[src] - {src})) or 'nothing'})")
                continue
            for private, isas in PRIVATE_FOLDERS.items():
                if (str(trel).startswith(private + "/")
                        and not of_isa(rel, private, isas)):
                    problems.append(
                        f"runtime/{rel}:{n}: includes runtime/{trel}, "
                        f"private to the {'/'.join(sorted(isas))} sources")
    return problems


def check(root):
    runtime = root / "runtime"
    return check_cmake(runtime) + check_includes(runtime)


def self_test(root):
    """A copy of runtime/ with an upward include must fail, naming it."""
    with tempfile.TemporaryDirectory() as tmp:
        copy = pathlib.Path(tmp)
        shutil.copytree(root / "runtime", copy / "runtime")
        clean = check(copy)
        if clean:
            print("self-test: the unchanged copy already fails:")
            print("\n".join(clean))
            return 1
        bad = copy / "runtime" / "layout" / "fp16.cpp"
        bad.write_text(bad.read_text() + '#include "store.h"\n')
        problems = check(copy)
        if not any("layout/fp16.cpp" in p and "`cpu`" in p for p in problems):
            print("self-test: an include of cpu/stores/store.h from layout/ "
                  "passed")
            return 1
        print("\n".join(problems))
        print("self-test: the upward include was caught")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=pathlib.Path,
                    default=pathlib.Path(__file__).resolve().parent.parent)
    ap.add_argument("--self-test", action="store_true")
    args = ap.parse_args()
    if args.self_test:
        return self_test(args.root)
    problems = check(args.root)
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} layering problem(s)")
        return 1
    print("runtime layers: every include points down")
    return 0


if __name__ == "__main__":
    sys.exit(main())
