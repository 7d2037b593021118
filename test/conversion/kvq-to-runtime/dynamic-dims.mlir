// RUN: kvq-opt %s --convert-kvq-to-runtime -split-input-file -verify-diagnostics | FileCheck %s

// Sizes the runtime takes as i32 come from the buffer when they are
// dynamic, checked to fit before they are truncated; a static size that
// cannot fit is refused at compile time. Nothing is truncated in silence.

// CHECK-LABEL: func.func @key_norm_dynamic
// CHECK-SAME: (%[[K:.*]]: memref<?x?x?xf16>)
// CHECK: %[[C1:.*]] = arith.constant 1 : index
// CHECK: %[[H:.*]] = memref.dim %[[K]], %[[C1]]
// CHECK: %[[H64:.*]] = arith.index_cast %[[H]] : index to i64
// CHECK: %[[MAX:.*]] = arith.constant 2147483647 : i64
// CHECK: %[[HOK:.*]] = arith.cmpi ule, %[[H64]], %[[MAX]]
// CHECK: cf.assert %[[HOK]], "kvq: dimension 1 of kvq.key_norm does not fit the runtime's 32-bit parameter"
// CHECK: %[[H32:.*]] = arith.trunci %[[H64]] : i64 to i32
// CHECK: %[[C2:.*]] = arith.constant 2 : index
// CHECK: %[[D:.*]] = memref.dim %[[K]], %[[C2]]
// CHECK: %[[D64:.*]] = arith.index_cast %[[D]] : index to i64
// CHECK: cf.assert
// CHECK: %[[D32:.*]] = arith.trunci %[[D64]] : i64 to i32
// CHECK: call @kvq_key_norm(%{{.*}}, %{{.*}}, %{{.*}}, %[[H32]], %[[D32]], %{{.*}})
func.func @key_norm_dynamic(%k: memref<?x?x?xf16>) -> memref<?xf32> {
  %n = kvq.key_norm %k : memref<?x?x?xf16> -> memref<?xf32>
  return %n : memref<?xf32>
}

// -----

// CHECK-LABEL: func.func @attend_dynamic_heads
// CHECK: memref.dim %{{.*}}, %{{.*}} : memref<1x?x64xf32>
// CHECK: cf.assert
// CHECK: %[[Q32:.*]] = arith.trunci %{{.*}} : i64 to i32
// CHECK: call @kvq_cache_attend(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[Q32]], %{{.*}})
!cache = !kvq.cache<layers = 1, kv_heads = 2, head_dim = 64, element_type = f16, config = <method = kivi, key_bits = 2, value_bits = 2>>
func.func @attend_dynamic_heads(%c: !cache, %q: memref<1x?x64xf32>) -> memref<1x?x64xf32> {
  %o = kvq.cache_attend %c[0], %q : !cache, memref<1x?x64xf32> -> memref<1x?x64xf32>
  return %o : memref<1x?x64xf32>
}

// -----

func.func @key_norm_too_wide(%k: memref<1x2x4294967296xf16>) -> memref<1xf32> {
  // expected-error @below {{dimension 2 of size 4294967296 does not fit the runtime's 32-bit parameter}}
  // expected-error @below {{failed to legalize operation 'kvq.key_norm'}}
  %n = kvq.key_norm %k : memref<1x2x4294967296xf16> -> memref<1xf32>
  return %n : memref<1xf32>
}
