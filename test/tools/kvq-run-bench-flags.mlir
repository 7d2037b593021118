// kvq-run --bench refuses a point it cannot time with one line naming the
// flag and the range, before it compiles anything: a context must leave
// room for the --bench-steps timed steps inside seq_len (stories260K: 512).
//
// RUN: not kvq-run %models/stories260K/stories260K.bin --bench --contexts -1 2>&1 | FileCheck %s --check-prefix=NEG
// NEG: kvq-run: error: --contexts: -1 is outside [0, 507] (seq_len 512 less 5 --bench-steps)
//
// RUN: not kvq-run %models/stories260K/stories260K.bin --bench --contexts 8,508 2>&1 | FileCheck %s --check-prefix=LATE
// LATE: kvq-run: error: --contexts: 508 is outside [0, 507] (seq_len 512 less 5 --bench-steps)
//
// A context near 2^63 must not wrap around when the steps are added.
// RUN: not kvq-run %models/stories260K/stories260K.bin --bench --contexts 9223372036854775807 2>&1 | FileCheck %s --check-prefix=HUGE
// HUGE: kvq-run: error: --contexts: 9223372036854775807 is outside [0, 507]
//
// RUN: not kvq-run %models/stories260K/stories260K.bin --bench --contexts 8 --bench-steps 513 2>&1 | FileCheck %s --check-prefix=STEPS
// STEPS: kvq-run: error: --bench-steps must be in [1, 512]
//
// RUN: not kvq-run %models/stories260K/stories260K.bin --bench --contexts 8 --prefill 0 2>&1 | FileCheck %s --check-prefix=PREFILL
// PREFILL: kvq-run: error: --prefill must be in [1, 512]
//
// The last context that fits, with its steps, runs.
// RUN: kvq-run %models/stories260K/stories260K.bin --bench --json --method fp16 --contexts 510 --bench-steps 2 --prefill 2 | FileCheck %s --check-prefix=EDGE
// EDGE: "context": 510
//
// On a window shorter than the defaults, the defaults shrink to fit it:
// the context is half the window and the prefill the whole window.
// RUN: kvq-run random:64,128,2,4,2,64,64 --bench --json --method fp16 --bench-steps 2 | FileCheck %s --check-prefix=SHORT
// SHORT: "context": 32
// SHORT: "prefill"
// SHORT: "tokens": 64
// RUN: not kvq-run random:64,128,2,4,2,64,2048 --bench --bench-steps 1001 2>&1 | FileCheck %s --check-prefix=STEPS1000
// STEPS1000: kvq-run: error: --bench-steps must be in [1, 1000]
