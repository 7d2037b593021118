// kvq-run's numeric method flags, spelled and read as kvq-eval's: --bits,
// --group-size and --sinks take comma lists; each spec runs once per value
// of every flag that applies to it and that it does not set itself, and a
// spec that becomes several is labelled with what the flags added.
//
// RUN: kvq-run %models/stories260K/stories260K.bin --steps 2 --bits 2,4 --group-size 4 --sinks 1,3 --method "kivi,kivi_sink{bits=3},kvquant{bits=3},fp16" 2>%t.err | FileCheck %s --check-prefix=LISTS
// LISTS: [kivi{bits=2 group-size=4}] Once upon a time
// LISTS-NEXT: (2 tokens
// LISTS-NEXT: cache: method=kivi key-bits=2 value-bits=2 group-size=4 residual-length=32
// LISTS: [kivi{bits=4 group-size=4}] Once upon a time
// LISTS: cache: method=kivi key-bits=4 value-bits=4 group-size=4 residual-length=32
// LISTS: [kivi_sink{bits=3 group-size=4 sinks=1}] Once upon a time
// LISTS: cache: method=kivi_sink key-bits=3 value-bits=3 group-size=4 residual-length=32 residual-mode=sliding sinks=1 pre-rope=false;
// LISTS: [kivi_sink{bits=3 group-size=4 sinks=3}] Once upon a time
// LISTS: cache: method=kivi_sink key-bits=3 value-bits=3 group-size=4 residual-length=32 residual-mode=sliding sinks=3 pre-rope=false;
// LISTS: [kvquant{bits=3}] Once upon a time
// LISTS: cache: method=kvquant key-bits=3 value-bits=3
// LISTS: [fp16] Once upon a time
// LISTS: cache: method=fp16 key-bits=16 value-bits=16
// LISTS-NOT: [
// RUN: FileCheck %s --check-prefix=IGNORED --input-file=%t.err
// IGNORED: kvq-run: warning: --group-size does not apply to kvquant{bits=3} (only to kivi, kivi_sink): ignored there
// IGNORED-NEXT: kvq-run: warning: --sinks does not apply to kivi, kvquant{bits=3} (only to kivi_sink): ignored there
//
// One value per flag keeps the spec's label.
// RUN: kvq-run %models/stories260K/stories260K.bin --steps 2 --group-size 2 --sinks 4 --method kivi_sink | FileCheck %s --check-prefix=ONE
// ONE: [kivi_sink] Once upon a time
// ONE: cache: method=kivi_sink key-bits=2 value-bits=2 group-size=2 residual-length=32 residual-mode=sliding sinks=4 pre-rope=false;
//
// Bad values: one line naming the flag, status 2.
// RUN: sh -c 'kvq-run %models/stories260K/stories260K.bin --group-size 0; echo "status $?"' 2>&1 | FileCheck %s --check-prefix=G0
// G0: kvq-run: --group-size expects an integer in [1, 65536], got '0'
// G0-NEXT: status 2
// RUN: sh -c 'kvq-eval --keys x.npy --method kivi --group-size 0; echo "status $?"' 2>&1 | FileCheck %s --check-prefix=EVALG0
// EVALG0: kvq-eval: --group-size expects an integer in [1, 65536], got '0'
// EVALG0-NEXT: status 2
// RUN: sh -c 'kvq-run %models/stories260K/stories260K.bin --sinks=-1; echo "status $?"' 2>&1 | FileCheck %s --check-prefix=SNEG
// SNEG: kvq-run: --sinks expects an integer in [0, 65536], got '-1'
// SNEG-NEXT: status 2
// RUN: sh -c 'kvq-run %models/stories260K/stories260K.bin --bits 2,,4; echo "status $?"' 2>&1 | FileCheck %s --check-prefix=EMPTY
// EMPTY: kvq-run: --bits has an empty item in '2,,4'
// EMPTY-NEXT: status 2
// RUN: sh -c 'kvq-run %models/stories260K/stories260K.bin --sinks=; echo "status $?"' 2>&1 | FileCheck %s --check-prefix=SEMPTY
// SEMPTY: kvq-run: --sinks has an empty item in ''
// SEMPTY-NEXT: status 2
