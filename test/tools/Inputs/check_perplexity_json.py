# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Checks of kvq-run --perplexity --json output (test/tools/kvq-run-kl-divergence.mlir).
#   check_perplexity_json.py kl FILE
#       --kl-divergence with fp16 and a 2-bit method: fp16's KL to itself is
#       0 and its top-1 agreement 1, the 2-bit method's KL is > 0, every
#       ppl_stderr is present and positive.
#   check_perplexity_json.py stderr A.json B.json AB.json
#       A and B each decode one token (NLL a = ln ppl_A, b = ln ppl_B, no
#       standard error from one sample); AB decodes both, so its perplexity
#       is exp((a + b) / 2) and its ppl_stderr exp((a + b) / 2) * |a - b| / 2
#       (the sample standard deviation of two values over sqrt(2)).
import json
import math
import sys


def rows(path):
    with open(path) as f:
        return {r["method"]: r for r in json.load(f)["results"]}


def check_kl(path):
    r = rows(path)
    fp16, kivi = r["fp16"], r["kivi{bits=2}"]
    assert fp16["kl_divergence"] == 0, fp16
    assert fp16["top1_agreement"] == 1, fp16
    assert kivi["kl_divergence"] > 0, kivi
    assert 0 <= kivi["top1_agreement"] <= 1, kivi
    for m, x in r.items():
        assert x["ppl_stderr"] is not None and x["ppl_stderr"] > 0, (m, x)
        assert x["kl_divergence"] >= 0, (m, x)
    print("ok: kivi KL %.6g, top-1 %.4f" %
          (kivi["kl_divergence"], kivi["top1_agreement"]))


def check_stderr(a_path, b_path, ab_path):
    a, b, ab = rows(a_path)["none"], rows(b_path)["none"], rows(ab_path)["none"]
    assert a["ppl_stderr"] is None and b["ppl_stderr"] is None, (a, b)
    na, nb = math.log(a["perplexity"]), math.log(b["perplexity"])
    assert abs(na - nb) > 1e-3, "the two tokens must differ in NLL"
    ppl = math.exp((na + nb) / 2)
    se = ppl * abs(na - nb) / 2
    assert abs(ab["perplexity"] - ppl) <= 1e-5 * ppl, (ab, ppl)
    assert abs(ab["ppl_stderr"] - se) <= 1e-4 * se + 1e-6, (ab, se)
    print("ok: ppl %.6f +- %.6f" % (ppl, se))


if sys.argv[1] == "kl":
    check_kl(sys.argv[2])
else:
    check_stderr(*sys.argv[2:5])
