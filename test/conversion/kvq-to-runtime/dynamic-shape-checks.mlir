// RUN: kvq-opt %s --convert-kvq-to-runtime -split-input-file | FileCheck %s

// The verifier compares static sizes only; the runtime derives every
// buffer's extent from the source's. Where a size the runtime relies on is
// dynamic, the lowering checks it before the call (a mismatch would let the
// runtime read or write past a buffer), and it sizes a dynamic result from
// what the op defines, not from an unrelated input dimension.

// A per-token group must not straddle two rows of the last dimension: the
// runtime only sees their product.
// CHECK-LABEL: func.func @group_quant_dynamic_groups
// CHECK-SAME: (%[[X:.*]]: memref<?x2x?xf32>)
// CHECK: %[[D:.*]] = memref.dim %[[X]], %c2
// CHECK: %[[REST:.*]] = arith.remui %[[D]], %c8
// CHECK: %[[DIVIDES:.*]] = arith.cmpi eq, %[[REST]], %c0
// CHECK: cf.assert %[[DIVIDES]], "kvq: kvq.group_quant: group size 8 does not divide dimension 2"
// CHECK: call @kvq_group_quant
func.func @group_quant_dynamic_groups(%x: memref<?x2x?xf32>) -> memref<?x2x?xf16> {
  %c, %s, %z = kvq.group_quant %x axis per_token group 8 bits 2
      : memref<?x2x?xf32> -> memref<?x2x?xi8>, memref<?x2x?xf16>, memref<?x2x?xf16>
  return %s : memref<?x2x?xf16>
}

// -----

// Statically shaped ops need no check: the verifier has done it.
// CHECK-LABEL: func.func @group_quant_static
// CHECK-NOT: cf.assert
// CHECK: call @kvq_group_quant
func.func @group_quant_static(%x: memref<4x2x16xf32>, %m: memref<4x2x16xi1>) -> memref<4x2x2xf16> {
  %c, %s, %z = kvq.group_quant %x axis per_token group 8 bits 2 exclude(%m : memref<4x2x16xi1>)
      : memref<4x2x16xf32> -> memref<4x2x16xi8>, memref<4x2x2xf16>, memref<4x2x2xf16>
  return %s : memref<4x2x2xf16>
}

// -----

// Scales read by the runtime are [rows, cols / group] of the codes'.
// CHECK-LABEL: func.func @group_dequant_scale_rows
// CHECK-SAME: (%[[C:.*]]: memref<?x16xi8>, %[[S:.*]]: memref<?x2xf16>, %[[Z:.*]]: memref<4x2xf16>)
// CHECK: %[[SR:.*]] = memref.dim %[[S]], %c0
// CHECK: %[[CR:.*]] = memref.dim %[[C]], %c0
// CHECK: %[[SAME:.*]] = arith.cmpi eq, %[[SR]], %[[CR]]
// CHECK: cf.assert %[[SAME]], "kvq: kvq.group_dequant: scale dimension 0 has the wrong size"
// CHECK: %[[ZR:.*]] = arith.constant 4 : index
// CHECK: %[[CR2:.*]] = memref.dim %[[C]], %c0
// CHECK: %[[ZSAME:.*]] = arith.cmpi eq, %[[ZR]], %[[CR2]]
// CHECK: cf.assert %[[ZSAME]], "kvq: kvq.group_dequant: zero point dimension 0 has the wrong size"
// CHECK: call @kvq_group_dequant
func.func @group_dequant_scale_rows(%c: memref<?x16xi8>, %s: memref<?x2xf16>, %z: memref<4x2xf16>) -> memref<?x16xf32> {
  %x = kvq.group_dequant %c, %s, %z axis per_token group 8 bits 2
      : memref<?x16xi8>, memref<?x2xf16>, memref<4x2xf16> -> memref<?x16xf32>
  return %x : memref<?x16xf32>
}

// -----

// A static result of a dynamic input: the runtime writes as many norms as
// there are tokens.
// CHECK-LABEL: func.func @key_norm_static_result
// CHECK-SAME: (%[[K:.*]]: memref<?x2x8xf32>)
// CHECK: %[[FOUR:.*]] = arith.constant 4 : index
// CHECK: %[[TOKENS:.*]] = memref.dim %[[K]], %c0
// CHECK: %[[SAME:.*]] = arith.cmpi eq, %[[FOUR]], %[[TOKENS]]
// CHECK: cf.assert %[[SAME]], "kvq: kvq.key_norm: norms dimension 0 has the wrong size"
// CHECK: memref.alloc() : memref<4xf32>
// CHECK: call @kvq_key_norm
func.func @key_norm_static_result(%k: memref<?x2x8xf32>) -> memref<4xf32> {
  %n = kvq.key_norm %k : memref<?x2x8xf32> -> memref<4xf32>
  return %n : memref<4xf32>
}

// -----

// Thresholds are one per column: the input's shape without dimension 0.
// CHECK-LABEL: func.func @outlier_screen_dynamic_threshold
// CHECK-SAME: (%[[X:.*]]: memref<?x?xf32>, %[[T:.*]]: memref<?xf32>)
// CHECK: %[[TN:.*]] = memref.dim %[[T]], %c0
// CHECK: %[[XN:.*]] = memref.dim %[[X]], %c1
// CHECK: %[[SAME:.*]] = arith.cmpi eq, %[[TN]], %[[XN]]
// CHECK: cf.assert %[[SAME]], "kvq: kvq.outlier_screen: threshold dimension 0 has the wrong size"
// CHECK: call @kvq_outlier_screen
func.func @outlier_screen_dynamic_threshold(%x: memref<?x?xf32>, %t: memref<?xf32>) -> memref<?x?xi1> {
  %m = kvq.outlier_screen %x above %t : memref<?x?xf32>, memref<?xf32> -> memref<?x?xi1>
  return %m : memref<?x?xi1>
}

// -----

// A dynamic level-table dimension holds 2^bits levels (it once took the
// size of an input dimension past the input's rank).
// CHECK-LABEL: func.func @nuq_fit_dynamic_levels
// CHECK-SAME: (%[[X:.*]]: memref<?x16xf32>)
// CHECK: %[[ROWS:.*]] = memref.dim %[[X]], %c0
// CHECK: %[[LEVELS:.*]] = arith.constant 4 : index
// CHECK: memref.alloc(%[[ROWS]], %[[LEVELS]]) : memref<?x2x?xf16>
// CHECK: call @kvq_nuq_fit(
func.func @nuq_fit_dynamic_levels(%x: memref<?x16xf32>) -> memref<?x2x?xf16> {
  %l = kvq.nuq_fit %x axis per_token group 8 bits 2 iters 3
      : memref<?x16xf32> -> memref<?x2x?xf16>
  return %l : memref<?x2x?xf16>
}

// -----

// A dynamic positions buffer holds `count` positions, not one per token.
// CHECK-LABEL: func.func @sink_select_dynamic_positions
// CHECK: %[[COUNT:.*]] = arith.constant 3 : index
// CHECK: %[[P:.*]] = memref.alloc(%[[COUNT]]) : memref<?xi64>
// CHECK: call @kvq_sink_select
// CHECK: return %[[P]]
func.func @sink_select_dynamic_positions(%n: memref<?xf32>) -> memref<?xi64> {
  %p = kvq.sink_select %n count 3 : memref<?xf32> -> memref<?xi64>
  return %p : memref<?xi64>
}

// -----

// Keys and values of dynamic shape are checked against the cache's
// [tokens, 2, 64] and against each other's token count; fetched buffers of
// dynamic shape take their sizes from the cache.
// CHECK-LABEL: func.func @update_and_fetch_dynamic
// CHECK-SAME: (%[[CACHE:.*]]: !llvm.ptr, %[[K:.*]]: memref<?x?x?xf16>, %[[V:.*]]: memref<?x?x?xf16>)
// CHECK: %[[KH:.*]] = memref.dim %[[K]], %c1
// CHECK: arith.cmpi eq, %[[KH]], %c2
// CHECK: cf.assert %{{.*}}, "kvq: kvq.cache_update: keys dimension 1 has the wrong size"
// CHECK: %[[KD:.*]] = memref.dim %[[K]], %c2
// CHECK: arith.cmpi eq, %[[KD]], %c64
// CHECK: cf.assert %{{.*}}, "kvq: kvq.cache_update: keys dimension 2 has the wrong size"
// CHECK: %[[VT:.*]] = memref.dim %[[V]], %c0
// CHECK: %[[KT:.*]] = memref.dim %[[K]], %c0
// CHECK: arith.cmpi eq, %[[VT]], %[[KT]]
// CHECK: cf.assert %{{.*}}, "kvq: kvq.cache_update: values dimension 0 has the wrong size"
// CHECK: cf.assert %{{.*}}, "kvq: kvq.cache_update: values dimension 1
// CHECK: cf.assert %{{.*}}, "kvq: kvq.cache_update: values dimension 2
// CHECK: call @kvq_cache_update(%[[CACHE]]
// CHECK: %[[N:.*]] = arith.index_cast %{{.*}} : i64 to index
// CHECK: %[[H:.*]] = arith.constant 2 : index
// CHECK: %[[D:.*]] = arith.constant 64 : index
// CHECK: memref.alloc(%[[N]], %[[H]], %[[D]]) : memref<?x?x?xf16>
// CHECK: call @kvq_cache_fetch
!cache = !kvq.cache<layers = 1, kv_heads = 2, head_dim = 64, element_type = f16, config = <method = kivi, key_bits = 2, value_bits = 2>>
func.func @update_and_fetch_dynamic(%c: !cache, %k: memref<?x?x?xf16>, %v: memref<?x?x?xf16>)
    -> (memref<?x?x?xf16>, memref<?x2x64xf16>) {
  %ak, %av = kvq.cache_update %c[0], %k, %v : !cache, memref<?x?x?xf16>, memref<?x?x?xf16>
      -> memref<?x?x?xf16>, memref<?x2x64xf16>
  return %ak, %av : memref<?x?x?xf16>, memref<?x2x64xf16>
}

// -----

// Queries are read with the cache's head_dim.
// CHECK-LABEL: func.func @attend_dynamic_head_dim
// CHECK-SAME: (%[[C:.*]]: !llvm.ptr, %[[Q:.*]]: memref<1x4x?xf32>)
// CHECK: %[[QD:.*]] = memref.dim %[[Q]], %c2
// CHECK: arith.cmpi eq, %[[QD]], %c64
// CHECK: cf.assert %{{.*}}, "kvq: kvq.cache_attend: queries dimension 2 has the wrong size"
// CHECK: call @kvq_cache_attend
!cache = !kvq.cache<layers = 1, kv_heads = 2, head_dim = 64, element_type = f16, config = <method = kivi, key_bits = 2, value_bits = 2>>
func.func @attend_dynamic_head_dim(%c: !cache, %q: memref<1x4x?xf32>) -> memref<1x4x?xf32> {
  %o = kvq.cache_attend %c[0], %q : !cache, memref<1x4x?xf32> -> memref<1x4x?xf32>
  return %o : memref<1x4x?xf32>
}
