// RUN: kvq-opt %s --convert-kvq-to-runtime="target=metal" | FileCheck %s

// The Metal target calls kvq_metal_*; stateless kernels take the device
// context first, caches are created with the Metal backend (1) and carry
// their context themselves.

!cache = !kvq.cache<layers = 1, kv_heads = 2, head_dim = 64, element_type = f16,
    config = <method = kvquant, key_bits = 3, value_bits = 3>>

// CHECK-DAG: func.func private @kvq_metal_default_context() -> !llvm.ptr
// CHECK-DAG: func.func private @kvq_metal_group_quant(!llvm.ptr, !llvm.ptr, i32, i64, i64, i32, i32, i32, !llvm.ptr, i32, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> i32
// CHECK-DAG: func.func private @kvq_metal_key_norm(!llvm.ptr, !llvm.ptr, i32, i64, i32, i32, !llvm.ptr) -> i32
// CHECK-DAG: func.func private @kvq_metal_cache_create_flat(i32, i32, i32, i32, i32, i32, i32, f32, i32, i32, i32, i32, i32, i32, i32, i32, i32, f32, !llvm.ptr) -> i32
// CHECK-DAG: func.func private @kvq_metal_cache_update(!llvm.ptr, i32, !llvm.ptr, !llvm.ptr, i64, i32) -> i32
// CHECK-DAG: func.func private @kvq_metal_cache_attend(!llvm.ptr, i32, !llvm.ptr, i64, i32, !llvm.ptr) -> i32
// CHECK-NOT: func.func private @kvq_group_quant

// CHECK-LABEL: func.func @kernels
// CHECK: %[[CTX:.*]] = call @kvq_metal_default_context() : () -> !llvm.ptr
// CHECK: call @kvq_metal_group_quant(%[[CTX]], %{{.*}}
// CHECK: call @kvq_check_status
// CHECK: %[[CTX2:.*]] = call @kvq_metal_default_context() : () -> !llvm.ptr
// CHECK: call @kvq_metal_key_norm(%[[CTX2]], %{{.*}}
func.func @kernels(%v: memref<16x2x64xf16>) -> (memref<16x2x64xi8>, memref<16xf32>) {
  %c, %s, %z = kvq.group_quant %v axis per_token group 32 bits 2
      : memref<16x2x64xf16> -> memref<16x2x64xi8>, memref<16x2x2xf16>, memref<16x2x2xf16>
  %n = kvq.key_norm %v : memref<16x2x64xf16> -> memref<16xf32>
  return %c, %n : memref<16x2x64xi8>, memref<16xf32>
}

// CHECK-LABEL: func.func @cache
// CHECK: call @kvq_metal_cache_create_flat(%c3_i32{{.*}}, %c3_i32{{.*}}, %c3_i32{{.*}}, {{.*}}, %c1_i32{{[_0-9]*}}, %c0_i32{{[_0-9]*}}, %{{.*}}, %{{.*}}) :
// CHECK: call @kvq_metal_cache_update(
// CHECK: call @kvq_metal_cache_attend(
// CHECK: call @kvq_metal_cache_destroy(
func.func @cache(%k: memref<1x2x64xf16>, %q: memref<1x2x64xf32>) -> memref<1x2x64xf32> {
  %c = kvq.cache_create : !cache
  kvq.cache_update %c[0], %k, %k : !cache, memref<1x2x64xf16>, memref<1x2x64xf16>
  %o = kvq.cache_attend %c[0], %q : !cache, memref<1x2x64xf32> -> memref<1x2x64xf32>
  kvq.cache_destroy %c : !cache
  return %o : memref<1x2x64xf32>
}

