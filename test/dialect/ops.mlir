// RUN: kvq-opt %s | kvq-opt | FileCheck %s
// RUN: kvq-opt %s --mlir-print-op-generic | kvq-opt | FileCheck %s

// CHECK: !cache = !kvq.cache<layers = 2, kv_heads = 8, head_dim = 64, element_type = f16, config = <method = kivi_sink, key_bits = 2, value_bits = 2, n_sink_tokens = 4>>
// CHECK: !cache1 = !kvq.cache<layers = 1, kv_heads = 2, head_dim = 64, element_type = f32, config = <method = kvquant, key_bits = 3, value_bits = 3, outlier_fraction = 2.000000e-02, lloyd_iters = 4, refit_interval = 16, kvquant_n_sink = 2>>
// CHECK: !cache2 = !kvq.cache<layers = 1, kv_heads = 2, head_dim = 64, element_type = f16, config = <method = kivi, key_bits = 2, value_bits = 2, rope = <theta = 5.000000e+05, style = half>>>
!rope = !kvq.cache<layers = 1, kv_heads = 2, head_dim = 64, element_type = f16,
    config = <method = kivi, key_bits = 2, value_bits = 2,
              rope = <theta = 500000.0, style = half>>>
!sink = !kvq.cache<layers = 2, kv_heads = 8, head_dim = 64, element_type = f16,
    config = <method = kivi_sink, key_bits = 2, value_bits = 2, n_sink_tokens = 4>>
!nuq = !kvq.cache<layers = 1, kv_heads = 2, head_dim = 64, element_type = f32,
    config = <method = kvquant, key_bits = 3, value_bits = 3, outlier_fraction = 0.02,
              lloyd_iters = 4, refit_interval = 16, kvquant_n_sink = 2>>

// CHECK-LABEL: func.func @group_quant_round_trip
// CHECK-SAME:    (%[[V:.*]]: tensor<128x8x64xf16>, %[[M:.*]]: tensor<128x8x64xi1>)
func.func @group_quant_round_trip(%v: tensor<128x8x64xf16>, %m: tensor<128x8x64xi1>)
    -> tensor<128x8x64xf32> {
  // CHECK: %[[C:.*]], %[[S:.*]], %[[Z:.*]] = kvq.group_quant %[[V]] axis per_token group 32 bits 2 exclude(%[[M]] : tensor<128x8x64xi1>)
  // CHECK-SAME: : tensor<128x8x64xf16> -> tensor<128x8x64xi8>, tensor<128x8x2xf16>, tensor<128x8x2xf16>
  %c, %s, %z = kvq.group_quant %v axis per_token group 32 bits 2
      exclude(%m : tensor<128x8x64xi1>)
      : tensor<128x8x64xf16> -> tensor<128x8x64xi8>, tensor<128x8x2xf16>, tensor<128x8x2xf16>
  // CHECK: kvq.group_dequant %[[C]], %[[S]], %[[Z]] axis per_token group 32 bits 2
  // CHECK-SAME: -> tensor<128x8x64xf32>
  %x = kvq.group_dequant %c, %s, %z axis per_token group 32 bits 2
      : tensor<128x8x64xi8>, tensor<128x8x2xf16>, tensor<128x8x2xf16> -> tensor<128x8x64xf32>
  return %x : tensor<128x8x64xf32>
}

// CHECK-LABEL: func.func @keys_per_channel
func.func @keys_per_channel(%k: tensor<?x8x64xf16>) -> tensor<?x8x64xi8> {
  // CHECK: kvq.group_quant %{{.*}} axis per_channel group 32 bits 4
  // CHECK-SAME: : tensor<?x8x64xf16> -> tensor<?x8x64xi8>, tensor<?x8x64xf16>, tensor<?x8x64xf16>
  %c, %s, %z = kvq.group_quant %k axis per_channel group 32 bits 4
      : tensor<?x8x64xf16> -> tensor<?x8x64xi8>, tensor<?x8x64xf16>, tensor<?x8x64xf16>
  return %c : tensor<?x8x64xi8>
}

// CHECK-LABEL: func.func @nuq_round_trip
func.func @nuq_round_trip(%k: tensor<128x8x64xf16>, %out: tensor<128x8x64xi1>)
    -> tensor<128x8x64xf16> {
  // CHECK: %[[L:.*]] = kvq.nuq_fit %{{.*}} axis per_channel group 128 bits 3 iters 8 exclude(%{{.*}} : tensor<128x8x64xi1>)
  // CHECK-SAME: : tensor<128x8x64xf16> -> tensor<1x8x64x8xf16>
  %levels = kvq.nuq_fit %k axis per_channel group 128 bits 3 iters 8
      exclude(%out : tensor<128x8x64xi1>) : tensor<128x8x64xf16> -> tensor<1x8x64x8xf16>
  // CHECK: %[[C:.*]] = kvq.nuq_quant %{{.*}}, %[[L]] axis per_channel group 128 bits 3
  %codes = kvq.nuq_quant %k, %levels axis per_channel group 128 bits 3
      : tensor<128x8x64xf16>, tensor<1x8x64x8xf16> -> tensor<128x8x64xi8>
  // CHECK: kvq.nuq_dequant %[[C]], %[[L]] axis per_channel group 128 bits 3
  // CHECK-SAME: -> tensor<128x8x64xf16>
  %x = kvq.nuq_dequant %codes, %levels axis per_channel group 128 bits 3
      : tensor<128x8x64xi8>, tensor<1x8x64x8xf16> -> tensor<128x8x64xf16>
  return %x : tensor<128x8x64xf16>
}

// CHECK-LABEL: func.func @values_per_token_levels
func.func @values_per_token_levels(%v: tensor<16x2x64xf32>) -> tensor<16x2x1x16xf16> {
  // CHECK: kvq.nuq_fit %{{.*}} axis per_token group 64 bits 4 iters 0
  %levels = kvq.nuq_fit %v axis per_token group 64 bits 4 iters 0
      : tensor<16x2x64xf32> -> tensor<16x2x1x16xf16>
  return %levels : tensor<16x2x1x16xf16>
}

// CHECK-LABEL: func.func @outliers
func.func @outliers(%k: tensor<128x8x64xf16>, %new: tensor<1x8x64xf16>,
                    %sinks: tensor<128x8x64xi1>) -> tensor<1x8x64xi1> {
  // CHECK: %{{.*}}, %[[T:.*]] = kvq.outlier_split %{{.*}} axis per_channel group 128 fraction 1.000000e-02 exclude(%{{.*}} : tensor<128x8x64xi1>)
  // CHECK-SAME: : tensor<128x8x64xf16> -> tensor<128x8x64xi1>, tensor<1x8x64xf32>
  %mask, %thr = kvq.outlier_split %k axis per_channel group 128 fraction 0.01
      exclude(%sinks : tensor<128x8x64xi1>)
      : tensor<128x8x64xf16> -> tensor<128x8x64xi1>, tensor<1x8x64xf32>
  %t = tensor.collapse_shape %thr [[0, 1], [2]] : tensor<1x8x64xf32> into tensor<8x64xf32>
  // CHECK: kvq.outlier_screen %{{.*}} above %{{.*}} : tensor<1x8x64xf16>, tensor<8x64xf32> -> tensor<1x8x64xi1>
  %m = kvq.outlier_screen %new above %t : tensor<1x8x64xf16>, tensor<8x64xf32> -> tensor<1x8x64xi1>
  return %m : tensor<1x8x64xi1>
}

// CHECK-LABEL: func.func @sinks
func.func @sinks(%k: tensor<128x8x64xf16>) -> tensor<5xi64> {
  // CHECK: %[[N:.*]] = kvq.key_norm %{{.*}} : tensor<128x8x64xf16> -> tensor<128xf32>
  %norms = kvq.key_norm %k : tensor<128x8x64xf16> -> tensor<128xf32>
  // CHECK: kvq.sink_select %[[N]] count 5 : tensor<128xf32> -> tensor<5xi64>
  %pos = kvq.sink_select %norms count 5 : tensor<128xf32> -> tensor<5xi64>
  return %pos : tensor<5xi64>
}

// CHECK-LABEL: func.func @cache_lifecycle
func.func @cache_lifecycle(%k: tensor<128x8x64xf16>, %v: tensor<128x8x64xf16>,
                           %q: tensor<1x32x64xf32>) -> (tensor<1x32x64xf32>, f64) {
  // CHECK: %[[CACHE:.*]] = kvq.cache_create : !cache
  %c = kvq.cache_create : !sink
  // CHECK: kvq.cache_update %[[CACHE]][0], %{{.*}}, %{{.*}} : !cache, tensor<128x8x64xf16>, tensor<128x8x64xf16>{{$}}
  kvq.cache_update %c[0], %k, %v : !sink, tensor<128x8x64xf16>, tensor<128x8x64xf16>
  // CHECK: kvq.cache_update %[[CACHE]][1], %{{.*}}, %{{.*}} : !cache, tensor<128x8x64xf16>, tensor<128x8x64xf16> -> tensor<?x8x64xf16>, tensor<?x8x64xf16>
  %ak, %av = kvq.cache_update %c[1], %k, %v : !sink, tensor<128x8x64xf16>, tensor<128x8x64xf16>
      -> tensor<?x8x64xf16>, tensor<?x8x64xf16>
  // CHECK: kvq.cache_attend %[[CACHE]][1], %{{.*}} : !cache, tensor<1x32x64xf32> -> tensor<1x32x64xf32>
  %o = kvq.cache_attend %c[1], %q : !sink, tensor<1x32x64xf32> -> tensor<1x32x64xf32>
  // CHECK: kvq.cache_stats %[[CACHE]] : !cache
  %t, %b, %f, %bits = kvq.cache_stats %c : !sink
  // CHECK: kvq.cache_stats %[[CACHE]][1] : !cache
  %t1, %b1, %f1, %bits1 = kvq.cache_stats %c[1] : !sink
  // CHECK: kvq.cache_destroy %[[CACHE]] : !cache
  kvq.cache_destroy %c : !sink
  return %o, %bits : tensor<1x32x64xf32>, f64
}

// CHECK-LABEL: func.func @cache_f32_kvquant
// CHECK-SAME: !cache1
func.func @cache_f32_kvquant(%c: !nuq, %k: tensor<1x2x64xf32>) {
  // CHECK: kvq.cache_update %{{.*}}[0], %{{.*}}, %{{.*}} : !cache1, tensor<1x2x64xf32>, tensor<1x2x64xf32>
  kvq.cache_update %c[0], %k, %k : !nuq, tensor<1x2x64xf32>, tensor<1x2x64xf32>
  return
}

// The method attribute alone, as a per-layer annotation would carry it.
// CHECK-LABEL: func.func @method_attr
// CHECK-SAME: kvq.method = #kvq.method<kvquant>
func.func @method_attr() attributes {kvq.method = #kvq.method<kvquant>} {
  return
}

// After bufferization the same ops work on memrefs; results are fresh buffers.
// CHECK-LABEL: func.func @memref_forms
func.func @memref_forms(%v: memref<16x2x64xf16>, %c: !sink, %q: memref<1x8x64xf32>)
    -> memref<1x8x64xf32> {
  // CHECK: kvq.group_quant %{{.*}} axis per_token group 32 bits 2 : memref<16x2x64xf16> -> memref<16x2x64xi8>, memref<16x2x2xf16>, memref<16x2x2xf16>
  %codes, %s, %z = kvq.group_quant %v axis per_token group 32 bits 2
      : memref<16x2x64xf16> -> memref<16x2x64xi8>, memref<16x2x2xf16>, memref<16x2x2xf16>
  // CHECK: kvq.key_norm %{{.*}} : memref<16x2x64xf16> -> memref<16xf32>
  %n = kvq.key_norm %v : memref<16x2x64xf16> -> memref<16xf32>
  // CHECK: kvq.sink_select %{{.*}} count 2 : memref<16xf32> -> memref<2xi64>
  %p = kvq.sink_select %n count 2 : memref<16xf32> -> memref<2xi64>
  // CHECK: kvq.cache_attend %{{.*}}[0], %{{.*}} : !cache, memref<1x8x64xf32> -> memref<1x8x64xf32>
  %o = kvq.cache_attend %c[0], %q : !sink, memref<1x8x64xf32> -> memref<1x8x64xf32>
  return %o : memref<1x8x64xf32>
}

// A pre-RoPE key cache (the configuration records the keys' RoPE).
// CHECK-LABEL: func.func @pre_rope_cache
// CHECK: kvq.cache_update %{{.*}}[0], %{{.*}}, %{{.*}} : !cache2
func.func @pre_rope_cache(%c: !rope, %k: tensor<1x2x64xf16>, %v: tensor<1x2x64xf16>) {
  kvq.cache_update %c[0], %k, %v : !rope, tensor<1x2x64xf16>, tensor<1x2x64xf16>
  return
}
