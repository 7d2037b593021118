// Every float flag of every tool takes only finite numbers within its
// range, and its error states that range (one line, exit status 2).
// kvq-import, kvq-bench and kvq-demo have no float flags.
//
// kvq-run --temperature:
// RUN: sh -c 'kvq-run %models/stories260K/stories260K.bin --temperature nan; echo "status $?"' 2>&1 | FileCheck %s --check-prefix=TNAN
// TNAN-NOT: {{.}}
// TNAN: kvq-run: --temperature expects a number in [0, 100], got 'nan'
// TNAN-NEXT: status 2
// RUN: sh -c 'kvq-run %models/stories260K/stories260K.bin --temperature=inf; echo "status $?"' 2>&1 | FileCheck %s --check-prefix=TINF
// TINF-NOT: {{.}}
// TINF: kvq-run: --temperature expects a number in [0, 100], got 'inf'
// TINF-NEXT: status 2
// RUN: sh -c 'kvq-run %models/stories260K/stories260K.bin --temperature 1e300; echo "status $?"' 2>&1 | FileCheck %s --check-prefix=TBIG
// TBIG-NOT: {{.}}
// TBIG: kvq-run: --temperature expects a number in [0, 100], got '1e300'
// TBIG-NEXT: status 2
// RUN: sh -c 'kvq-run %models/stories260K/stories260K.bin --temperature -0.5; echo "status $?"' 2>&1 | FileCheck %s --check-prefix=TNEG
// TNEG-NOT: {{.}}
// TNEG: kvq-run: --temperature expects a number in [0, 100], got '-0.5'
// TNEG-NEXT: status 2
// RUN: sh -c 'kvq-run %models/stories260K/stories260K.bin --temperature 0.5x; echo "status $?"' 2>&1 | FileCheck %s --check-prefix=TTXT
// TTXT-NOT: {{.}}
// TTXT: kvq-run: --temperature expects a number in [0, 100], got '0.5x'
// TTXT-NEXT: status 2
//
// A temperature in range samples (stdout only, status 0):
// RUN: kvq-run %models/stories260K/stories260K.bin --temperature 0.8 --steps 4 2>&1 | FileCheck %s --check-prefix=TOK
// TOK: [fp16] Once upon a time
//
// kvq-eval's float flags (--budget, --rope-theta, --outlier-fraction):
// RUN: sh -c 'kvq-eval --keys x.npy --budget nan; echo "status $?"' 2>&1 | FileCheck %s --check-prefix=BUDGET
// BUDGET-NOT: {{.}}
// BUDGET: kvq-eval: --budget expects a number in [0.5, 64], got 'nan'
// BUDGET-NEXT: status 2
// RUN: sh -c 'kvq-eval --keys x.npy --rope-theta inf; echo "status $?"' 2>&1 | FileCheck %s --check-prefix=THETA
// THETA-NOT: {{.}}
// THETA: kvq-eval: --rope-theta expects a number in (1, 1e+09], got 'inf'
// THETA-NEXT: status 2
// RUN: sh -c 'kvq-eval --keys x.npy --outlier-fraction 0.01,1e300; echo "status $?"' 2>&1 | FileCheck %s --check-prefix=OUTL
// OUTL-NOT: {{.}}
// OUTL: kvq-eval: --outlier-fraction expects a number in [0, 1), got '1e300'
// OUTL-NEXT: status 2
//
// kvq-run's method specs: a numeric option out of its range is refused by
// kvq-run, naming the option, its range and the spec, before the pass
// would round it (1e300 is no outlier fraction of inf); the ranges are
// kvq-eval's flags' ones.
// RUN: sh -c 'kvq-run %models/stories260K/stories260K.bin --steps 1 --method "kvquant{outlier-fraction=1e300}"; echo "status $?"' 2>&1 | FileCheck %s --check-prefix=SPECOUTL
// SPECOUTL-NOT: inf
// SPECOUTL: kvq-run: error: --method: option 'outlier-fraction' expects a number in [0, 1), got '1e300' in 'kvquant{outlier-fraction=1e300}'
// SPECOUTL-NEXT: status 2
// RUN: sh -c 'kvq-run %models/stories260K/stories260K.bin --steps 1 --method "kvquant{outlier-fraction=nan}"; echo "status $?"' 2>&1 | FileCheck %s --check-prefix=SPECNAN
// SPECNAN: kvq-run: error: --method: option 'outlier-fraction' expects a number in [0, 1), got 'nan' in 'kvquant{outlier-fraction=nan}'
// SPECNAN-NEXT: status 2
// RUN: sh -c 'kvq-run %models/stories260K/stories260K.bin --steps 1 --method "kivi{bits=4294967298}"; echo "status $?"' 2>&1 | FileCheck %s --check-prefix=SPECBITS
// SPECBITS: kvq-run: error: --method: option 'bits' expects an integer in [1, 16], got '4294967298' in 'kivi{bits=4294967298}'
// SPECBITS-NEXT: status 2
// RUN: sh -c 'kvq-run %models/stories260K/stories260K.bin --steps 1 --method "kvquant{lloyd-iters=101}"; echo "status $?"' 2>&1 | FileCheck %s --check-prefix=SPECLLOYD
// SPECLLOYD: kvq-run: error: --method: option 'lloyd-iters' expects an integer in [0, 100], got '101' in 'kvquant{lloyd-iters=101}'
// SPECLLOYD-NEXT: status 2
// RUN: sh -c 'kvq-eval --keys x.npy --method kvquant --lloyd-iters 101; echo "status $?"' 2>&1 | FileCheck %s --check-prefix=EVALLLOYD
// EVALLLOYD: kvq-eval: --lloyd-iters expects an integer in [0, 100], got '101'
// EVALLLOYD-NEXT: status 2
// RUN: sh -c 'kvq-run %models/stories260K/stories260K.bin --steps 1 --method "kivi{residual-mode=fifo}"; echo "status $?"' 2>&1 | FileCheck %s --check-prefix=SPECMODE
// SPECMODE: kvq-run: error: --method: option 'residual-mode' expects sliding or block, got 'fifo' in 'kivi{residual-mode=fifo}'
// SPECMODE-NEXT: status 2
//
// A value in range that the pass refuses for the model: one line.
// RUN: sh -c 'kvq-run %models/stories260K/stories260K.bin --steps 1 --method kivi --group-size 3; echo "status $?"' 2>&1 | FileCheck %s --check-prefix=PASSREFUSES
// PASSREFUSES: kvq-run: error: kivi: kvq-quantize-kv-cache failed: kvq-quantize-kv-cache: group_size 3 does not divide head_dim 8{{$}}
// PASSREFUSES-NEXT: status 2
//
// A fraction that is not 0 but is 0 in the runtime's f32 is refused too
// (the result would say 1e-300 and the cache keep no outliers).
// RUN: sh -c 'kvq-run %models/stories260K/stories260K.bin --steps 1 --method "kvquant{outlier-fraction=1e-300}"; echo "status $?"' 2>&1 | FileCheck %s --check-prefix=SPECTINY
// SPECTINY: kvq-run: error: --method: option 'outlier-fraction' is 1e-300, which the runtime's f32 holds as 0 (give 0, or at least 1.4e-45) in 'kvquant{outlier-fraction=1e-300}'
// SPECTINY-NEXT: status 2
// RUN: sh -c 'kvq-eval --keys x.npy --method kvquant --outlier-fraction 0.01,1e-50; echo "status $?"' 2>&1 | FileCheck %s --check-prefix=EVALTINY
// EVALTINY: kvq-eval: --outlier-fraction 1e-50 is held as 0 in the runtime's f32 (give 0, or at least 1.4e-45)
// EVALTINY-NEXT: status 2
