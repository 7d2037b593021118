// kvq-import --weight-type: the weights argument in f32 (default), f16 or
// bf16, every read of a weight widened to f32 (the projections' bodies,
// the RMSNorm gains, the embedding rows), and --kvq-to-llvm turns the
// narrow projections into kvq_matmul calls like the f32 ones (7 per layer
// of stories260K's 5, plus the classifier); anything else is one error.
//
// RUN: kvq-import %models/stories260K/stories260K.bin | FileCheck %s --check-prefix=F32
// F32: func.func @decode(%{{.*}}: tensor<264128xf32>,
// F32-NOT: arith.extf %{{.*}} : f16
// RUN: kvq-import %models/stories260K/stories260K.bin --weight-type f16 | FileCheck %s --check-prefix=F16
// F16: func.func @decode(%{{.*}}: tensor<264128xf16>,
// F16: tensor.extract %{{.*}} : tensor<512x64xf16>
// F16-NEXT: arith.extf %{{.*}} : f16 to f32
// F16: math.rsqrt
// F16: arith.extf %{{.*}} : f16 to f32
// F16: ^bb0(%in: f32, %in_{{[0-9]+}}: f16, %out: f32):
// F16-NEXT: arith.extf %in_{{[0-9]+}} : f16 to f32
// RUN: kvq-import %models/stories260K/stories260K.bin --weight-type bf16 | FileCheck %s --check-prefix=BF16
// BF16: func.func @decode(%{{.*}}: tensor<264128xbf16>,
// BF16: arith.extf %{{.*}} : bf16 to f32
// RUN: kvq-import %models/stories260K/stories260K.bin --weight-type bf16 | kvq-opt --kvq-to-llvm | FileCheck %s --check-prefix=LOWERED
// LOWERED-COUNT-36: llvm.call @kvq_matmul(
// LOWERED-NOT: llvm.call @kvq_matmul(
// RUN: sh -c 'kvq-import %models/stories260K/stories260K.bin --weight-type f8; echo "status $?"' 2>&1 | FileCheck %s --check-prefix=BAD
// BAD: kvq-import: error: --weight-type must be f32, f16 or bf16, got 'f8'
// BAD-NEXT: status 2
