// RUN: kvq-opt %s --kvq-quantize-kv-cache | FileCheck %s --implicit-check-not=remark --implicit-check-not=tensor.extract_slice

// StableHLO's dynamic_update_slice lowers with its start index clamped into
// the tensor, min(max(pos, 0), context - n) (stablehlo/conversions/linalg:
// the DynamicUpdateSlice lowering clamps each start index), while the
// attention reads pos + 1 positions of the unclamped pos. In range the clamp
// is the identity, so the cache is adopted, and its position check compares
// with pos itself (a position out of range fails that check at runtime
// instead of being clamped). Otherwise the graph is the heads-first GQA decode
// of kvq-quantize-kv-cache.mlir.

// CHECK-LABEL: func.func @clamped_write_decode(
// CHECK-SAME: %[[C:arg[0-9]+]]: !cache, %[[POS:arg[0-9]+]]: index)
// CHECK: %[[N:.*]], %{{.*}}, %{{.*}}, %{{.*}} = kvq.cache_stats %[[C]][0]
// CHECK: %[[P:.*]] = arith.index_cast %[[POS]] : index to i64
// CHECK: arith.cmpi eq, %[[N]], %[[P]] : i64
// CHECK: kvq.cache_update %[[C]][0]
// CHECK: kvq.cache_attend %[[C]][0]

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#sqt3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
#sk3 = affine_map<(d0, d1, d2, d3) -> (d2, d0, d3)>
#ss3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#wp3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
#wv3 = affine_map<(d0, d1, d2, d3) -> (d3, d0, d2)>
#wot3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>

func.func @clamped_write_decode(%q: tensor<4x1x4xf32>, %k0: tensor<1x2x4xf32>, %v0: tensor<1x2x4xf32>, %kc: tensor<1x16x2x4xf32>, %vc: tensor<1x16x2x4xf32>, %pos: index)
    -> (tensor<4x1x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %c1 = arith.constant 1 : index
  %len = arith.addi %pos, %c1 : index
  %c0i = arith.constant 0 : index
  %c15 = arith.constant 15 : index
  %lo = arith.maxsi %pos, %c0i : index
  %at = arith.minsi %lo, %c15 : index
  %lo2 = arith.maxsi %pos, %c0i : index
  %at2 = arith.minsi %c15, %lo2 : index
  // Layer 0
  %kw0 = tensor.insert_slice %k0 into %kc[0, %at, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<1x16x2x4xf32>
  %kr0 = tensor.extract_slice %kw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %vw0 = tensor.insert_slice %v0 into %vc[0, %at2, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<1x16x2x4xf32>
  %vr0 = tensor.extract_slice %vw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %kbe0 = tensor.empty(%len) : tensor<?x2x2x4xf32>
  %kb0 = linalg.broadcast ins(%kr0 : tensor<?x2x4xf32>) outs(%kbe0 : tensor<?x2x2x4xf32>) dimensions = [2]
  %kg0 = tensor.collapse_shape %kb0 [[0], [1, 2], [3]] : tensor<?x2x2x4xf32> into tensor<?x4x4xf32>
  %vbe0 = tensor.empty(%len) : tensor<?x2x2x4xf32>
  %vb0 = linalg.broadcast ins(%vr0 : tensor<?x2x4xf32>) outs(%vbe0 : tensor<?x2x2x4xf32>) dimensions = [2]
  %vg0 = tensor.collapse_shape %vb0 [[0], [1, 2], [3]] : tensor<?x2x2x4xf32> into tensor<?x4x4xf32>
  %se0 = tensor.empty(%len) : tensor<4x1x?xf32>
  %sz0 = linalg.fill ins(%zero : f32) outs(%se0 : tensor<4x1x?xf32>) -> tensor<4x1x?xf32>
  %s0 = linalg.generic {indexing_maps = [#sqt3, #sk3, #ss3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %kg0 : tensor<4x1x4xf32>, tensor<?x4x4xf32>) outs(%sz0 : tensor<4x1x?xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<4x1x?xf32>
  %scale0 = arith.constant 0.5 : f32
  %sce0 = tensor.empty(%len) : tensor<4x1x?xf32>
  %sc0 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s0 : tensor<4x1x?xf32>) outs(%sce0 : tensor<4x1x?xf32>) {
    ^bb0(%in: f32, %out: f32):
      %m = arith.mulf %in, %scale0 : f32
      linalg.yield %m : f32
    } -> tensor<4x1x?xf32>
  %pe0 = tensor.empty(%len) : tensor<4x1x?xf32>
  %pr0 = linalg.softmax dimension(2) ins(%sc0 : tensor<4x1x?xf32>) outs(%pe0 : tensor<4x1x?xf32>) -> tensor<4x1x?xf32>
  %oe0 = tensor.empty() : tensor<4x1x4xf32>
  %oz0 = linalg.fill ins(%zero : f32) outs(%oe0 : tensor<4x1x4xf32>) -> tensor<4x1x4xf32>
  %o0 = linalg.generic {indexing_maps = [#wp3, #wv3, #wot3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%pr0, %vg0 : tensor<4x1x?xf32>, tensor<?x4x4xf32>) outs(%oz0 : tensor<4x1x4xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<4x1x4xf32>
  return %o0, %kw0, %vw0 : tensor<4x1x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>
}


