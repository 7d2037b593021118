// kvq-run --top-k / --top-p: sampling from the K most likely tokens and
// from the smallest set reaching probability P, the same for a seed.
//
// --top-k 1 keeps only the most likely token: the greedy text (temperature
// 0), whatever the temperature and the seed; so does a top-p below any
// token's probability.
// RUN: kvq-run %models/stories260K/stories260K.bin --steps 40 --method fp16,kivi --json | grep -o '"text": .*"' > %t.greedy
// RUN: kvq-run %models/stories260K/stories260K.bin --steps 40 --method fp16,kivi --temperature 1.5 --top-k 1 --seed 3 --json | grep -o '"text": .*"' > %t.k1
// RUN: kvq-run %models/stories260K/stories260K.bin --steps 40 --method fp16,kivi --temperature 1.5 --top-p 1e-9 --seed 4 --json | grep -o '"text": .*"' > %t.p0
// RUN: diff %t.greedy %t.k1
// RUN: diff %t.greedy %t.p0
// RUN: FileCheck %s --check-prefix=GREEDY --input-file=%t.greedy
// GREEDY: "text": ", there was a little girl named Lily.
//
// The same seed, the same text; sampling with a wider top-k departs from
// the greedy text on this prompt.
// RUN: kvq-run %models/stories260K/stories260K.bin --steps 40 --temperature 1 --top-k 5 --top-p 0.9 --seed 7 --json > %t.s1
// RUN: kvq-run %models/stories260K/stories260K.bin --steps 40 --temperature 1 --top-k 5 --top-p 0.9 --seed 7 --json > %t.s2
// RUN: grep -o '"text": .*"' %t.s1 > %t.s1.text
// RUN: grep -o '"text": .*"' %t.s2 > %t.s2.text
// RUN: diff %t.s1.text %t.s2.text
// RUN: kvq-run %models/stories260K/stories260K.bin --steps 40 --temperature 1 --top-k 5 --seed 7 --json | grep -o '"text": .*"' > %t.k5
// RUN: not diff %t.k5 %t.greedy
// RUN: FileCheck %s --check-prefix=JSON --input-file=%t.s1
// JSON: "temperature": 1.0,
// JSON-NEXT: "top_k": 5,
// JSON-NEXT: "top_p": 0.9,
//
// Bad values: one line naming the flag and its range, status 2.
// RUN: sh -c 'kvq-run %models/stories260K/stories260K.bin --top-p nan; echo "status $?"' 2>&1 | FileCheck %s --check-prefix=PNAN
// PNAN: kvq-run: --top-p expects a number in (0, 1], got 'nan'
// PNAN-NEXT: status 2
// RUN: sh -c 'kvq-run %models/stories260K/stories260K.bin --top-p 0; echo "status $?"' 2>&1 | FileCheck %s --check-prefix=PZERO
// PZERO: kvq-run: --top-p expects a number in (0, 1], got '0'
// PZERO-NEXT: status 2
// RUN: sh -c 'kvq-run %models/stories260K/stories260K.bin --top-p=1.01; echo "status $?"' 2>&1 | FileCheck %s --check-prefix=PBIG
// PBIG: kvq-run: --top-p expects a number in (0, 1], got '1.01'
// PBIG-NEXT: status 2
// RUN: sh -c 'kvq-run %models/stories260K/stories260K.bin --top-k 0; echo "status $?"' 2>&1 | FileCheck %s --check-prefix=KZERO
// KZERO: kvq-run: --top-k expects an integer in [1, 2147483647], got '0'
// KZERO-NEXT: status 2
// RUN: sh -c 'kvq-run %models/stories260K/stories260K.bin --top-k nan; echo "status $?"' 2>&1 | FileCheck %s --check-prefix=KNAN
// KNAN: kvq-run: --top-k expects an integer in [1, 2147483647], got 'nan'
// KNAN-NEXT: status 2
//
// They apply to generation only; --kl-divergence to perplexity only.
// RUN: printf '1 403 407 261 378 430\n' > %t.ids
// RUN: kvq-run %models/stories260K/stories260K.bin --tokens %t.ids --prefill 4 --top-k 3 --json 2>&1 >/dev/null | FileCheck %s --check-prefix=IGN
// IGN: kvq-run: warning: --top-k and --top-p apply to generation only: ignored
// RUN: sh -c 'kvq-run %models/stories260K/stories260K.bin --steps 2 --kl-divergence; echo "status $?"' 2>&1 | FileCheck %s --check-prefix=KLGEN
// KLGEN: kvq-run: error: --kl-divergence applies to --perplexity and --tokens
// KLGEN-NEXT: status 2
