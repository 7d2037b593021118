// One command-line rule for every kvq tool (docs/CLI.md): a valued flag
// takes `--flag value` or `--flag=value`; an unknown flag, a missing value
// or a bad number is one line "TOOL: message" on stderr and exit status 2.
// kvq-opt (MLIR's MlirOptMain) takes both spellings; its errors are
// MLIR's.
//
// Both spellings bind the value (a bad value is named in the error):
// RUN: sh -c 'kvq-eval --keys x.npy --method kivi --bits=99; echo "status $?"' > %t.eq 2>&1
// RUN: sh -c 'kvq-eval --keys x.npy --method kivi --bits 99; echo "status $?"' > %t.sp 2>&1
// RUN: FileCheck %s --check-prefix=EVAL --input-file=%t.eq
// RUN: FileCheck %s --check-prefix=EVAL --input-file=%t.sp
// EVAL-NOT: {{.}}
// EVAL: kvq-eval: --bits expects an integer in [1, 16], got '99'
// EVAL-NEXT: status 2
//
// A float flag with an open bound (kvq-eval --rope-theta, kvq::ropeRule):
// RUN: sh -c 'kvq-eval --keys x.npy --method kivi --pre-rope --rope-theta=1; echo "status $?"' > %t.eq 2>&1
// RUN: sh -c 'kvq-eval --keys x.npy --method kivi --pre-rope --rope-theta 1; echo "status $?"' > %t.sp 2>&1
// RUN: FileCheck %s --check-prefix=THETA --input-file=%t.eq
// RUN: FileCheck %s --check-prefix=THETA --input-file=%t.sp
// THETA-NOT: {{.}}
// THETA: kvq-eval: --rope-theta expects a number in (1, 1e+09], got '1'
// THETA-NEXT: status 2
//
// RUN: sh -c 'kvq-bench --layers=x; echo "status $?"' > %t.eq 2>&1
// RUN: sh -c 'kvq-bench --layers x; echo "status $?"' > %t.sp 2>&1
// RUN: FileCheck %s --check-prefix=BENCH --input-file=%t.eq
// RUN: FileCheck %s --check-prefix=BENCH --input-file=%t.sp
// BENCH-NOT: {{.}}
// BENCH: kvq-bench: --layers expects an integer in [1, 4096], got 'x'
// BENCH-NEXT: status 2
//
// RUN: sh -c 'kvq-run %models/stories260K/stories260K.bin --steps=x; echo "status $?"' > %t.eq 2>&1
// RUN: sh -c 'kvq-run %models/stories260K/stories260K.bin --steps x; echo "status $?"' > %t.sp 2>&1
// RUN: FileCheck %s --check-prefix=RUNV --input-file=%t.eq
// RUN: FileCheck %s --check-prefix=RUNV --input-file=%t.sp
// RUNV-NOT: {{.}}
// RUNV: kvq-run: for the --steps option: 'x' value invalid
// RUNV-NEXT: status 2
//
// RUN: sh -c 'kvq-import %models/stories260K/stories260K.bin --context=x; echo "status $?"' > %t.eq 2>&1
// RUN: sh -c 'kvq-import %models/stories260K/stories260K.bin --context x; echo "status $?"' > %t.sp 2>&1
// RUN: FileCheck %s --check-prefix=IMPV --input-file=%t.eq
// RUN: FileCheck %s --check-prefix=IMPV --input-file=%t.sp
// IMPV-NOT: {{.}}
// IMPV: kvq-import: for the --context option: 'x' value invalid
// IMPV-NEXT: status 2
//
// RUN: sh -c 'kvq-demo --steps=x; echo "status $?"' > %t.eq 2>&1
// RUN: sh -c 'kvq-demo --steps x; echo "status $?"' > %t.sp 2>&1
// RUN: FileCheck %s --check-prefix=DEMO --input-file=%t.eq
// RUN: FileCheck %s --check-prefix=DEMO --input-file=%t.sp
// DEMO-NOT: {{.}}
// DEMO: kvq-demo: --steps expects an integer in [1, 1048576], got 'x'
// DEMO-NEXT: status 2
// RUN: sh -c 'kvq-demo --bogus; echo "status $?"' 2>&1 | FileCheck %s --check-prefix=UNK-DEMO
// UNK-DEMO-NOT: {{.}}
// UNK-DEMO: kvq-demo: unknown option '--bogus'
// UNK-DEMO-NEXT: status 2
//
// RUN: kvq-opt %s -o %t.a
// RUN: kvq-opt %s -o=%t.b
// RUN: diff %t.a %t.b
//
// An unknown flag and a missing value:
// RUN: sh -c 'kvq-eval --bogus; echo "status $?"' 2>&1 | FileCheck %s --check-prefix=UNK-EVAL
// UNK-EVAL-NOT: {{.}}
// UNK-EVAL: kvq-eval: unknown option '--bogus'
// UNK-EVAL-NEXT: status 2
// RUN: sh -c 'kvq-bench --bogus; echo "status $?"' 2>&1 | FileCheck %s --check-prefix=UNK-BENCH
// UNK-BENCH-NOT: {{.}}
// UNK-BENCH: kvq-bench: unknown option '--bogus'
// UNK-BENCH-NEXT: status 2
// A kvq-opt named on the command line must exist (only the default one,
// next to kvq-bench, may be missing in a runtime-only build), checked
// before anything is timed:
// RUN: sh -c 'kvq-bench --smoke --only compile --kvq-opt %t.none; echo "status $?"' 2>&1 | FileCheck %s --check-prefix=NO-OPT
// NO-OPT-NOT: {{.}}
// NO-OPT: kvq-bench: --kvq-opt: no executable at '{{.*}}none'
// NO-OPT-NEXT: status 2
// RUN: sh -c 'kvq-run --bogus x; echo "status $?"' 2>&1 | FileCheck %s --check-prefix=UNK-RUNNER
// UNK-RUNNER-NOT: {{.}}
// UNK-RUNNER: kvq-run: Unknown command line argument '--bogus'.
// UNK-RUNNER-NEXT: status 2
// RUN: sh -c 'kvq-import --bogus x; echo "status $?"' 2>&1 | FileCheck %s --check-prefix=UNK-IMP
// UNK-IMP-NOT: {{.}}
// UNK-IMP: kvq-import: Unknown command line argument '--bogus'.
// UNK-IMP-NEXT: status 2
// RUN: sh -c 'kvq-eval --keys; echo "status $?"' 2>&1 | FileCheck %s --check-prefix=MISS-EVAL
// MISS-EVAL-NOT: {{.}}
// MISS-EVAL: kvq-eval: --keys needs a value
// MISS-EVAL-NEXT: status 2
// RUN: sh -c 'kvq-import x --context; echo "status $?"' 2>&1 | FileCheck %s --check-prefix=MISS-IMP
// MISS-IMP-NOT: {{.}}
// MISS-IMP: kvq-import: for the --context option: requires a value!
// MISS-IMP-NEXT: status 2

module {
}
