// RUN: kvq-opt %s --convert-kvq-to-runtime | FileCheck %s
// RUN: kvq-opt %s --convert-kvq-to-runtime="on-error=report" | FileCheck %s --check-prefix=REPORT

// One function per pattern: the callee, its C argument order, and the
// status check after it.

!cache = !kvq.cache<layers = 2, kv_heads = 2, head_dim = 64, element_type = f16,
    config = <method = kivi_sink, key_bits = 2, value_bits = 4, group_size = 32,
              residual_length = 64, residual_mode = block, n_sink_tokens = 3>>

// Callees are declared privately, once, with the C signatures of runtime.h.
// CHECK-DAG: func.func private @kvq_group_quant(!llvm.ptr, i32, i64, i64, i32, i32, i32, !llvm.ptr, i32, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> i32
// CHECK-DAG: func.func private @kvq_group_dequant(!llvm.ptr, i32, !llvm.ptr, !llvm.ptr, i64, i64, i32, i32, i32, !llvm.ptr, i32) -> i32
// CHECK-DAG: func.func private @kvq_nuq_fit_scratch_size(i64, i32) -> i64
// CHECK-DAG: func.func private @kvq_nuq_fit(!llvm.ptr, i32, i64, i64, i32, i32, i32, i32, !llvm.ptr, !llvm.ptr, i64, !llvm.ptr) -> i32
// CHECK-DAG: func.func private @kvq_nuq_quant(!llvm.ptr, i32, i64, i64, i32, i32, i32, !llvm.ptr, i32, !llvm.ptr) -> i32
// CHECK-DAG: func.func private @kvq_nuq_dequant(!llvm.ptr, i32, !llvm.ptr, i64, i64, i32, i32, i32, !llvm.ptr, i32) -> i32
// CHECK-DAG: func.func private @kvq_outlier_split(!llvm.ptr, i32, i64, i64, i32, i32, f32, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> i32
// CHECK-DAG: func.func private @kvq_outlier_screen(!llvm.ptr, i32, i64, i64, !llvm.ptr, !llvm.ptr) -> i32
// CHECK-DAG: func.func private @kvq_key_norm(!llvm.ptr, i32, i64, i32, i32, !llvm.ptr) -> i32
// CHECK-DAG: func.func private @kvq_sink_select(!llvm.ptr, i64, i32, !llvm.ptr) -> i32
// CHECK-DAG: func.func private @kvq_cache_create_flat(i32, i32, i32, i32, i32, i32, i32, f32, i32, i32, i32, i32, i32, i32, i32, i32, i32, f32, !llvm.ptr) -> i32
// CHECK-DAG: func.func private @kvq_cache_destroy(!llvm.ptr){{$}}
// CHECK-DAG: func.func private @kvq_cache_update(!llvm.ptr, i32, !llvm.ptr, !llvm.ptr, i64, i32) -> i32
// CHECK-DAG: func.func private @kvq_cache_length(!llvm.ptr, i32, !llvm.ptr) -> i32
// CHECK-DAG: func.func private @kvq_cache_fetch(!llvm.ptr, i32, !llvm.ptr, !llvm.ptr, i64, i32) -> i32
// CHECK-DAG: func.func private @kvq_cache_attend(!llvm.ptr, i32, !llvm.ptr, i64, i32, !llvm.ptr) -> i32
// CHECK-DAG: func.func private @kvq_cache_stats(!llvm.ptr, i32, !llvm.ptr) -> i32
// CHECK-DAG: func.func private @kvq_check_status(i32, !llvm.ptr) -> i32
// CHECK-DAG: llvm.mlir.global internal constant @__kvq_site_{{[0-9a-f]+}}("kvq.group_quant (kvq_group_quant) at loc({{.*}}cpu.mlir{{.*}})\00")

// CHECK-LABEL: func.func @group_quant
// CHECK-SAME: (%[[X:.*]]: memref<?x2x64xf16>, %[[M:.*]]: memref<?x2x64xi1>)
// CHECK-DAG: %[[CODES:.*]] = memref.alloc(%{{.*}}) : memref<?x2x64xi8>
// CHECK-DAG: %[[SCALE:.*]] = memref.alloc(%{{.*}}) : memref<?x2x2xf16>
// CHECK-DAG: %[[ZERO:.*]] = memref.alloc(%{{.*}}) : memref<?x2x2xf16>
// CHECK: %[[ROWS_IDX:.*]] = memref.dim %[[X]], %c0
// CHECK: %[[ROWS:.*]] = arith.index_cast %[[ROWS_IDX]] : index to i64
// CHECK: %[[STATUS:.*]] = call @kvq_group_quant(%{{.*}}, %c0_i32{{[_0-9]*}}, %[[ROWS]], %{{.*}}, %c0_i32{{.*}}, %c32_i32{{[_0-9]*}}, %c2_i32{{[_0-9]*}}, %{{.*}}, %c0_i32{{.*}}, %{{.*}}, %{{.*}}, %{{.*}})
// CHECK: %[[CHECKED:.*]] = call @kvq_check_status(%[[STATUS]], %{{.*}})
// CHECK: %[[OK:.*]] = arith.cmpi eq, %[[CHECKED]], %c0_i32
// CHECK: cf.assert %[[OK]], "kvq runtime call failed: kvq.group_quant (kvq_group_quant) at
// CHECK: return %[[CODES]], %[[SCALE]], %[[ZERO]]
// REPORT-LABEL: func.func @group_quant
// REPORT: call @kvq_check_status
// REPORT-NOT: cf.assert
// REPORT: return
func.func @group_quant(%x: memref<?x2x64xf16>, %m: memref<?x2x64xi1>)
    -> (memref<?x2x64xi8>, memref<?x2x2xf16>, memref<?x2x2xf16>) {
  %c, %s, %z = kvq.group_quant %x axis per_token group 32 bits 2 exclude(%m : memref<?x2x64xi1>)
      : memref<?x2x64xf16> -> memref<?x2x64xi8>, memref<?x2x2xf16>, memref<?x2x2xf16>
  return %c, %s, %z : memref<?x2x64xi8>, memref<?x2x2xf16>, memref<?x2x2xf16>
}

// Per-channel grouping divides the token dimension; no mask passes null.
// CHECK-LABEL: func.func @group_quant_per_channel
// CHECK: %[[TG:.*]] = arith.divui %{{.*}}, %c32 : index
// CHECK: memref.alloc(%[[TG]]) : memref<?x2x64xf16>
// CHECK: %[[NULL:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK: call @kvq_group_quant(%{{.*}}, %c1_i32{{[_0-9]*}}, %{{.*}}, %c128_i64{{[_0-9]*}}, %c1_i32{{[_0-9]*}}, %c32_i32{{[_0-9]*}}, %c4_i32{{[_0-9]*}}, %[[NULL]], %c0_i32{{[_0-9]*}},
func.func @group_quant_per_channel(%x: memref<?x2x64xf32>) -> memref<?x2x64xf16> {
  %c, %s, %z = kvq.group_quant %x axis per_channel group 32 bits 4
      : memref<?x2x64xf32> -> memref<?x2x64xi8>, memref<?x2x64xf16>, memref<?x2x64xf16>
  return %s : memref<?x2x64xf16>
}

// CHECK-LABEL: func.func @group_dequant
// CHECK: %[[OUT:.*]] = memref.alloc() : memref<4x64xf32>
// CHECK: call @kvq_group_dequant(%{{.*}}, %c0_i32{{[_0-9]*}}, %{{.*}}, %{{.*}}, %c4_i64{{[_0-9]*}}, %c64_i64{{[_0-9]*}}, %c0_i32{{[_0-9]*}}, %c32_i32{{[_0-9]*}}, %c8_i32{{[_0-9]*}}, %{{.*}}, %c1_i32{{[_0-9]*}})
// CHECK: return %[[OUT]]
func.func @group_dequant(%c: memref<4x64xi8>, %s: memref<4x2xf16>, %z: memref<4x2xf16>) -> memref<4x64xf32> {
  %x = kvq.group_dequant %c, %s, %z axis per_token group 32 bits 8
      : memref<4x64xi8>, memref<4x2xf16>, memref<4x2xf16> -> memref<4x64xf32>
  return %x : memref<4x64xf32>
}

// The fit's scratch is sized by the runtime and freed after the call.
// CHECK-LABEL: func.func @nuq_fit
// CHECK: %[[LEVELS:.*]] = memref.alloc() : memref<1x2x64x8xf16>
// CHECK: %[[N:.*]] = call @kvq_nuq_fit_scratch_size(%c128_i64{{[_0-9]*}}, %c3_i32{{[_0-9]*}}) : (i64, i32) -> i64
// CHECK-NOT: kvq_check_status
// CHECK: %[[SCRATCH:.*]] = memref.alloc(%{{.*}}) : memref<?xf32>
// CHECK: call @kvq_nuq_fit(%{{.*}}, %c0_i32{{[_0-9]*}}, %c128_i64{{[_0-9]*}}, %c128_i64{{[_0-9]*}}, %c1_i32{{[_0-9]*}}, %c128_i32{{[_0-9]*}}, %c3_i32{{[_0-9]*}}, %c8_i32{{[_0-9]*}}, %{{.*}}, %{{.*}}, %[[N]], %{{.*}})
// CHECK: call @kvq_check_status
// CHECK: memref.dealloc %[[SCRATCH]]
// CHECK: return %[[LEVELS]]
func.func @nuq_fit(%k: memref<128x2x64xf16>, %m: memref<128x2x64xi1>) -> memref<1x2x64x8xf16> {
  %l = kvq.nuq_fit %k axis per_channel group 128 bits 3 iters 8 exclude(%m : memref<128x2x64xi1>)
      : memref<128x2x64xf16> -> memref<1x2x64x8xf16>
  return %l : memref<1x2x64x8xf16>
}

// CHECK-LABEL: func.func @nuq_quant_dequant
// CHECK: call @kvq_nuq_quant(%{{.*}}, %c0_i32{{[_0-9]*}}, %c16_i64{{[_0-9]*}}, %c128_i64{{[_0-9]*}}, %c0_i32{{[_0-9]*}}, %c64_i32{{[_0-9]*}}, %c3_i32{{[_0-9]*}}, %{{.*}}, %c0_i32{{[_0-9]*}}, %{{.*}})
// CHECK: call @kvq_nuq_dequant(%{{.*}}, %c0_i32{{[_0-9]*}}, %{{.*}}, %c16_i64{{[_0-9]*}}, %c128_i64{{[_0-9]*}}, %c0_i32{{[_0-9]*}}, %c64_i32{{[_0-9]*}}, %c3_i32{{[_0-9]*}}, %{{.*}}, %c0_i32{{[_0-9]*}})
func.func @nuq_quant_dequant(%v: memref<16x2x64xf16>, %l: memref<16x2x1x8xf16>) -> memref<16x2x64xf16> {
  %c = kvq.nuq_quant %v, %l axis per_token group 64 bits 3
      : memref<16x2x64xf16>, memref<16x2x1x8xf16> -> memref<16x2x64xi8>
  %x = kvq.nuq_dequant %c, %l axis per_token group 64 bits 3
      : memref<16x2x64xi8>, memref<16x2x1x8xf16> -> memref<16x2x64xf16>
  return %x : memref<16x2x64xf16>
}

// CHECK-LABEL: func.func @outliers
// CHECK: %[[F:.*]] = arith.constant 2.000000e-02 : f32
// CHECK: call @kvq_outlier_split(%{{.*}}, %c0_i32{{[_0-9]*}}, %c128_i64{{[_0-9]*}}, %c128_i64{{[_0-9]*}}, %c1_i32{{[_0-9]*}}, %c128_i32{{[_0-9]*}}, %[[F]], %{{.*}}, %{{.*}}, %{{.*}})
// CHECK: call @kvq_outlier_screen(%{{.*}}, %c0_i32{{[_0-9]*}}, %c1_i64{{[_0-9]*}}, %c128_i64{{[_0-9]*}}, %{{.*}}, %{{.*}})
func.func @outliers(%k: memref<128x2x64xf16>, %new: memref<1x2x64xf16>, %t: memref<2x64xf32>)
    -> (memref<128x2x64xi1>, memref<1x2x64xi1>) {
  %m, %thr = kvq.outlier_split %k axis per_channel group 128 fraction 0.02
      : memref<128x2x64xf16> -> memref<128x2x64xi1>, memref<1x2x64xf32>
  %s = kvq.outlier_screen %new above %t : memref<1x2x64xf16>, memref<2x64xf32> -> memref<1x2x64xi1>
  return %m, %s : memref<128x2x64xi1>, memref<1x2x64xi1>
}

// CHECK-LABEL: func.func @sinks
// CHECK: call @kvq_key_norm(%{{.*}}, %c0_i32{{[_0-9]*}}, %c128_i64{{[_0-9]*}}, %c2_i32{{[_0-9]*}}, %c64_i32{{[_0-9]*}}, %{{.*}})
// CHECK: %[[POS:.*]] = memref.alloc() : memref<5xi64>
// CHECK: call @kvq_sink_select(%{{.*}}, %c128_i64{{[_0-9]*}}, %c5_i32{{[_0-9]*}}, %{{.*}})
func.func @sinks(%k: memref<128x2x64xf16>) -> memref<5xi64> {
  %n = kvq.key_norm %k : memref<128x2x64xf16> -> memref<128xf32>
  %p = kvq.sink_select %n count 5 : memref<128xf32> -> memref<5xi64>
  return %p : memref<5xi64>
}

// The cache type becomes !llvm.ptr in signatures; the configuration is
// passed field by field in kvq_config order.
// CHECK-LABEL: func.func @cache_lifecycle
// CHECK-SAME: (%[[K:.*]]: memref<1x2x64xf16>, %[[Q:.*]]: memref<1x4x64xf32>) -> !llvm.ptr
// CHECK: %[[SLOT:.*]] = memref.alloca() : memref<1xi64>
// CHECK: call @kvq_cache_create_flat(%c2_i32{{[_0-9]*}}, %c2_i32{{[_0-9]*}}, %c4_i32{{[_0-9]*}}, %c32_i32{{[_0-9]*}}, %c64_i32{{[_0-9]*}}, %c1_i32{{[_0-9]*}}, %c3_i32{{[_0-9]*}}, %{{.*}}, %c8_i32{{[_0-9]*}}, %c128_i32{{[_0-9]*}}, %c1_i32{{[_0-9]*}}, %c32_i32{{[_0-9]*}}, %c2_i32{{[_0-9]*}}, %c2_i32{{[_0-9]*}}, %c64_i32{{[_0-9]*}}, %c0_i32{{[_0-9]*}}, %c0_i32{{[_0-9]*}}, %{{.*}}, %{{.*}})
// CHECK: %[[RAW:.*]] = memref.load %[[SLOT]]
// CHECK: %[[CACHE:.*]] = llvm.inttoptr %[[RAW]] : i64 to !llvm.ptr
// CHECK: call @kvq_cache_update(%[[CACHE]], %c1_i32{{[_0-9]*}}, %{{.*}}, %{{.*}}, %c1_i64{{[_0-9]*}}, %c0_i32{{[_0-9]*}})
// CHECK: call @kvq_cache_attend(%[[CACHE]], %c1_i32{{[_0-9]*}}, %{{.*}}, %c1_i64{{[_0-9]*}}, %c4_i32{{[_0-9]*}}, %{{.*}})
// CHECK: return %[[CACHE]] : !llvm.ptr
func.func @cache_lifecycle(%k: memref<1x2x64xf16>, %q: memref<1x4x64xf32>) -> !cache {
  %c = kvq.cache_create : !cache
  kvq.cache_update %c[1], %k, %k : !cache, memref<1x2x64xf16>, memref<1x2x64xf16>
  %o = kvq.cache_attend %c[1], %q : !cache, memref<1x4x64xf32> -> memref<1x4x64xf32>
  return %c : !cache
}

// Update-and-fetch asks the length and fetches into [length, 2, 64].
// CHECK-LABEL: func.func @update_and_fetch
// CHECK-SAME: (%[[CACHE:.*]]: !llvm.ptr
// CHECK: call @kvq_cache_update(%[[CACHE]], %c0_i32
// CHECK: call @kvq_cache_length(%[[CACHE]], %c0_i32{{[_0-9]*}}, %{{.*}})
// CHECK: %[[LEN:.*]] = memref.load
// CHECK: %[[N:.*]] = arith.index_cast %[[LEN]] : i64 to index
// CHECK: %[[AK:.*]] = memref.alloc(%[[N]]) : memref<?x2x64xf16>
// CHECK: %[[AV:.*]] = memref.alloc(%[[N]]) : memref<?x2x64xf16>
// CHECK: call @kvq_cache_fetch(%[[CACHE]], %c0_i32{{[_0-9]*}}, %{{.*}}, %{{.*}}, %[[LEN]], %c0_i32{{[_0-9]*}})
// CHECK: return %[[AK]], %[[AV]]
func.func @update_and_fetch(%c: !cache, %k: memref<1x2x64xf16>)
    -> (memref<?x2x64xf16>, memref<?x2x64xf16>) {
  %ak, %av = kvq.cache_update %c[0], %k, %k : !cache, memref<1x2x64xf16>, memref<1x2x64xf16>
      -> memref<?x2x64xf16>, memref<?x2x64xf16>
  return %ak, %av : memref<?x2x64xf16>, memref<?x2x64xf16>
}

// Stats are read from the kvq_stats slots; no layer means -1 (all layers).
// CHECK-LABEL: func.func @stats_and_destroy
// CHECK: %[[S:.*]] = memref.alloca() : memref<14xi64>
// CHECK: call @kvq_cache_stats(%{{.*}}, %c-1_i32{{[_0-9]*}}, %{{.*}})
// CHECK: %[[BITS:.*]] = memref.load %[[S]][%c13]
// CHECK: %[[F:.*]] = arith.bitcast %[[BITS]] : i64 to f64
// CHECK: %[[TOTAL:.*]] = memref.load %[[S]][%c11]
// CHECK: call @kvq_cache_destroy(%{{.*}}) : (!llvm.ptr) -> ()
// CHECK: return %[[TOTAL]], %[[F]]
func.func @stats_and_destroy(%c: !cache) -> (i64, f64) {
  %t, %b, %f, %e = kvq.cache_stats %c : !cache
  kvq.cache_destroy %c : !cache
  return %b, %e : i64, f64
}

// A strided view is copied to a dense buffer before the call.
// CHECK-LABEL: func.func @strided_input
// CHECK: %[[DENSE:.*]] = memref.alloc() : memref<4x64xf16>
// CHECK: memref.copy %{{.*}}, %[[DENSE]]
// CHECK: memref.extract_aligned_pointer_as_index %[[DENSE]]
// CHECK: call @kvq_group_quant
// CHECK-NEXT: memref.dealloc %[[DENSE]]
func.func @strided_input(%x: memref<4x64xf16, strided<[128, 1]>>) -> memref<4x64xi8> {
  %c, %s, %z = kvq.group_quant %x axis per_token group 32 bits 2
      : memref<4x64xf16, strided<[128, 1]>> -> memref<4x64xi8>, memref<4x2xf16>, memref<4x2xf16>
  return %c : memref<4x64xi8>
}
