// kvq-run --perplexity: perplexity with its standard error (± ppl,
// ppl_stderr) and, with --kl-divergence, each method's mean KL divergence
// from the fp16 cache's next-token distributions and its top-1 agreement
// with them (fp16 runs as the baseline even when not listed).
//
// RUN: head -3 %models/stories260K/eval.txt > %t.eval
// RUN: kvq-run %models/stories260K/stories260K.bin --perplexity %t.eval --method "kivi{bits=2}" --kl-divergence --json > %t.kl.json
// RUN: %python %S/Inputs/check_perplexity_json.py kl %t.kl.json
// RUN: FileCheck %s --check-prefix=KLJSON --input-file=%t.kl.json
// KLJSON: "kl_baseline": "fp16",
// KLJSON: {"method": "none",
// KLJSON-NEXT: {"method": "fp16", {{.*}}"kl_divergence": 0.0, "kl_divergence_stderr": 0.0, "top1_agreement": 1.0,
// KLJSON-NEXT: {"method": "kivi{bits=2}",
//
// The human table: ± after the perplexity, KL and top-1 columns.
// RUN: kvq-run %models/stories260K/stories260K.bin --perplexity %t.eval --method "kivi{bits=2}" --kl-divergence 2>/dev/null | FileCheck %s --check-prefix=TABLE
// TABLE: method {{.*}} perplexity ± ppl delta KL div ± KL top-1 % tok/s
// TABLE-NEXT: none 32.00 {{[0-9]+}} {{[0-9]+\.[0-9]+}} 0.{{[0-9]*[1-9][0-9]*}} +0.0000 {{[0-9.]+}}
// TABLE-NEXT: fp16 16.00 {{[0-9]+}} {{[0-9]+\.[0-9]+}} 0.{{[0-9]*[1-9][0-9]*}} {{[-+][0-9.]+}} 0.000000 0.000000 100.00
// TABLE-NEXT: kivi{bits=2} {{[0-9.]+}} {{[0-9]+}} {{[0-9.]+}} 0.{{[0-9]*[1-9][0-9]*}} {{[-+][0-9.]+}} 0.{{[0-9]*[1-9][0-9]*}} 0.
//
// Without --kl-divergence no KL keys and no fp16 row added; ppl_stderr is
// there.
// RUN: kvq-run %models/stories260K/stories260K.bin --perplexity %t.eval --method kivi --json | FileCheck %s --check-prefix=NOKL
// NOKL-NOT: kl_
// NOKL: {"method": "none", {{.*}}"ppl_stderr": 0.{{[0-9]+}},
// NOKL-NEXT: {"method": "kivi", {{.*}}"ppl_stderr": 0.{{[0-9]+}},
// NOKL-NOT: kl_
//
// The standard error against two one-token runs: one decoded token each
// (no standard error: null, n/a), then both together.
// RUN: printf '1 403 407 261 378\n' > %t.a
// RUN: printf '1 403 407 261 430\n' > %t.b
// RUN: cat %t.a %t.b > %t.ab
// RUN: kvq-run %models/stories260K/stories260K.bin --tokens %t.a --prefill 4 --method none --json > %t.a.json
// RUN: kvq-run %models/stories260K/stories260K.bin --tokens %t.b --prefill 4 --method none --json > %t.b.json
// RUN: kvq-run %models/stories260K/stories260K.bin --tokens %t.ab --prefill 4 --method none --json > %t.ab.json
// RUN: %python %S/Inputs/check_perplexity_json.py stderr %t.a.json %t.b.json %t.ab.json
// RUN: FileCheck %s --check-prefix=ONE --input-file=%t.a.json
// ONE: "ppl_stderr": null,
// RUN: kvq-run %models/stories260K/stories260K.bin --tokens %t.a --prefill 4 --method none 2>/dev/null | FileCheck %s --check-prefix=ONETABLE
// ONETABLE: none 32.00 {{[0-9]+}} {{[0-9.]+}} n/a +0.0000
