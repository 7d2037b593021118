// kvq-import --context: unset means the checkpoint's seq_len (512 for
// stories260K); a value given must be in [1, seq_len].
//
// RUN: sh -c 'kvq-import %models/stories260K/stories260K.bin --context=0; echo "status $?"' 2>&1 | FileCheck %s --check-prefix=ZERO
// ZERO-NOT: {{.}}
// ZERO: kvq-import: error: context length 0 is not in [1, seq_len 512]
// ZERO-NEXT: status 2
// RUN: sh -c 'kvq-import %models/stories260K/stories260K.bin --context -3; echo "status $?"' 2>&1 | FileCheck %s --check-prefix=NEG
// NEG: kvq-import: error: context length -3 is not in [1, seq_len 512]
// NEG-NEXT: status 2
// RUN: sh -c 'kvq-import %models/stories260K/stories260K.bin --context 513; echo "status $?"' 2>&1 | FileCheck %s --check-prefix=OVER
// OVER: kvq-import: error: context length 513 is not in [1, seq_len 512]
// OVER-NEXT: status 2
//
// RUN: kvq-import %models/stories260K/stories260K.bin | FileCheck %s --check-prefix=DEFAULT
// RUN: kvq-import %models/stories260K/stories260K.bin --context 1 | FileCheck %s --check-prefix=ONE
// DEFAULT: func.func @decode({{.*}}tensor<5x512x4x8xf32>
// ONE: func.func @decode({{.*}}tensor<5x1x4x8xf32>
