// RUN: kvq-opt %s --kvq-quantize-kv-cache 2>&1 | FileCheck %s --implicit-check-not=remark

// Regression: queries with a second user (here also returned) are fine: only
// a value on the way to a cache read must feed nothing but the attention
// (this used to be refused as "a cache read feeds more than the
// attention").
// CHECK-LABEL: func.func @queries_also_returned(
// CHECK-SAME: %[[Q:arg[0-9]+]]: tensor<1x2x4xf32>, %{{.*}}, %{{.*}}, %[[C:arg[0-9]+]]: !cache, %{{.*}}: index) -> (tensor<1x2x4xf32>, tensor<1x2x4xf32>)
// CHECK: %[[A:.*]] = kvq.cache_attend %[[C]][0], %[[Q]]
// CHECK: return %[[A]], %[[Q]]

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#sq3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d3)>
#sk3 = affine_map<(d0, d1, d2, d3) -> (d2, d0, d3)>
#ss3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#wp3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
#wv3 = affine_map<(d0, d1, d2, d3) -> (d3, d0, d2)>
#wo3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d2)>

func.func @queries_also_returned(%q: tensor<1x2x4xf32>, %k0: tensor<1x2x4xf32>, %v0: tensor<1x2x4xf32>, %kc: tensor<1x16x2x4xf32>, %vc: tensor<1x16x2x4xf32>, %pos: index)
    -> (tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %c1 = arith.constant 1 : index
  %len = arith.addi %pos, %c1 : index
  // Layer 0
  %kw0 = tensor.insert_slice %k0 into %kc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<1x16x2x4xf32>
  %kr0 = tensor.extract_slice %kw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %vw0 = tensor.insert_slice %v0 into %vc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<1x16x2x4xf32>
  %vr0 = tensor.extract_slice %vw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %se0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sz0 = linalg.fill ins(%zero : f32) outs(%se0 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %s0 = linalg.generic {indexing_maps = [#sq3, #sk3, #ss3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %kr0 : tensor<1x2x4xf32>, tensor<?x2x4xf32>) outs(%sz0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<2x1x?xf32>
  %scale0 = arith.constant 0.5 : f32
  %sce0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sc0 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s0 : tensor<2x1x?xf32>) outs(%sce0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %out: f32):
      %m = arith.mulf %in, %scale0 : f32
      linalg.yield %m : f32
    } -> tensor<2x1x?xf32>
  %pe0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %pr0 = linalg.softmax dimension(2) ins(%sc0 : tensor<2x1x?xf32>) outs(%pe0 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %oe0 = tensor.empty() : tensor<1x2x4xf32>
  %oz0 = linalg.fill ins(%zero : f32) outs(%oe0 : tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  %o0 = linalg.generic {indexing_maps = [#wp3, #wv3, #wo3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%pr0, %vr0 : tensor<2x1x?xf32>, tensor<?x2x4xf32>) outs(%oz0 : tensor<1x2x4xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<1x2x4xf32>
  return %o0, %q, %kw0, %vw0 : tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>
}
