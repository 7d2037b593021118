// RUN: kvq-import %models/stories260K/stories260K.bin --prefill=4 \
// RUN:   | kvq-opt --kvq-quantize-kv-cache=method=kivi --kvq-to-llvm \
// RUN:   | mlir-translate --mlir-to-llvmir | FileCheck %s
// RUN: kvq-import %models/stories260K/stories260K.bin --prefill=4 --cache-layout=per-layer --cache-type=f16 --gqa=broadcast --softmax=expanded \
// RUN:   | kvq-opt --kvq-quantize-kv-cache=method=kivi --kvq-to-llvm \
// RUN:   | mlir-translate --mlir-to-llvmir | FileCheck %s

// The real model, quantized and lowered to LLVM IR, in kvq-import's default
// spelling and in the one farthest from it (per-layer f16 caches, repeat_kv
// broadcast, expanded softmax).
//
// What shows that no attention over a plain cache is left: the signatures.
// Each function takes exactly the 1-D weights descriptor (ptr, ptr, 3 x i64),
// the opaque cache pointer (%5), the 1-D tokens descriptor and pos, and
// returns only the 1-D logits descriptor. The cache tensors of the import (2
// stacked or 10 per-layer 4-D/3-D memref descriptors of 11 or 9 words each)
// are neither parameters nor results, so nothing in the function can load
// from or store to a plain cache; the attention goes through the runtime
// calls on %5, one kvq_cache_update and one kvq_cache_attend per layer, in
// layer order. (Counting exp calls would not do: the FFN's SiLU uses exp
// too, and the lowering decides how softmax exps are emitted.)

// CHECK-LABEL: define { ptr, ptr, i64, [1 x i64], [1 x i64] } @prefill(ptr %0, ptr %1, i64 %2, i64 %3, i64 %4, ptr %5, ptr %6, ptr %7, i64 %8, i64 %9, i64 %10, i64 %11) {
// CHECK: call i32 @kvq_cache_stats(ptr %5, i32 0,
// CHECK: call i32 @kvq_cache_update(ptr %5, i32 0, ptr %{{.*}}, ptr %{{.*}}, i64 4,
// CHECK: call i32 @kvq_cache_attend(ptr %5, i32 0, ptr %{{.*}}, i64 4, i32 8,
// CHECK: call i32 @kvq_cache_update(ptr %5, i32 1,
// CHECK: call i32 @kvq_cache_attend(ptr %5, i32 1,
// CHECK: call i32 @kvq_cache_update(ptr %5, i32 2,
// CHECK: call i32 @kvq_cache_attend(ptr %5, i32 2,
// CHECK: call i32 @kvq_cache_update(ptr %5, i32 3,
// CHECK: call i32 @kvq_cache_attend(ptr %5, i32 3,
// CHECK: call i32 @kvq_cache_update(ptr %5, i32 4,
// CHECK: call i32 @kvq_cache_attend(ptr %5, i32 4,
// CHECK-NOT: call i32 @kvq_cache_{{update|attend}}
// CHECK: ret { ptr, ptr, i64, [1 x i64], [1 x i64] }

// CHECK-LABEL: define { ptr, ptr, i64, [1 x i64], [1 x i64] } @decode(ptr %0, ptr %1, i64 %2, i64 %3, i64 %4, ptr %5, ptr %6, ptr %7, i64 %8, i64 %9, i64 %10, i64 %11) {
// CHECK: call i32 @kvq_cache_stats(ptr %5, i32 0,
// CHECK: call i32 @kvq_cache_update(ptr %5, i32 0, ptr %{{.*}}, ptr %{{.*}}, i64 1,
// CHECK: call i32 @kvq_cache_attend(ptr %5, i32 0, ptr %{{.*}}, i64 1, i32 8,
// CHECK: call i32 @kvq_cache_update(ptr %5, i32 1,
// CHECK: call i32 @kvq_cache_attend(ptr %5, i32 1,
// CHECK: call i32 @kvq_cache_update(ptr %5, i32 2,
// CHECK: call i32 @kvq_cache_attend(ptr %5, i32 2,
// CHECK: call i32 @kvq_cache_update(ptr %5, i32 3,
// CHECK: call i32 @kvq_cache_attend(ptr %5, i32 3,
// CHECK: call i32 @kvq_cache_update(ptr %5, i32 4,
// CHECK: call i32 @kvq_cache_attend(ptr %5, i32 4,
// CHECK-NOT: call i32 @kvq_cache_{{update|attend}}
// CHECK: ret { ptr, ptr, i64, [1 x i64], [1 x i64] }

// CHECK-LABEL: define ptr @kv_cache_create()
// CHECK: call i32 @kvq_cache_create_flat(
