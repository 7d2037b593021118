#!/usr/bin/env python3
"""Runs a decode graph before and after --kvq-quantize-kv-cache and compares.

Each `// -----` chunk of the input holding a line

    // EQUIV: func=NAME caches=I,J [cache_results=R,S] [pos=P] steps=N
    //        [tokens=T] [gap=G] [mask=M] [outs=K,L] [options=OPT,OPT]

is compiled twice: as written, with zero-filled caches threaded from one call
to the next, and rewritten by `kvq-opt --kvq-quantize-kv-cache=method=fp16`,
with a `!kvq.cache` made by @kv_cache_create. Both run N steps (step i at
position i*T; a position tensor of T elements holds i*T .. i*T + T - 1,
torch's cache_position for a chunk, or with `gap` i*T + j*G) on the same
inputs, made from a sine of the element index,
the argument number and the step, and every non-cache result of every step
must agree within fp16 rounding of the cached K and V. Without `pos` the
graph has no position argument (a cache grown by concatenation starts
empty); `options` are added to the pass's. A graph on buffers (memref
arguments) gets its caches allocated once and updated in
place (no `cache_results` unless it returns them), its inputs as buffers,
and `outs=K,L` names the output buffers it writes, printed after each step
with its memref results. Argument M, when
given, is the causal attention mask a caller passes (Hugging Face's
`attention_mask` as SDPA takes it): [.., queries, positions], 0 where
position t <= pos + n and the float type's lowest value elsewhere. A chunk the pass does
not rewrite fails, as does a mismatch; the script names the chunk, step and
element.

Usage: equivalence.py FILE --run "RUNNER COMMAND" [--kvq-opt PATH]
"""
import argparse
import re
import shlex
import subprocess
import sys


def split_top(text, sep=","):
    """Splits on `sep` outside <>, (), [] and {}."""
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch in "<([{":
            depth += 1
        elif ch in ">)]}":
            depth -= 1
        if ch == sep and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def signature(module, name):
    """(argument types, result types) of func @name in printed IR."""
    start = module.find("func.func @%s(" % name)
    if start < 0:
        sys.exit("equivalence: no func.func @%s in the module" % name)
    i = module.index("(", start) + 1
    depth, j = 1, i
    while depth:
        depth += {"(": 1, ")": -1}.get(module[j], 0)
        j += 1
    args = [a.split(":", 1)[1].strip() for a in split_top(module[i:j - 1])]
    rest = module[j:module.index("{", j)].split("attributes")[0]
    results = []
    if "->" in rest:
        r = rest.split("->", 1)[1].strip()
        if r.startswith("("):
            r = r[1:r.rindex(")")]
        results = split_top(r)
    return args, results


def is_memref(t):
    return t.startswith("memref<")


def identity(t):
    """A memref type without its layout (strided<...>)."""
    return split_top(t[len("memref<"):-1])[0].join(["memref<", ">"])


def tensor_of(t):
    """The tensor type of a memref type."""
    if not is_memref(t):
        return t
    return "tensor<" + identity(t)[len("memref<"):]


def with_layout(e, v, t):
    """A dense buffer `v` passed as type `t` (one-shot-bufferize's default
    boundary type has a fully dynamic layout)."""
    if identity(t) == t:
        return v
    u = e.fresh()
    e.emit("%s = memref.cast %s : %s to %s" % (u, v, identity(t), t))
    return u


def nested(dims, values):
    """A dense literal of `dims` taking its elements from `values`."""
    if not dims:
        return str(next(values))
    return "[" + ", ".join(nested(dims[1:], values)
                           for _ in range(dims[0])) + "]"


def tensor_shape(t):
    m = re.fullmatch(r"tensor<((?:(?:\d+|\?)x)*)(f32|f16|bf16)>", tensor_of(t))
    if not m:
        sys.exit("equivalence: cannot make inputs of type %s" % t)
    dims = [-1 if d == "?" else int(d) for d in m.group(1).split("x") if d]
    return dims, m.group(2)


class Emitter:
    def __init__(self):
        self.lines, self.n = [], 0

    def fresh(self):
        self.n += 1
        return "%%v%d" % self.n

    def emit(self, line):
        self.lines.append("    " + line)


def open_generic(e, t):
    """Opens a linalg.generic that fills a tensor of type `t` from its
    indices; returns its dims, element type, rank and result name."""
    dims, el = tensor_shape(t)
    rank = len(dims)
    ids = ", ".join("d%d" % k for k in range(rank))
    idmap = "affine_map<(%s) -> (%s)>" % (ids, ids)
    empty, out = e.fresh(), e.fresh()
    e.emit("%s = tensor.empty() : %s" % (empty, t))
    e.emit("%s = linalg.generic {indexing_maps = [%s], iterator_types = [%s]}"
           " outs(%s : %s) {" % (out, idmap, ", ".join(['"parallel"'] * rank),
                                 empty, t))
    return dims, el, rank, out


def make_input(e, t, seed, step):
    dims, el, rank, out = open_generic(e, t)
    e.emit("^bb0(%%o: %s):" % el)
    flat = None
    for k in range(rank):
        idx = e.fresh()
        e.emit("  %s = linalg.index %d : index" % (idx, k))
        if flat is None:
            flat = idx
        else:
            c, m, a = e.fresh(), e.fresh(), e.fresh()
            e.emit("  %s = arith.constant %d : index" % (c, dims[k]))
            e.emit("  %s = arith.muli %s, %s : index" % (m, flat, c))
            e.emit("  %s = arith.addi %s, %s : index" % (a, m, idx))
            flat = a
    if flat is None:
        flat = e.fresh()
        e.emit("  %s = arith.constant 0 : index" % flat)
    i64, f, arg, s, x, y = (e.fresh() for _ in range(6))
    e.emit("  %s = arith.index_cast %s : index to i64" % (i64, flat))
    e.emit("  %s = arith.sitofp %s : i64 to f32" % (f, i64))
    e.emit("  %s = arith.constant %f : f32" % (s, 0.731 + 0.117 * seed))
    e.emit("  %s = arith.mulf %s, %s : f32" % (arg, f, s))
    off = e.fresh()
    e.emit("  %s = arith.constant %f : f32" % (off, 1.37 * step + 0.5 * seed))
    e.emit("  %s = arith.addf %s, %s : f32" % (x, arg, off))
    e.emit("  %s = math.sin %s : f32" % (y, x))
    if el != "f32":
        z = e.fresh()
        e.emit("  %s = arith.truncf %s : f32 to %s" % (z, y, el))
        y = z
    e.emit("  linalg.yield %s : %s" % (y, el))
    e.emit("} -> %s" % t)
    return out


def make_mask(e, t, pos):
    dims, el, rank, out = open_generic(e, t)
    n, tt, p, lim, hide, zero, low, r = (e.fresh() for _ in range(8))
    e.emit("^bb0(%%o: %s):" % el)
    e.emit("  %s = linalg.index %d : index" % (n, rank - 2))
    e.emit("  %s = linalg.index %d : index" % (tt, rank - 1))
    e.emit("  %s = arith.constant %d : index" % (p, pos))
    e.emit("  %s = arith.addi %s, %s : index" % (lim, p, n))
    e.emit("  %s = arith.cmpi sgt, %s, %s : index" % (hide, tt, lim))
    e.emit("  %s = arith.constant 0.0 : %s" % (zero, el))
    lowest = {"f32": "0xFF7FFFFF", "f16": "0xFBFF", "bf16": "0xFF7F"}[el]
    e.emit("  %s = arith.constant %s : %s" % (low, lowest, el))
    e.emit("  %s = arith.select %s, %s, %s : %s" % (r, hide, low, zero, el))
    e.emit("  linalg.yield %s : %s" % (r, el))
    e.emit("} -> %s" % t)
    return out


def as_tensor(e, v, t):
    """A buffer read as a tensor (a memref the graph wrote or returned)."""
    if not is_memref(t):
        return v, t
    u = e.fresh()
    e.emit("%s = bufferization.to_tensor %s restrict : %s to %s" % (
        u, v, t, tensor_of(t)))
    return u, tensor_of(t)


def as_buffer(e, v, t):
    """A tensor input passed to a graph that takes a buffer."""
    if not is_memref(t):
        return v
    u = e.fresh()
    e.emit("%s = bufferization.to_buffer %s : %s to %s" % (
        u, v, tensor_of(t), identity(t)))
    return with_layout(e, u, t)


def print_result(e, v, t):
    v, t = as_tensor(e, v, t)
    dims, el = tensor_shape(t)
    if el != "f32":
        rank = len(dims)
        ids = ", ".join("d%d" % k for k in range(rank))
        idmap = "affine_map<(%s) -> (%s)>" % (ids, ids)
        f32t = t.replace(el + ">", "f32>")
        empty, out, x = e.fresh(), e.fresh(), e.fresh()
        e.emit("%s = tensor.empty() : %s" % (empty, f32t))
        e.emit("%s = linalg.generic {indexing_maps = [%s, %s], iterator_types"
               " = [%s]} ins(%s : %s) outs(%s : %s) {" % (
                   out, idmap, idmap, ", ".join(['"parallel"'] * rank), v, t,
                   empty, f32t))
        e.emit("^bb0(%%i: %s, %%o: f32):" % el)
        e.emit("  %s = arith.extf %%i : %s to f32" % (x, el))
        e.emit("  linalg.yield %s : f32" % x)
        e.emit("} -> %s" % f32t)
        v, t = out, f32t
    u = e.fresh()
    e.emit("%s = tensor.cast %s : %s to tensor<*xf32>" % (u, v, t))
    e.emit("call @printMemrefF32(%s) : (tensor<*xf32>) -> ()" % u)


def driver(name, args, results, spec, rewritten_args=None):
    e = Emitter()
    caches = spec["caches"]
    cache_results = spec.get("cache_results", [])
    pos_arg = spec.get("pos", -1)
    tokens = spec.get("tokens", 1)
    state = {}
    if rewritten_args is None:
        for c in caches:
            dims, el = tensor_shape(args[c])
            z, empty, fill = e.fresh(), e.fresh(), e.fresh()
            e.emit("%s = arith.constant 0.0 : %s" % (z, el))
            # A cache grown by concatenation starts empty.
            sizes = ""
            if "?" in tensor_of(args[c]):
                sizes = e.fresh()
                e.emit("%s = arith.constant 0 : index" % sizes)
            if is_memref(args[c]):
                # A buffer the graph updates in place: one for all steps.
                e.emit("%s = memref.alloc(%s) : %s" % (
                    empty, sizes, identity(args[c])))
                e.emit("linalg.fill ins(%s : %s) outs(%s : %s)" % (
                    z, el, empty, identity(args[c])))
                state[c] = with_layout(e, empty, args[c])
                continue
            e.emit("%s = tensor.empty(%s) : %s" % (empty, sizes, args[c]))
            e.emit("%s = linalg.fill ins(%s : %s) outs(%s : %s) -> %s" % (
                fill, z, el, empty, args[c], args[c]))
            state[c] = fill
    else:
        cache_type = next(t for t in rewritten_args
                          if t.startswith("!") and "tensor" not in t)
        cache = e.fresh()
        e.emit("%s = call @kv_cache_create() : () -> %s" % (cache, cache_type))
    for step in range(spec["steps"]):
        pos = e.fresh()
        if pos_arg >= 0:
            # A position tensor (torch's cache_position) holds it densely,
            # or, with one element per new token, the chunk's positions.
            value = step * tokens
            if args[pos_arg].startswith("tensor<"):
                dims = [int(d) for d in re.findall(r"(\d+)x", args[pos_arg])]
                count = 1
                for d in dims:
                    count *= d
                if count == tokens and tokens > 1:
                    gap = spec.get("gap", 1)
                    value = "dense<%s>" % nested(
                        dims, iter(range(value, value + tokens * gap, gap)))
                else:
                    value = "dense<%d>" % value
            e.emit("%s = arith.constant %s : %s" % (pos, value,
                                                    args[pos_arg]))
        inputs = {}
        for k, t in enumerate(args):
            if k in caches or k == pos_arg:
                continue
            if k in spec.get("outs", []):
                # An output buffer the graph writes.
                buf = e.fresh()
                e.emit("%s = memref.alloc() : %s" % (buf, identity(t)))
                inputs[k] = with_layout(e, buf, t)
                continue
            tt = tensor_of(t)
            inputs[k] = as_buffer(e, make_mask(e, tt, step * tokens)
                                  if k == spec.get("mask") else
                                  make_input(e, tt, k, step), t)
        if rewritten_args is None:
            operands = [state[k] if k in caches else
                        pos if k == pos_arg else inputs[k]
                        for k in range(len(args))]
            types, rtypes = args, results
        else:
            plain = [k for k in range(len(args)) if k not in caches]
            operands, it = [], iter(plain)
            for t in rewritten_args:
                if t.startswith("!") and "tensor" not in t:
                    operands.append(cache)
                else:
                    k = next(it)
                    operands.append(pos if k == pos_arg else inputs[k])
            types = rewritten_args
            rtypes = [t for r, t in enumerate(results)
                      if r not in cache_results]
        outs = [e.fresh() for _ in rtypes]
        lhs = (", ".join(outs) + " = ") if outs else ""
        e.emit("%scall @%s(%s) : (%s) -> (%s)" % (
            lhs, name, ", ".join(operands), ", ".join(types), ", ".join(rtypes)))
        if rewritten_args is None:
            for c, r in zip(caches, cache_results):
                if not is_memref(args[c]):
                    state[c] = outs[r]
            shown = [(outs[r], t) for r, t in enumerate(results)
                     if r not in cache_results]
        else:
            shown = list(zip(outs, rtypes))
        for k in spec.get("outs", []):
            shown.append((inputs[k], args[k]))
        for v, t in shown:
            print_result(e, v, t)
    if rewritten_args is not None:
        e.emit("call @kv_cache_destroy(%s) : (%s) -> ()" % (cache, cache_type))
    body = "\n".join(e.lines)
    return ("  func.func @main() {\n%s\n    return\n  }\n"
            "  func.func private @printMemrefF32(tensor<*xf32>)\n" % body)


def with_driver(module, drv):
    end = module.rstrip().rindex("}")
    return module[:end] + drv + "}\n"


def numbers(text):
    vals = []
    for line in text.splitlines():
        if line.startswith("Unranked Memref"):
            continue
        vals += [float(x) for x in
                 re.findall(r"-?(?:\d+\.?\d*(?:e[-+]?\d+)?|nan|inf)", line)]
    return vals


def run(cmd, stdin, what):
    p = subprocess.run(cmd, input=stdin, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("equivalence: %s failed (%d):\n%s" % (what, p.returncode,
                                                       p.stderr[:3000]))
    return p.stdout


def check_chunk(chunk, spec, opts):
    name = spec["func"]
    plain = run([opts.kvq_opt, "-"], chunk, "parsing the graph")
    options = " ".join(["method=fp16"] + spec.get("options", []))
    rewritten = run([opts.kvq_opt, "-", "--kvq-quantize-kv-cache=" + options],
                    chunk, "the rewrite")
    if "kvq.cache_attend" not in rewritten:
        sys.exit("equivalence: @%s was not rewritten" % name)
    args, results = signature(plain, name)
    rargs, _ = signature(rewritten, name)
    runner = shlex.split(opts.run)
    out = []
    for module, ra, which in ((plain, None, "original"),
                              (rewritten, rargs, "rewritten")):
        full = with_driver(module, driver(name, args, results, spec, ra))
        lowered = run([opts.kvq_opt, "-", "--kvq-to-llvm"], full,
                      "lowering the %s graph" % which)
        out.append(numbers(run(runner, lowered,
                               "running the %s graph" % which)))
    ref, got = out
    if not ref or len(ref) != len(got):
        sys.exit("equivalence: @%s printed %d values before and %d after" % (
            name, len(ref), len(got)))
    if max(abs(x) for x in ref) < 1e-3:
        sys.exit("equivalence: @%s computes all zeros: nothing is compared"
                 % name)
    worst = 0.0
    for i, (a, b) in enumerate(zip(ref, got)):
        err = abs(a - b)
        if not err <= 4e-3 + 4e-3 * abs(a):
            sys.exit("equivalence: @%s value %d: %g before, %g after" % (
                name, i, a, b))
        worst = max(worst, err)
    print("@%s: %d values over %d steps agree (max |diff| %.2g)" % (
        name, len(ref), spec["steps"], worst))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("--run", required=True)
    ap.add_argument("--kvq-opt", default="kvq-opt")
    opts = ap.parse_args()
    text = open(opts.file).read()
    checked = 0
    for chunk in re.split(r"^// -----$", text, flags=re.M):
        m = re.search(r"^// EQUIV: (.*)$", chunk, re.M)
        if not m:
            continue
        spec = {}
        for kv in m.group(1).split():
            k, v = kv.split("=", 1)
            if k == "func":
                spec[k] = v
            elif k == "options":
                spec[k] = v.split(",")
            elif k in ("caches", "cache_results", "outs"):
                spec[k] = [int(x) for x in v.split(",") if x]
            else:
                spec[k] = int(v)
        check_chunk(chunk, spec, opts)
        checked += 1
    if not checked:
        sys.exit("equivalence: no `// EQUIV:` chunk in %s" % opts.file)


if __name__ == "__main__":
    main()
