// RUN: kvq-opt %s --one-shot-bufferize="bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map" | FileCheck %s

// kvq ops bufferize in place of their operands: reads need no copy, and each
// result becomes a fresh identity-layout memref.

!cache = !kvq.cache<layers = 1, kv_heads = 2, head_dim = 64, element_type = f16,
    config = <method = kivi, key_bits = 2, value_bits = 2>>

// CHECK-LABEL: func.func @quant_dequant
// CHECK-SAME: (%[[V:.*]]: memref<16x2x64xf16>) -> memref<16x2x64xf32>
// CHECK-NOT: memref.copy
// CHECK: %[[C:.*]], %[[S:.*]], %[[Z:.*]] = kvq.group_quant %[[V]] axis per_token group 32 bits 2 : memref<16x2x64xf16> -> memref<16x2x64xi8>, memref<16x2x2xf16>, memref<16x2x2xf16>
// CHECK: %[[X:.*]] = kvq.group_dequant %[[C]], %[[S]], %[[Z]] axis per_token group 32 bits 2 : memref<16x2x64xi8>, memref<16x2x2xf16>, memref<16x2x2xf16> -> memref<16x2x64xf32>
// CHECK: return %[[X]]
func.func @quant_dequant(%v: tensor<16x2x64xf16>) -> tensor<16x2x64xf32> {
  %c, %s, %z = kvq.group_quant %v axis per_token group 32 bits 2
      : tensor<16x2x64xf16> -> tensor<16x2x64xi8>, tensor<16x2x2xf16>, tensor<16x2x2xf16>
  %x = kvq.group_dequant %c, %s, %z axis per_token group 32 bits 2
      : tensor<16x2x64xi8>, tensor<16x2x2xf16>, tensor<16x2x2xf16> -> tensor<16x2x64xf32>
  return %x : tensor<16x2x64xf32>
}

// CHECK-LABEL: func.func @nuq_outliers_sinks
// CHECK-NOT: memref.copy
// CHECK: kvq.outlier_split %{{.*}} axis per_channel group 16 fraction {{.*}} : memref<16x2x64xf16> -> memref<16x2x64xi1>, memref<1x2x64xf32>
// CHECK: kvq.nuq_fit %{{.*}} axis per_channel group 16 bits 3 iters 8 exclude(%{{.*}} : memref<16x2x64xi1>) : memref<16x2x64xf16> -> memref<1x2x64x8xf16>
// CHECK: kvq.nuq_quant {{.*}} : memref<16x2x64xf16>, memref<1x2x64x8xf16> -> memref<16x2x64xi8>
// CHECK: kvq.nuq_dequant {{.*}} -> memref<16x2x64xf16>
// CHECK: kvq.outlier_screen {{.*}} : memref<1x2x64xf16>, memref<2x64xf32> -> memref<1x2x64xi1>
// CHECK: kvq.key_norm {{.*}} : memref<16x2x64xf16> -> memref<16xf32>
// CHECK: kvq.sink_select {{.*}} count 3 : memref<16xf32> -> memref<3xi64>
func.func @nuq_outliers_sinks(%k: tensor<16x2x64xf16>, %new: tensor<1x2x64xf16>,
                              %thr: tensor<2x64xf32>)
    -> (tensor<16x2x64xf16>, tensor<1x2x64xi1>, tensor<3xi64>) {
  %m, %t = kvq.outlier_split %k axis per_channel group 16 fraction 0.01
      : tensor<16x2x64xf16> -> tensor<16x2x64xi1>, tensor<1x2x64xf32>
  %l = kvq.nuq_fit %k axis per_channel group 16 bits 3 iters 8 exclude(%m : tensor<16x2x64xi1>)
      : tensor<16x2x64xf16> -> tensor<1x2x64x8xf16>
  %c = kvq.nuq_quant %k, %l axis per_channel group 16 bits 3
      : tensor<16x2x64xf16>, tensor<1x2x64x8xf16> -> tensor<16x2x64xi8>
  %x = kvq.nuq_dequant %c, %l axis per_channel group 16 bits 3
      : tensor<16x2x64xi8>, tensor<1x2x64x8xf16> -> tensor<16x2x64xf16>
  %s = kvq.outlier_screen %new above %thr : tensor<1x2x64xf16>, tensor<2x64xf32> -> tensor<1x2x64xi1>
  %n = kvq.key_norm %k : tensor<16x2x64xf16> -> tensor<16xf32>
  %p = kvq.sink_select %n count 3 : tensor<16xf32> -> tensor<3xi64>
  return %x, %s, %p : tensor<16x2x64xf16>, tensor<1x2x64xi1>, tensor<3xi64>
}

// CHECK-LABEL: func.func @cache_step
// CHECK-SAME: (%[[CACHE:.*]]: !cache, %[[K:.*]]: memref<1x2x64xf16>, %[[V:.*]]: memref<1x2x64xf16>, %[[Q:.*]]: memref<1x4x64xf32>)
// CHECK-NOT: memref.copy
// CHECK: kvq.cache_update %[[CACHE]][0], %[[K]], %[[V]] : !cache, memref<1x2x64xf16>, memref<1x2x64xf16> -> memref<?x2x64xf16>, memref<?x2x64xf16>
// CHECK: kvq.cache_attend %[[CACHE]][0], %[[Q]] : !cache, memref<1x4x64xf32> -> memref<1x4x64xf32>
func.func @cache_step(%c: !cache, %k: tensor<1x2x64xf16>, %v: tensor<1x2x64xf16>,
                      %q: tensor<1x4x64xf32>) -> (tensor<?x2x64xf16>, tensor<1x4x64xf32>) {
  %ak, %av = kvq.cache_update %c[0], %k, %v : !cache, tensor<1x2x64xf16>, tensor<1x2x64xf16>
      -> tensor<?x2x64xf16>, tensor<?x2x64xf16>
  %o = kvq.cache_attend %c[0], %q : !cache, tensor<1x4x64xf32> -> tensor<1x4x64xf32>
  return %ak, %o : tensor<?x2x64xf16>, tensor<1x4x64xf32>
}
