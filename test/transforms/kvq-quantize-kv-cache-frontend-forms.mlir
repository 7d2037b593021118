// RUN: kvq-opt %s --split-input-file --verify-diagnostics --kvq-quantize-kv-cache=method=fp16 | FileCheck %s
// REQUIRES: mlir-runner
// RUN: %python %S/Inputs/equivalence.py %s --run "%kvq_run" | FileCheck %s --check-prefix=SAME

// Attention in the spellings frontends emit, each adopted by
// kvq-quantize-kv-cache. The FileCheck lines pin the rewrite; the second RUN
// line compiles every graph before and after the rewrite (method fp16), runs
// both for several decode steps on the same inputs and compares every output
// (Inputs/equivalence.py): a rewrite that attends the wrong head, position or
// scale fails there.

// Hugging Face LlamaAttention with a static cache, as torch-mlir lowers it
// (lib/Conversion/TorchToLinalg/Linear.cpp, ConvertAtenMatmulOp: the batch
// dims of a 4-D matmul collapsed into one linalg.batch_matmul and expanded
// back; aten.transpose as linalg.transpose; scaled_dot_product_attention
// decomposed in lib/Dialect/Torch/Transforms/DecomposeComplexOps.cpp into
// matmul, divide by sqrt(head_dim) and softmax). The cache is Hugging Face's
// [batch, kv_heads, seq, head_dim], written at dimension 2 by index_copy's
// slice form.
// EQUIV: func=torch_hf_decode caches=3,4 cache_results=1,2 pos=5 steps=4

// CHECK-LABEL: func.func @torch_hf_decode(
// CHECK-SAME: %[[Q:arg[0-9]+]]: tensor<1x2x1x4xf32>, %[[K:arg[0-9]+]]: tensor<1x2x1x4xf32>, %[[V:arg[0-9]+]]: tensor<1x2x1x4xf32>, %[[C:arg[0-9]+]]: !cache, %[[POS:arg[0-9]+]]: index) -> tensor<1x2x1x4xf32>
// CHECK: %[[KC:.*]] = linalg.generic {{.*}} ins(%[[K]] : tensor<1x2x1x4xf32>) outs(%{{.*}} : tensor<1x2x4xf32>)
// CHECK: %[[VC:.*]] = linalg.generic {{.*}} ins(%[[V]] : tensor<1x2x1x4xf32>) outs(%{{.*}} : tensor<1x2x4xf32>)
// CHECK: kvq.cache_update %[[C]][0], %[[KC]], %[[VC]]
// CHECK: %[[A:.*]] = kvq.cache_attend %[[C]][0], %{{.*}} : !cache, tensor<1x2x4xf32> -> tensor<1x2x4xf32>
// CHECK: tensor.expand_shape
// SAME: @torch_hf_decode: 32 values over 4 steps agree

func.func @torch_hf_decode(%q: tensor<1x2x1x4xf32>, %k: tensor<1x2x1x4xf32>, %v: tensor<1x2x1x4xf32>, %kc: tensor<1x2x16x4xf32>, %vc: tensor<1x2x16x4xf32>, %pos: index)
    -> (tensor<1x2x1x4xf32>, tensor<1x2x16x4xf32>, tensor<1x2x16x4xf32>) {
  %kc1 = tensor.insert_slice %k into %kc[0, 0, %pos, 0] [1, 2, 1, 4] [1, 1, 1, 1] : tensor<1x2x1x4xf32> into tensor<1x2x16x4xf32>
  %vc1 = tensor.insert_slice %v into %vc[0, 0, %pos, 0] [1, 2, 1, 4] [1, 1, 1, 1] : tensor<1x2x1x4xf32> into tensor<1x2x16x4xf32>
  %c1 = arith.constant 1 : index
  %len = arith.addi %pos, %c1 : index
  %kr = tensor.extract_slice %kc1[0, 0, 0, 0] [1, 2, %len, 4] [1, 1, 1, 1] : tensor<1x2x16x4xf32> to tensor<1x2x?x4xf32>
  %vr = tensor.extract_slice %vc1[0, 0, 0, 0] [1, 2, %len, 4] [1, 1, 1, 1] : tensor<1x2x16x4xf32> to tensor<1x2x?x4xf32>
  %e0 = tensor.empty(%len) : tensor<1x2x4x?xf32>
  %kt = linalg.transpose ins(%kr : tensor<1x2x?x4xf32>) outs(%e0 : tensor<1x2x4x?xf32>) permutation = [0, 1, 3, 2]
  %q3 = tensor.collapse_shape %q [[0, 1], [2], [3]] : tensor<1x2x1x4xf32> into tensor<2x1x4xf32>
  %kt3 = tensor.collapse_shape %kt [[0, 1], [2], [3]] : tensor<1x2x4x?xf32> into tensor<2x4x?xf32>
  %zero = arith.constant 0.0 : f32
  %e1 = tensor.empty(%len) : tensor<2x1x?xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %s3 = linalg.batch_matmul ins(%q3, %kt3 : tensor<2x1x4xf32>, tensor<2x4x?xf32>) outs(%f1 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %s4 = tensor.expand_shape %s3 [[0, 1], [2], [3]] output_shape [1, 2, 1, %len] : tensor<2x1x?xf32> into tensor<1x2x1x?xf32>
  %two = arith.constant 2.0 : f32
  %e2 = tensor.empty(%len) : tensor<1x2x1x?xf32>
  %sc = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s4 : tensor<1x2x1x?xf32>) outs(%e2 : tensor<1x2x1x?xf32>) {
  ^bb0(%a: f32, %o: f32):
    %d = arith.divf %a, %two : f32
    linalg.yield %d : f32
  } -> tensor<1x2x1x?xf32>
  %e3 = tensor.empty(%len) : tensor<1x2x1x?xf32>
  %p = linalg.softmax dimension(3) ins(%sc : tensor<1x2x1x?xf32>) outs(%e3 : tensor<1x2x1x?xf32>) -> tensor<1x2x1x?xf32>
  %p3 = tensor.collapse_shape %p [[0, 1], [2], [3]] : tensor<1x2x1x?xf32> into tensor<2x1x?xf32>
  %v3 = tensor.collapse_shape %vr [[0, 1], [2], [3]] : tensor<1x2x?x4xf32> into tensor<2x?x4xf32>
  %e4 = tensor.empty() : tensor<2x1x4xf32>
  %f4 = linalg.fill ins(%zero : f32) outs(%e4 : tensor<2x1x4xf32>) -> tensor<2x1x4xf32>
  %o3 = linalg.batch_matmul ins(%p3, %v3 : tensor<2x1x?xf32>, tensor<2x?x4xf32>) outs(%f4 : tensor<2x1x4xf32>) -> tensor<2x1x4xf32>
  %o = tensor.expand_shape %o3 [[0, 1], [2], [3]] output_shape [1, 2, 1, 4] : tensor<2x1x4xf32> into tensor<1x2x1x4xf32>
  return %o, %kc1, %vc1 : tensor<1x2x1x4xf32>, tensor<1x2x16x4xf32>, tensor<1x2x16x4xf32>
}

// -----

// Hugging Face's repeat_kv for grouped-query attention, as torch-mlir lowers
// aten.expand + aten.reshape (lib/Conversion/TorchToLinalg/DataMovement.cpp:
// expand_shape to insert the group dim, a broadcasting linalg.generic,
// collapse_shape into [batch, heads, seq, head_dim]), with the scores and
// weighted sum as linalg.generic batch matmuls over [batch, heads] and the
// scale on the queries (multiply by 1/sqrt(head_dim) before q·kᵀ).
// 4 query heads over 2 KV heads.
// EQUIV: func=torch_gqa_decode caches=3,4 cache_results=1,2 pos=5 steps=3

// CHECK-LABEL: func.func @torch_gqa_decode(
// CHECK: kvq.cache_update
// CHECK: kvq.cache_attend %{{.*}}[0], %{{.*}} : !cache, tensor<1x4x4xf32> -> tensor<1x4x4xf32>
// SAME: @torch_gqa_decode: 48 values over 3 steps agree

#m4 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#b5in = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, 0, d3, d4)>
#b5out = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>
#sq = affine_map<(b, h, n, t, c) -> (b, h, n, c)>
#sk = affine_map<(b, h, n, t, c) -> (b, h, t, c)>
#ss = affine_map<(b, h, n, t, c) -> (b, h, n, t)>
#wp = affine_map<(b, h, n, c, t) -> (b, h, n, t)>
#wv = affine_map<(b, h, n, c, t) -> (b, h, t, c)>
#wo = affine_map<(b, h, n, c, t) -> (b, h, n, c)>
func.func @torch_gqa_decode(%q: tensor<1x4x1x4xf32>, %k: tensor<1x2x1x4xf32>, %v: tensor<1x2x1x4xf32>, %kc: tensor<1x2x8x4xf32>, %vc: tensor<1x2x8x4xf32>, %pos: index)
    -> (tensor<1x4x1x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>) {
  %kc1 = tensor.insert_slice %k into %kc[0, 0, %pos, 0] [1, 2, 1, 4] [1, 1, 1, 1] : tensor<1x2x1x4xf32> into tensor<1x2x8x4xf32>
  %vc1 = tensor.insert_slice %v into %vc[0, 0, %pos, 0] [1, 2, 1, 4] [1, 1, 1, 1] : tensor<1x2x1x4xf32> into tensor<1x2x8x4xf32>
  %c1 = arith.constant 1 : index
  %len = arith.addi %pos, %c1 : index
  %kr = tensor.extract_slice %kc1[0, 0, 0, 0] [1, 2, %len, 4] [1, 1, 1, 1] : tensor<1x2x8x4xf32> to tensor<1x2x?x4xf32>
  %vr = tensor.extract_slice %vc1[0, 0, 0, 0] [1, 2, %len, 4] [1, 1, 1, 1] : tensor<1x2x8x4xf32> to tensor<1x2x?x4xf32>
  %kx = tensor.expand_shape %kr [[0], [1, 2], [3], [4]] output_shape [1, 2, 1, %len, 4] : tensor<1x2x?x4xf32> into tensor<1x2x1x?x4xf32>
  %ke = tensor.empty(%len) : tensor<1x2x2x?x4xf32>
  %kb = linalg.generic {indexing_maps = [#b5in, #b5out], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]} ins(%kx : tensor<1x2x1x?x4xf32>) outs(%ke : tensor<1x2x2x?x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  } -> tensor<1x2x2x?x4xf32>
  %kg = tensor.collapse_shape %kb [[0], [1, 2], [3], [4]] : tensor<1x2x2x?x4xf32> into tensor<1x4x?x4xf32>
  %vx = tensor.expand_shape %vr [[0], [1, 2], [3], [4]] output_shape [1, 2, 1, %len, 4] : tensor<1x2x?x4xf32> into tensor<1x2x1x?x4xf32>
  %ve = tensor.empty(%len) : tensor<1x2x2x?x4xf32>
  %vb = linalg.generic {indexing_maps = [#b5in, #b5out], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]} ins(%vx : tensor<1x2x1x?x4xf32>) outs(%ve : tensor<1x2x2x?x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  } -> tensor<1x2x2x?x4xf32>
  %vg = tensor.collapse_shape %vb [[0], [1, 2], [3], [4]] : tensor<1x2x2x?x4xf32> into tensor<1x4x?x4xf32>
  %half = arith.constant 0.5 : f32
  %qe = tensor.empty() : tensor<1x4x1x4xf32>
  %qs = linalg.generic {indexing_maps = [#m4, #m4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%q : tensor<1x4x1x4xf32>) outs(%qe : tensor<1x4x1x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.mulf %a, %half : f32
    linalg.yield %m : f32
  } -> tensor<1x4x1x4xf32>
  %zero = arith.constant 0.0 : f32
  %se = tensor.empty(%len) : tensor<1x4x1x?xf32>
  %sz = linalg.fill ins(%zero : f32) outs(%se : tensor<1x4x1x?xf32>) -> tensor<1x4x1x?xf32>
  %s = linalg.generic {indexing_maps = [#sq, #sk, #ss], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%qs, %kg : tensor<1x4x1x4xf32>, tensor<1x4x?x4xf32>) outs(%sz : tensor<1x4x1x?xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %o, %m : f32
    linalg.yield %r : f32
  } -> tensor<1x4x1x?xf32>
  %pe = tensor.empty(%len) : tensor<1x4x1x?xf32>
  %p = linalg.softmax dimension(3) ins(%s : tensor<1x4x1x?xf32>) outs(%pe : tensor<1x4x1x?xf32>) -> tensor<1x4x1x?xf32>
  %oe = tensor.empty() : tensor<1x4x1x4xf32>
  %oz = linalg.fill ins(%zero : f32) outs(%oe : tensor<1x4x1x4xf32>) -> tensor<1x4x1x4xf32>
  %o = linalg.generic {indexing_maps = [#wp, #wv, #wo], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%p, %vg : tensor<1x4x1x?xf32>, tensor<1x4x?x4xf32>) outs(%oz : tensor<1x4x1x4xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<1x4x1x4xf32>
  return %o, %kc1, %vc1 : tensor<1x4x1x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>
}

// -----

// Grouped-query attention without repeat_kv: the contractions index KV head
// h / 2 directly (`h floordiv 2` in the key and value maps), as a
// hand-written einsum over grouped heads or a fused generic writes it. 4
// query heads over 2 KV heads.
// EQUIV: func=floordiv_gqa caches=3,4 cache_results=1,2 pos=5 steps=3

// CHECK-LABEL: func.func @floordiv_gqa(
// CHECK: kvq.cache_update
// CHECK: kvq.cache_attend %{{.*}}[0], %{{.*}} : !cache, tensor<1x4x4xf32> -> tensor<1x4x4xf32>
// SAME: @floordiv_gqa: 48 values over 3 steps agree

#sq = affine_map<(b, h, n, t, c) -> (b, h, n, c)>
#sk = affine_map<(b, h, n, t, c) -> (b, h floordiv 2, t, c)>
#ss = affine_map<(b, h, n, t, c) -> (b, h, n, t)>
#wp = affine_map<(b, h, n, c, t) -> (b, h, n, t)>
#wv = affine_map<(b, h, n, c, t) -> (b, h floordiv 2, t, c)>
#wo = affine_map<(b, h, n, c, t) -> (b, h, n, c)>
func.func @floordiv_gqa(%q: tensor<1x4x1x4xf32>, %k: tensor<1x2x1x4xf32>, %v: tensor<1x2x1x4xf32>, %kc: tensor<1x2x8x4xf32>, %vc: tensor<1x2x8x4xf32>, %pos: index)
    -> (tensor<1x4x1x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>) {
  %kc1 = tensor.insert_slice %k into %kc[0, 0, %pos, 0] [1, 2, 1, 4] [1, 1, 1, 1] : tensor<1x2x1x4xf32> into tensor<1x2x8x4xf32>
  %vc1 = tensor.insert_slice %v into %vc[0, 0, %pos, 0] [1, 2, 1, 4] [1, 1, 1, 1] : tensor<1x2x1x4xf32> into tensor<1x2x8x4xf32>
  %c1 = arith.constant 1 : index
  %len = arith.addi %pos, %c1 : index
  %kr = tensor.extract_slice %kc1[0, 0, 0, 0] [1, 2, %len, 4] [1, 1, 1, 1] : tensor<1x2x8x4xf32> to tensor<1x2x?x4xf32>
  %vr = tensor.extract_slice %vc1[0, 0, 0, 0] [1, 2, %len, 4] [1, 1, 1, 1] : tensor<1x2x8x4xf32> to tensor<1x2x?x4xf32>
  %zero = arith.constant 0.0 : f32
  %se = tensor.empty(%len) : tensor<1x4x1x?xf32>
  %sz = linalg.fill ins(%zero : f32) outs(%se : tensor<1x4x1x?xf32>) -> tensor<1x4x1x?xf32>
  %s = linalg.generic {indexing_maps = [#sq, #sk, #ss], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%q, %kr : tensor<1x4x1x4xf32>, tensor<1x2x?x4xf32>) outs(%sz : tensor<1x4x1x?xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %o, %m : f32
    linalg.yield %r : f32
  } -> tensor<1x4x1x?xf32>
  %half = arith.constant 0.5 : f32
  %xe = tensor.empty(%len) : tensor<1x4x1x?xf32>
  %sc = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (a, b, c, d)>, affine_map<(a, b, c, d) -> (a, b, c, d)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s : tensor<1x4x1x?xf32>) outs(%xe : tensor<1x4x1x?xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.mulf %a, %half : f32
    linalg.yield %m : f32
  } -> tensor<1x4x1x?xf32>
  %pe = tensor.empty(%len) : tensor<1x4x1x?xf32>
  %p = linalg.softmax dimension(3) ins(%sc : tensor<1x4x1x?xf32>) outs(%pe : tensor<1x4x1x?xf32>) -> tensor<1x4x1x?xf32>
  %oe = tensor.empty() : tensor<1x4x1x4xf32>
  %oz = linalg.fill ins(%zero : f32) outs(%oe : tensor<1x4x1x4xf32>) -> tensor<1x4x1x4xf32>
  %o = linalg.generic {indexing_maps = [#wp, #wv, #wo], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%p, %vr : tensor<1x4x1x?xf32>, tensor<1x2x?x4xf32>) outs(%oz : tensor<1x4x1x4xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<1x4x1x4xf32>
  return %o, %kc1, %vc1 : tensor<1x4x1x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>
}

// -----

// Destination-passing writes: the new token's slot is sliced out of the
// cache, filled by linalg.copy (K) or a copying generic (V) and inserted
// back, as bufferization-friendly exports and IREE-style dispatch
// formation write an update in place. The slot's old contents never reach
// the result, so the write is adopted like a plain insert_slice.
// EQUIV: func=dps_write caches=3,4 cache_results=1,2 pos=5 steps=4

// CHECK-LABEL: func.func @dps_write(
// CHECK-SAME: !cache
// CHECK: kvq.cache_update
// CHECK: kvq.cache_attend
// SAME: @dps_write: 32 values over 4 steps agree

func.func @dps_write(%q: tensor<1x2x1x4xf32>, %k: tensor<1x2x1x4xf32>, %v: tensor<1x2x1x4xf32>, %kc: tensor<1x2x16x4xf32>, %vc: tensor<1x2x16x4xf32>, %pos: index)
    -> (tensor<1x2x1x4xf32>, tensor<1x2x16x4xf32>, tensor<1x2x16x4xf32>) {
  %ks = tensor.extract_slice %kc[0, 0, %pos, 0] [1, 2, 1, 4] [1, 1, 1, 1] : tensor<1x2x16x4xf32> to tensor<1x2x1x4xf32>
  %kw = linalg.copy ins(%k : tensor<1x2x1x4xf32>) outs(%ks : tensor<1x2x1x4xf32>) -> tensor<1x2x1x4xf32>
  %kc1 = tensor.insert_slice %kw into %kc[0, 0, %pos, 0] [1, 2, 1, 4] [1, 1, 1, 1] : tensor<1x2x1x4xf32> into tensor<1x2x16x4xf32>
  %vs = tensor.extract_slice %vc[0, 0, %pos, 0] [1, 2, 1, 4] [1, 1, 1, 1] : tensor<1x2x16x4xf32> to tensor<1x2x1x4xf32>
  %vw = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (a, b, c, d)>, affine_map<(a, b, c, d) -> (a, b, c, d)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%v : tensor<1x2x1x4xf32>) outs(%vs : tensor<1x2x1x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  } -> tensor<1x2x1x4xf32>
  %vc1 = tensor.insert_slice %vw into %vc[0, 0, %pos, 0] [1, 2, 1, 4] [1, 1, 1, 1] : tensor<1x2x1x4xf32> into tensor<1x2x16x4xf32>
  %c1 = arith.constant 1 : index
  %len = arith.addi %pos, %c1 : index
  %kr = tensor.extract_slice %kc1[0, 0, 0, 0] [1, 2, %len, 4] [1, 1, 1, 1] : tensor<1x2x16x4xf32> to tensor<1x2x?x4xf32>
  %vr = tensor.extract_slice %vc1[0, 0, 0, 0] [1, 2, %len, 4] [1, 1, 1, 1] : tensor<1x2x16x4xf32> to tensor<1x2x?x4xf32>
  %e0 = tensor.empty(%len) : tensor<1x2x4x?xf32>
  %kt = linalg.transpose ins(%kr : tensor<1x2x?x4xf32>) outs(%e0 : tensor<1x2x4x?xf32>) permutation = [0, 1, 3, 2]
  %q3 = tensor.collapse_shape %q [[0, 1], [2], [3]] : tensor<1x2x1x4xf32> into tensor<2x1x4xf32>
  %kt3 = tensor.collapse_shape %kt [[0, 1], [2], [3]] : tensor<1x2x4x?xf32> into tensor<2x4x?xf32>
  %zero = arith.constant 0.0 : f32
  %e1 = tensor.empty(%len) : tensor<2x1x?xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %s3 = linalg.batch_matmul ins(%q3, %kt3 : tensor<2x1x4xf32>, tensor<2x4x?xf32>) outs(%f1 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %s4 = tensor.expand_shape %s3 [[0, 1], [2], [3]] output_shape [1, 2, 1, %len] : tensor<2x1x?xf32> into tensor<1x2x1x?xf32>
  %two = arith.constant 2.0 : f32
  %e2 = tensor.empty(%len) : tensor<1x2x1x?xf32>
  %sc = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s4 : tensor<1x2x1x?xf32>) outs(%e2 : tensor<1x2x1x?xf32>) {
  ^bb0(%a: f32, %o: f32):
    %d = arith.divf %a, %two : f32
    linalg.yield %d : f32
  } -> tensor<1x2x1x?xf32>
  %e3 = tensor.empty(%len) : tensor<1x2x1x?xf32>
  %p = linalg.softmax dimension(3) ins(%sc : tensor<1x2x1x?xf32>) outs(%e3 : tensor<1x2x1x?xf32>) -> tensor<1x2x1x?xf32>
  %p3 = tensor.collapse_shape %p [[0, 1], [2], [3]] : tensor<1x2x1x?xf32> into tensor<2x1x?xf32>
  %v3 = tensor.collapse_shape %vr [[0, 1], [2], [3]] : tensor<1x2x?x4xf32> into tensor<2x?x4xf32>
  %e4 = tensor.empty() : tensor<2x1x4xf32>
  %f4 = linalg.fill ins(%zero : f32) outs(%e4 : tensor<2x1x4xf32>) -> tensor<2x1x4xf32>
  %o3 = linalg.batch_matmul ins(%p3, %v3 : tensor<2x1x?xf32>, tensor<2x?x4xf32>) outs(%f4 : tensor<2x1x4xf32>) -> tensor<2x1x4xf32>
  %o = tensor.expand_shape %o3 [[0, 1], [2], [3]] output_shape [1, 2, 1, 4] : tensor<2x1x4xf32> into tensor<1x2x1x4xf32>
  return %o, %kc1, %vc1 : tensor<1x2x1x4xf32>, tensor<1x2x16x4xf32>, tensor<1x2x16x4xf32>
}


// -----

// Keys and values stacked in one tensor [2, seq, kv_heads, head_dim] (ONNX
// Runtime's per-layer `present`, vLLM's `kv_cache` for one layer): K written
// at entry 0 and V at entry 1, each read back by slicing its entry. The
// pass follows it as a K and a V cache; the stacked argument and result
// become the !kvq.cache.
// EQUIV: func=kv_pair caches=3 cache_results=1 pos=4 steps=4

// CHECK-LABEL: func.func @kv_pair(
// CHECK-SAME: %[[Q:arg[0-9]+]]: tensor<1x2x4xf32>, %[[K:arg[0-9]+]]: tensor<1x2x4xf32>, %[[V:arg[0-9]+]]: tensor<1x2x4xf32>, %[[C:arg[0-9]+]]: !cache, %{{.*}}: index) -> tensor<1x2x4xf32>
// CHECK: kvq.cache_update %[[C]][0], %[[K]], %[[V]]
// CHECK: kvq.cache_attend %[[C]][0], %[[Q]]
// SAME: @kv_pair: 32 values over 4 steps agree

#q3 = affine_map<(h, n, t, c) -> (n, h, c)>
#k3 = affine_map<(h, n, t, c) -> (t, h, c)>
#s3 = affine_map<(h, n, t, c) -> (h, n, t)>
#p3 = affine_map<(h, n, c, t) -> (h, n, t)>
#v3 = affine_map<(h, n, c, t) -> (t, h, c)>
#o3 = affine_map<(h, n, c, t) -> (n, h, c)>
func.func @kv_pair(%q: tensor<1x2x4xf32>, %k: tensor<1x2x4xf32>, %v: tensor<1x2x4xf32>, %kv: tensor<2x16x2x4xf32>, %pos: index)
    -> (tensor<1x2x4xf32>, tensor<2x16x2x4xf32>) {
  %kv1 = tensor.insert_slice %k into %kv[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<2x16x2x4xf32>
  %kv2 = tensor.insert_slice %v into %kv1[1, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<2x16x2x4xf32>
  %c1 = arith.constant 1 : index
  %len = arith.addi %pos, %c1 : index
  %kr = tensor.extract_slice %kv2[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<2x16x2x4xf32> to tensor<?x2x4xf32>
  %vr = tensor.extract_slice %kv2[1, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<2x16x2x4xf32> to tensor<?x2x4xf32>
  %zero = arith.constant 0.0 : f32
  %se = tensor.empty(%len) : tensor<2x1x?xf32>
  %sz = linalg.fill ins(%zero : f32) outs(%se : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %s = linalg.generic {indexing_maps = [#q3, #k3, #s3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %kr : tensor<1x2x4xf32>, tensor<?x2x4xf32>) outs(%sz : tensor<2x1x?xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %o, %m : f32
    linalg.yield %r : f32
  } -> tensor<2x1x?xf32>
  %half = arith.constant 0.5 : f32
  %xe = tensor.empty(%len) : tensor<2x1x?xf32>
  %sc = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s : tensor<2x1x?xf32>) outs(%xe : tensor<2x1x?xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.mulf %a, %half : f32
    linalg.yield %m : f32
  } -> tensor<2x1x?xf32>
  %pe = tensor.empty(%len) : tensor<2x1x?xf32>
  %p = linalg.softmax dimension(2) ins(%sc : tensor<2x1x?xf32>) outs(%pe : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %oe = tensor.empty() : tensor<1x2x4xf32>
  %oz = linalg.fill ins(%zero : f32) outs(%oe : tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  %o = linalg.generic {indexing_maps = [#p3, #v3, #o3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%p, %vr : tensor<2x1x?xf32>, tensor<?x2x4xf32>) outs(%oz : tensor<1x2x4xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<1x2x4xf32>
  return %o, %kv2 : tensor<1x2x4xf32>, tensor<2x16x2x4xf32>
}

// -----

// Keys and values stacked with the layers, [2, layers, seq, kv_heads,
// head_dim] (vLLM-style): this step writes and reads layer 1.
// EQUIV: func=kv_pair_layers caches=3 cache_results=1 pos=4 steps=3

// CHECK: !cache = !kvq.cache<layers = 3, kv_heads = 2, head_dim = 4,
// CHECK-LABEL: func.func @kv_pair_layers(
// CHECK: kvq.cache_update %{{.*}}[1],
// CHECK: kvq.cache_attend %{{.*}}[1],
// SAME: @kv_pair_layers: 24 values over 3 steps agree

#q3 = affine_map<(h, n, t, c) -> (n, h, c)>
#k3 = affine_map<(h, n, t, c) -> (t, h, c)>
#s3 = affine_map<(h, n, t, c) -> (h, n, t)>
#p3 = affine_map<(h, n, c, t) -> (h, n, t)>
#v3 = affine_map<(h, n, c, t) -> (t, h, c)>
#o3 = affine_map<(h, n, c, t) -> (n, h, c)>
func.func @kv_pair_layers(%q: tensor<1x2x4xf32>, %k: tensor<1x2x4xf32>, %v: tensor<1x2x4xf32>, %kv: tensor<2x3x16x2x4xf32>, %pos: index)
    -> (tensor<1x2x4xf32>, tensor<2x3x16x2x4xf32>) {
  %kv1 = tensor.insert_slice %k into %kv[0, 1, %pos, 0, 0] [1, 1, 1, 2, 4] [1, 1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<2x3x16x2x4xf32>
  %kv2 = tensor.insert_slice %v into %kv1[1, 1, %pos, 0, 0] [1, 1, 1, 2, 4] [1, 1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<2x3x16x2x4xf32>
  %c1 = arith.constant 1 : index
  %len = arith.addi %pos, %c1 : index
  %kr = tensor.extract_slice %kv2[0, 1, 0, 0, 0] [1, 1, %len, 2, 4] [1, 1, 1, 1, 1] : tensor<2x3x16x2x4xf32> to tensor<?x2x4xf32>
  %vr = tensor.extract_slice %kv2[1, 1, 0, 0, 0] [1, 1, %len, 2, 4] [1, 1, 1, 1, 1] : tensor<2x3x16x2x4xf32> to tensor<?x2x4xf32>
  %zero = arith.constant 0.0 : f32
  %se = tensor.empty(%len) : tensor<2x1x?xf32>
  %sz = linalg.fill ins(%zero : f32) outs(%se : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %s = linalg.generic {indexing_maps = [#q3, #k3, #s3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %kr : tensor<1x2x4xf32>, tensor<?x2x4xf32>) outs(%sz : tensor<2x1x?xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %o, %m : f32
    linalg.yield %r : f32
  } -> tensor<2x1x?xf32>
  %half = arith.constant 0.5 : f32
  %xe = tensor.empty(%len) : tensor<2x1x?xf32>
  %sc = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s : tensor<2x1x?xf32>) outs(%xe : tensor<2x1x?xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.mulf %a, %half : f32
    linalg.yield %m : f32
  } -> tensor<2x1x?xf32>
  %pe = tensor.empty(%len) : tensor<2x1x?xf32>
  %p = linalg.softmax dimension(2) ins(%sc : tensor<2x1x?xf32>) outs(%pe : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %oe = tensor.empty() : tensor<1x2x4xf32>
  %oz = linalg.fill ins(%zero : f32) outs(%oe : tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  %o = linalg.generic {indexing_maps = [#p3, #v3, #o3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%p, %vr : tensor<2x1x?xf32>, tensor<?x2x4xf32>) outs(%oz : tensor<1x2x4xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<1x2x4xf32>
  return %o, %kv2 : tensor<1x2x4xf32>, tensor<2x3x16x2x4xf32>
}

// -----

// Keys and values side by side in the channels, [seq, kv_heads,
// 2 * head_dim] (a fused K|V projection written as it comes): K at channels
// 0..3, V at 4..7. Read as a K and a V cache.
// EQUIV: func=kv_channels caches=3 cache_results=1 pos=4 steps=4

// CHECK-LABEL: func.func @kv_channels(
// CHECK-SAME: !cache
// CHECK: kvq.cache_update
// CHECK: kvq.cache_attend
// SAME: @kv_channels: 32 values over 4 steps agree

#q3 = affine_map<(h, n, t, c) -> (n, h, c)>
#k3 = affine_map<(h, n, t, c) -> (t, h, c)>
#s3 = affine_map<(h, n, t, c) -> (h, n, t)>
#p3 = affine_map<(h, n, c, t) -> (h, n, t)>
#v3 = affine_map<(h, n, c, t) -> (t, h, c)>
#o3 = affine_map<(h, n, c, t) -> (n, h, c)>
func.func @kv_channels(%q: tensor<1x2x4xf32>, %k: tensor<1x2x4xf32>, %v: tensor<1x2x4xf32>, %kv: tensor<16x2x8xf32>, %pos: index)
    -> (tensor<1x2x4xf32>, tensor<16x2x8xf32>) {
  %kv1 = tensor.insert_slice %k into %kv[%pos, 0, 0] [1, 2, 4] [1, 1, 1] : tensor<1x2x4xf32> into tensor<16x2x8xf32>
  %kv2 = tensor.insert_slice %v into %kv1[%pos, 0, 4] [1, 2, 4] [1, 1, 1] : tensor<1x2x4xf32> into tensor<16x2x8xf32>
  %c1 = arith.constant 1 : index
  %len = arith.addi %pos, %c1 : index
  %kr = tensor.extract_slice %kv2[0, 0, 0] [%len, 2, 4] [1, 1, 1] : tensor<16x2x8xf32> to tensor<?x2x4xf32>
  %vr = tensor.extract_slice %kv2[0, 0, 4] [%len, 2, 4] [1, 1, 1] : tensor<16x2x8xf32> to tensor<?x2x4xf32>
  %zero = arith.constant 0.0 : f32
  %se = tensor.empty(%len) : tensor<2x1x?xf32>
  %sz = linalg.fill ins(%zero : f32) outs(%se : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %s = linalg.generic {indexing_maps = [#q3, #k3, #s3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %kr : tensor<1x2x4xf32>, tensor<?x2x4xf32>) outs(%sz : tensor<2x1x?xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %o, %m : f32
    linalg.yield %r : f32
  } -> tensor<2x1x?xf32>
  %half = arith.constant 0.5 : f32
  %xe = tensor.empty(%len) : tensor<2x1x?xf32>
  %sc = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s : tensor<2x1x?xf32>) outs(%xe : tensor<2x1x?xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.mulf %a, %half : f32
    linalg.yield %m : f32
  } -> tensor<2x1x?xf32>
  %pe = tensor.empty(%len) : tensor<2x1x?xf32>
  %p = linalg.softmax dimension(2) ins(%sc : tensor<2x1x?xf32>) outs(%pe : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %oe = tensor.empty() : tensor<1x2x4xf32>
  %oz = linalg.fill ins(%zero : f32) outs(%oe : tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  %o = linalg.generic {indexing_maps = [#p3, #v3, #o3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%p, %vr : tensor<2x1x?xf32>, tensor<?x2x4xf32>) outs(%oz : tensor<1x2x4xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<1x2x4xf32>
  return %o, %kv2 : tensor<1x2x4xf32>, tensor<16x2x8xf32>
}

// -----

// The value cache stored transposed, [kv_heads, head_dim, seq] (llama.cpp's
// v_trans), beside a [seq, kv_heads, head_dim] key cache: the write is a
// linalg.transpose of the new value, the weighted sum reads it as (h, c, t).
// EQUIV: func=v_transposed caches=3,4 cache_results=1,2 pos=5 steps=4

// CHECK-LABEL: func.func @v_transposed(
// CHECK-SAME: !cache
// CHECK: kvq.cache_update
// CHECK: kvq.cache_attend
// SAME: @v_transposed: 32 values over 4 steps agree

#q3 = affine_map<(h, n, t, c) -> (n, h, c)>
#k3 = affine_map<(h, n, t, c) -> (t, h, c)>
#s3 = affine_map<(h, n, t, c) -> (h, n, t)>
#p3 = affine_map<(h, n, c, t) -> (h, n, t)>
#v3 = affine_map<(h, n, c, t) -> (h, c, t)>
#o3 = affine_map<(h, n, c, t) -> (n, h, c)>
func.func @v_transposed(%q: tensor<1x2x4xf32>, %k: tensor<1x2x4xf32>, %v: tensor<1x2x4xf32>, %kc: tensor<16x2x4xf32>, %vc: tensor<2x4x16xf32>, %pos: index)
    -> (tensor<1x2x4xf32>, tensor<16x2x4xf32>, tensor<2x4x16xf32>) {
  %kv1 = tensor.insert_slice %k into %kc[%pos, 0, 0] [1, 2, 4] [1, 1, 1] : tensor<1x2x4xf32> into tensor<16x2x4xf32>
  %vt0 = tensor.empty() : tensor<2x4x1xf32>
  %vt = linalg.transpose ins(%v : tensor<1x2x4xf32>) outs(%vt0 : tensor<2x4x1xf32>) permutation = [1, 2, 0]
  %kv2 = tensor.insert_slice %vt into %vc[0, 0, %pos] [2, 4, 1] [1, 1, 1] : tensor<2x4x1xf32> into tensor<2x4x16xf32>
  %c1 = arith.constant 1 : index
  %len = arith.addi %pos, %c1 : index
  %kr = tensor.extract_slice %kv1[0, 0, 0] [%len, 2, 4] [1, 1, 1] : tensor<16x2x4xf32> to tensor<?x2x4xf32>
  %vr = tensor.extract_slice %kv2[0, 0, 0] [2, 4, %len] [1, 1, 1] : tensor<2x4x16xf32> to tensor<2x4x?xf32>
  %zero = arith.constant 0.0 : f32
  %se = tensor.empty(%len) : tensor<2x1x?xf32>
  %sz = linalg.fill ins(%zero : f32) outs(%se : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %s = linalg.generic {indexing_maps = [#q3, #k3, #s3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %kr : tensor<1x2x4xf32>, tensor<?x2x4xf32>) outs(%sz : tensor<2x1x?xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %o, %m : f32
    linalg.yield %r : f32
  } -> tensor<2x1x?xf32>
  %half = arith.constant 0.5 : f32
  %xe = tensor.empty(%len) : tensor<2x1x?xf32>
  %sc = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s : tensor<2x1x?xf32>) outs(%xe : tensor<2x1x?xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.mulf %a, %half : f32
    linalg.yield %m : f32
  } -> tensor<2x1x?xf32>
  %pe = tensor.empty(%len) : tensor<2x1x?xf32>
  %p = linalg.softmax dimension(2) ins(%sc : tensor<2x1x?xf32>) outs(%pe : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %oe = tensor.empty() : tensor<1x2x4xf32>
  %oz = linalg.fill ins(%zero : f32) outs(%oe : tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  %o = linalg.generic {indexing_maps = [#p3, #v3, #o3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%p, %vr : tensor<2x1x?xf32>, tensor<2x4x?xf32>) outs(%oz : tensor<1x2x4xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<1x2x4xf32>
  return %o, %kv1, %kv2 : tensor<1x2x4xf32>, tensor<16x2x4xf32>, tensor<2x4x16xf32>
}

// -----

// Attention in a callee called once per layer (a hand-written model's
// layer function): the caller is matched with the callee's body in place
// of each call, and adopted; the callee keeps its tensors (it has callers).
// The second layer's queries and keys are the first layer's output.
// EQUIV: func=two_layer_calls caches=3,4,5,6 cache_results=1,2,3,4 pos=7 steps=3

// CHECK-LABEL: func.func @attention_layer(
// CHECK-SAME: tensor<1x16x2x4xf32>
// CHECK-LABEL: func.func @two_layer_calls(
// CHECK-SAME: !cache
// CHECK-NOT: call @attention_layer
// CHECK: kvq.cache_update %{{.*}}[0]
// CHECK: kvq.cache_attend %{{.*}}[0]
// CHECK: kvq.cache_update %{{.*}}[1]
// CHECK: kvq.cache_attend %{{.*}}[1]
// SAME: @two_layer_calls: 24 values over 3 steps agree

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#sq3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d3)>
#sk3 = affine_map<(d0, d1, d2, d3) -> (d2, d0, d3)>
#ss3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#wp3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
#wv3 = affine_map<(d0, d1, d2, d3) -> (d3, d0, d2)>
#wo3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d2)>

// expected-remark@below {{@attention_layer: not adopted: the function has callers in the module, whose cache arguments would change}}
func.func @attention_layer(%q: tensor<1x2x4xf32>, %k0: tensor<1x2x4xf32>, %v0: tensor<1x2x4xf32>, %kc: tensor<1x16x2x4xf32>, %vc: tensor<1x16x2x4xf32>, %pos: index)
    -> (tensor<1x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %c1 = arith.constant 1 : index
  %len = arith.addi %pos, %c1 : index
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
  return %o0, %kw0, %vw0 : tensor<1x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>
}

func.func @two_layer_calls(%q: tensor<1x2x4xf32>, %k: tensor<1x2x4xf32>, %v: tensor<1x2x4xf32>, %kc0: tensor<1x16x2x4xf32>, %vc0: tensor<1x16x2x4xf32>, %kc1: tensor<1x16x2x4xf32>, %vc1: tensor<1x16x2x4xf32>, %pos: index)
    -> (tensor<1x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>) {
  %o0, %kc0n, %vc0n = func.call @attention_layer(%q, %k, %v, %kc0, %vc0, %pos) : (tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>, index) -> (tensor<1x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>)
  %o1, %kc1n, %vc1n = func.call @attention_layer(%o0, %o0, %v, %kc1, %vc1, %pos) : (tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>, index) -> (tensor<1x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>)
  return %o1, %kc0n, %vc0n, %kc1n, %vc1n : tensor<1x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>
}

// -----

// One scf.for over the layers with the stacked caches as iter_args (a
// hand-written llama2.c-style model): the matcher's copy has the loop
// unrolled and the layer indices folded, and each layer is adopted.
// EQUIV: func=layer_loop caches=3,4 cache_results=1,2 pos=5 steps=3

// CHECK-LABEL: func.func @layer_loop(
// CHECK-SAME: !cache
// CHECK-NOT: scf.for
// CHECK: kvq.cache_update %{{.*}}[0]
// CHECK: kvq.cache_attend %{{.*}}[0]
// CHECK: kvq.cache_update %{{.*}}[1]
// CHECK: kvq.cache_attend %{{.*}}[1]
// SAME: @layer_loop: 24 values over 3 steps agree

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#sq3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d3)>
#sk3 = affine_map<(d0, d1, d2, d3) -> (d2, d0, d3)>
#ss3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#wp3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
#wv3 = affine_map<(d0, d1, d2, d3) -> (d3, d0, d2)>
#wo3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d2)>


func.func @layer_loop(%q: tensor<1x2x4xf32>, %k: tensor<1x2x4xf32>, %v: tensor<1x2x4xf32>, %kc: tensor<2x16x2x4xf32>, %vc: tensor<2x16x2x4xf32>, %pos: index)
    -> (tensor<1x2x4xf32>, tensor<2x16x2x4xf32>, tensor<2x16x2x4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %zero = arith.constant 0.000000e+00 : f32
  %len = arith.addi %pos, %c1 : index
  %r:3 = scf.for %l = %c0 to %c2 step %c1 iter_args(%x = %q, %kcl = %kc, %vcl = %vc) -> (tensor<1x2x4xf32>, tensor<2x16x2x4xf32>, tensor<2x16x2x4xf32>) {
    %kw = tensor.insert_slice %x into %kcl[%l, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<2x16x2x4xf32>
    %vw = tensor.insert_slice %v into %vcl[%l, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<2x16x2x4xf32>
    %kr = tensor.extract_slice %kw[%l, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<2x16x2x4xf32> to tensor<?x2x4xf32>
    %vr = tensor.extract_slice %vw[%l, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<2x16x2x4xf32> to tensor<?x2x4xf32>
    %se = tensor.empty(%len) : tensor<2x1x?xf32>
    %sz = linalg.fill ins(%zero : f32) outs(%se : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
    %s = linalg.generic {indexing_maps = [#sq3, #sk3, #ss3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%x, %kr : tensor<1x2x4xf32>, tensor<?x2x4xf32>) outs(%sz : tensor<2x1x?xf32>) {
      ^bb0(%in: f32, %in_1: f32, %out: f32):
        %m = arith.mulf %in, %in_1 : f32
        %a = arith.addf %out, %m : f32
        linalg.yield %a : f32
      } -> tensor<2x1x?xf32>
    %pe = tensor.empty(%len) : tensor<2x1x?xf32>
    %p = linalg.softmax dimension(2) ins(%s : tensor<2x1x?xf32>) outs(%pe : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
    %oe = tensor.empty() : tensor<1x2x4xf32>
    %oz = linalg.fill ins(%zero : f32) outs(%oe : tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
    %o = linalg.generic {indexing_maps = [#wp3, #wv3, #wo3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%p, %vr : tensor<2x1x?xf32>, tensor<?x2x4xf32>) outs(%oz : tensor<1x2x4xf32>) {
      ^bb0(%in: f32, %in_1: f32, %out: f32):
        %m = arith.mulf %in, %in_1 : f32
        %a = arith.addf %out, %m : f32
        linalg.yield %a : f32
      } -> tensor<1x2x4xf32>
    scf.yield %o, %kw, %vw : tensor<1x2x4xf32>, tensor<2x16x2x4xf32>, tensor<2x16x2x4xf32>
  }
  return %r#0, %r#1, %r#2 : tensor<1x2x4xf32>, tensor<2x16x2x4xf32>, tensor<2x16x2x4xf32>
}

// -----

// Heads flattened into the channels, caches [seq, kv_heads * head_dim]: the
// new K and V collapsed before the write, the read split back into heads by
// expand_shape (a graph that keeps hidden-size rows). The matcher's copy
// holds them as [seq, kv_heads, head_dim].
// EQUIV: func=heads_flat caches=3,4 cache_results=1,2 pos=5 steps=4

// CHECK-LABEL: func.func @heads_flat(
// CHECK-SAME: !cache
// CHECK: kvq.cache_update
// CHECK: kvq.cache_attend
// SAME: @heads_flat: 32 values over 4 steps agree

#q3 = affine_map<(h, n, t, c) -> (n, h, c)>
#k3 = affine_map<(h, n, t, c) -> (t, h, c)>
#s3 = affine_map<(h, n, t, c) -> (h, n, t)>
#p3 = affine_map<(h, n, c, t) -> (h, n, t)>
#v3 = affine_map<(h, n, c, t) -> (t, h, c)>
#o3 = affine_map<(h, n, c, t) -> (n, h, c)>
func.func @heads_flat(%q: tensor<1x2x4xf32>, %k: tensor<1x2x4xf32>, %v: tensor<1x2x4xf32>, %kc: tensor<16x8xf32>, %vc: tensor<16x8xf32>, %pos: index)
    -> (tensor<1x2x4xf32>, tensor<16x8xf32>, tensor<16x8xf32>) {
  %kf = tensor.collapse_shape %k [[0], [1, 2]] : tensor<1x2x4xf32> into tensor<1x8xf32>
  %vf = tensor.collapse_shape %v [[0], [1, 2]] : tensor<1x2x4xf32> into tensor<1x8xf32>
  %kv1 = tensor.insert_slice %kf into %kc[%pos, 0] [1, 8] [1, 1] : tensor<1x8xf32> into tensor<16x8xf32>
  %kv2 = tensor.insert_slice %vf into %vc[%pos, 0] [1, 8] [1, 1] : tensor<1x8xf32> into tensor<16x8xf32>
  %c1 = arith.constant 1 : index
  %len = arith.addi %pos, %c1 : index
  %krf = tensor.extract_slice %kv1[0, 0] [%len, 8] [1, 1] : tensor<16x8xf32> to tensor<?x8xf32>
  %vrf = tensor.extract_slice %kv2[0, 0] [%len, 8] [1, 1] : tensor<16x8xf32> to tensor<?x8xf32>
  %kr = tensor.expand_shape %krf [[0], [1, 2]] output_shape [%len, 2, 4] : tensor<?x8xf32> into tensor<?x2x4xf32>
  %vr = tensor.expand_shape %vrf [[0], [1, 2]] output_shape [%len, 2, 4] : tensor<?x8xf32> into tensor<?x2x4xf32>
  %zero = arith.constant 0.0 : f32
  %se = tensor.empty(%len) : tensor<2x1x?xf32>
  %sz = linalg.fill ins(%zero : f32) outs(%se : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %s = linalg.generic {indexing_maps = [#q3, #k3, #s3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %kr : tensor<1x2x4xf32>, tensor<?x2x4xf32>) outs(%sz : tensor<2x1x?xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %o, %m : f32
    linalg.yield %r : f32
  } -> tensor<2x1x?xf32>
  %half = arith.constant 0.5 : f32
  %xe = tensor.empty(%len) : tensor<2x1x?xf32>
  %sc = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s : tensor<2x1x?xf32>) outs(%xe : tensor<2x1x?xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.mulf %a, %half : f32
    linalg.yield %m : f32
  } -> tensor<2x1x?xf32>
  %pe = tensor.empty(%len) : tensor<2x1x?xf32>
  %p = linalg.softmax dimension(2) ins(%sc : tensor<2x1x?xf32>) outs(%pe : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %oe = tensor.empty() : tensor<1x2x4xf32>
  %oz = linalg.fill ins(%zero : f32) outs(%oe : tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  %o = linalg.generic {indexing_maps = [#p3, #v3, #o3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%p, %vr : tensor<2x1x?xf32>, tensor<?x2x4xf32>) outs(%oz : tensor<1x2x4xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<1x2x4xf32>
  return %o, %kv1, %kv2 : tensor<1x2x4xf32>, tensor<16x8xf32>, tensor<16x8xf32>
}

// -----

// Multi-query attention (one KV head) with 2-D named matmuls per step, as a
// hand-written model or StableHLO's dot_general legalization produces them
// (stablehlo/conversions/linalg/transforms/StablehloToLinalgDotProduct.cpp:
// linalg.matmul for a rank-2 dot, linalg.transpose for the keys): the cache
// is [seq, head_dim], the queries [heads, head_dim], the scale divides the
// scores by sqrt(head_dim).
// EQUIV: func=mqa_matmul_decode caches=3,4 cache_results=1,2 pos=5 steps=3

// CHECK-LABEL: func.func @mqa_matmul_decode(
// CHECK: kvq.cache_attend %{{.*}}[0], %{{.*}} : !cache, tensor<1x3x4xf32> -> tensor<1x3x4xf32>
// SAME: @mqa_matmul_decode: 36 values over 3 steps agree

func.func @mqa_matmul_decode(%q: tensor<3x4xf32>, %k: tensor<1x4xf32>, %v: tensor<1x4xf32>, %kc: tensor<8x4xf32>, %vc: tensor<8x4xf32>, %pos: index)
    -> (tensor<3x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>) {
  %kc1 = tensor.insert_slice %k into %kc[%pos, 0] [1, 4] [1, 1] : tensor<1x4xf32> into tensor<8x4xf32>
  %vc1 = tensor.insert_slice %v into %vc[%pos, 0] [1, 4] [1, 1] : tensor<1x4xf32> into tensor<8x4xf32>
  %c1 = arith.constant 1 : index
  %len = arith.addi %pos, %c1 : index
  %kr = tensor.extract_slice %kc1[0, 0] [%len, 4] [1, 1] : tensor<8x4xf32> to tensor<?x4xf32>
  %vr = tensor.extract_slice %vc1[0, 0] [%len, 4] [1, 1] : tensor<8x4xf32> to tensor<?x4xf32>
  %te = tensor.empty(%len) : tensor<4x?xf32>
  %kt = linalg.transpose ins(%kr : tensor<?x4xf32>) outs(%te : tensor<4x?xf32>) permutation = [1, 0]
  %zero = arith.constant 0.0 : f32
  %se = tensor.empty(%len) : tensor<3x?xf32>
  %sz = linalg.fill ins(%zero : f32) outs(%se : tensor<3x?xf32>) -> tensor<3x?xf32>
  %s = linalg.matmul ins(%q, %kt : tensor<3x4xf32>, tensor<4x?xf32>) outs(%sz : tensor<3x?xf32>) -> tensor<3x?xf32>
  %two = arith.constant 2.0 : f32
  %sce = tensor.empty(%len) : tensor<3x?xf32>
  %sc = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%s : tensor<3x?xf32>) outs(%sce : tensor<3x?xf32>) {
  ^bb0(%a: f32, %o: f32):
    %d = arith.divf %a, %two : f32
    linalg.yield %d : f32
  } -> tensor<3x?xf32>
  %pe = tensor.empty(%len) : tensor<3x?xf32>
  %p = linalg.softmax dimension(1) ins(%sc : tensor<3x?xf32>) outs(%pe : tensor<3x?xf32>) -> tensor<3x?xf32>
  %oe = tensor.empty() : tensor<3x4xf32>
  %oz = linalg.fill ins(%zero : f32) outs(%oe : tensor<3x4xf32>) -> tensor<3x4xf32>
  %o = linalg.matmul ins(%p, %vr : tensor<3x?xf32>, tensor<?x4xf32>) outs(%oz : tensor<3x4xf32>) -> tensor<3x4xf32>
  return %o, %kc1, %vc1 : tensor<3x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>
}

// -----

// Scores scaled by 1/4 instead of 1/sqrt(4): the factor 1/4 · sqrt(4) = 0.5
// is folded into the queries.
// EQUIV: func=wrong_scale caches=3,4 cache_results=1,2 pos=5 steps=3 tokens=2

// CHECK-LABEL: func.func @wrong_scale(
// CHECK: kvq.cache_update
// CHECK: arith.constant 5.000000e-01 : f32
// CHECK: arith.mulf
// CHECK: kvq.cache_attend
// SAME: @wrong_scale: {{[0-9]+}} values over 3 steps agree

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#sq3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d3)>
#sk3 = affine_map<(d0, d1, d2, d3) -> (d2, d0, d3)>
#ss3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#wp3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
#wv3 = affine_map<(d0, d1, d2, d3) -> (d3, d0, d2)>
#wo3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d2)>

func.func @wrong_scale(%q: tensor<2x2x4xf32>, %k0: tensor<2x2x4xf32>, %v0: tensor<2x2x4xf32>, %kc: tensor<1x16x2x4xf32>, %vc: tensor<1x16x2x4xf32>, %pos: index)
    -> (tensor<2x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %c2 = arith.constant 2 : index
  %len = arith.addi %pos, %c2 : index
  // Layer 0
  %kw0 = tensor.insert_slice %k0 into %kc[0, %pos, 0, 0] [1, 2, 2, 4] [1, 1, 1, 1] : tensor<2x2x4xf32> into tensor<1x16x2x4xf32>
  %kr0 = tensor.extract_slice %kw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %vw0 = tensor.insert_slice %v0 into %vc[0, %pos, 0, 0] [1, 2, 2, 4] [1, 1, 1, 1] : tensor<2x2x4xf32> into tensor<1x16x2x4xf32>
  %vr0 = tensor.extract_slice %vw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %se0 = tensor.empty(%len) : tensor<2x2x?xf32>
  %sz0 = linalg.fill ins(%zero : f32) outs(%se0 : tensor<2x2x?xf32>) -> tensor<2x2x?xf32>
  %s0 = linalg.generic {indexing_maps = [#sq3, #sk3, #ss3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %kr0 : tensor<2x2x4xf32>, tensor<?x2x4xf32>) outs(%sz0 : tensor<2x2x?xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<2x2x?xf32>
  %scale0 = arith.constant 0.25 : f32
  %sce0 = tensor.empty(%len) : tensor<2x2x?xf32>
  %sc0 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s0 : tensor<2x2x?xf32>) outs(%sce0 : tensor<2x2x?xf32>) {
    ^bb0(%in: f32, %out: f32):
      %m = arith.mulf %in, %scale0 : f32
      linalg.yield %m : f32
    } -> tensor<2x2x?xf32>
  %me0 = tensor.empty(%len) : tensor<2x2x?xf32>
  %mk0 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%sc0 : tensor<2x2x?xf32>) outs(%me0 : tensor<2x2x?xf32>) {
    ^bb0(%in: f32, %out: f32):
      %i = linalg.index 1 : index
      %j = linalg.index 2 : index
      %p = arith.addi %pos, %i : index
      %c = arith.cmpi ugt, %j, %p : index
      %s = arith.select %c, %ninf, %in : f32
      linalg.yield %s : f32
    } -> tensor<2x2x?xf32>
  %pe0 = tensor.empty(%len) : tensor<2x2x?xf32>
  %pr0 = linalg.softmax dimension(2) ins(%mk0 : tensor<2x2x?xf32>) outs(%pe0 : tensor<2x2x?xf32>) -> tensor<2x2x?xf32>
  %oe0 = tensor.empty() : tensor<2x2x4xf32>
  %oz0 = linalg.fill ins(%zero : f32) outs(%oe0 : tensor<2x2x4xf32>) -> tensor<2x2x4xf32>
  %o0 = linalg.generic {indexing_maps = [#wp3, #wv3, #wo3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%pr0, %vr0 : tensor<2x2x?xf32>, tensor<?x2x4xf32>) outs(%oz0 : tensor<2x2x4xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<2x2x4xf32>
  return %o0, %kw0, %vw0 : tensor<2x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>
}

// -----

// No scale at all (a model whose attention is unscaled): the queries are
// multiplied by sqrt(head_dim) = 2 so that kvq.cache_attend's 1/sqrt(head_dim)
// gives the unscaled scores.
// EQUIV: func=unscaled caches=3,4 cache_results=1,2 pos=5 steps=3 tokens=2

// CHECK-LABEL: func.func @unscaled(
// CHECK: kvq.cache_update
// CHECK: arith.constant 2.000000e+00 : f32
// CHECK: arith.mulf
// CHECK: kvq.cache_attend
// SAME: @unscaled: {{[0-9]+}} values over 3 steps agree

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#sq3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d3)>
#sk3 = affine_map<(d0, d1, d2, d3) -> (d2, d0, d3)>
#ss3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#wp3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
#wv3 = affine_map<(d0, d1, d2, d3) -> (d3, d0, d2)>
#wo3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d2)>

func.func @unscaled(%q: tensor<2x2x4xf32>, %k0: tensor<2x2x4xf32>, %v0: tensor<2x2x4xf32>, %kc: tensor<1x16x2x4xf32>, %vc: tensor<1x16x2x4xf32>, %pos: index)
    -> (tensor<2x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %c2 = arith.constant 2 : index
  %len = arith.addi %pos, %c2 : index
  // Layer 0
  %kw0 = tensor.insert_slice %k0 into %kc[0, %pos, 0, 0] [1, 2, 2, 4] [1, 1, 1, 1] : tensor<2x2x4xf32> into tensor<1x16x2x4xf32>
  %kr0 = tensor.extract_slice %kw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %vw0 = tensor.insert_slice %v0 into %vc[0, %pos, 0, 0] [1, 2, 2, 4] [1, 1, 1, 1] : tensor<2x2x4xf32> into tensor<1x16x2x4xf32>
  %vr0 = tensor.extract_slice %vw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %se0 = tensor.empty(%len) : tensor<2x2x?xf32>
  %sz0 = linalg.fill ins(%zero : f32) outs(%se0 : tensor<2x2x?xf32>) -> tensor<2x2x?xf32>
  %s0 = linalg.generic {indexing_maps = [#sq3, #sk3, #ss3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %kr0 : tensor<2x2x4xf32>, tensor<?x2x4xf32>) outs(%sz0 : tensor<2x2x?xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<2x2x?xf32>
  %me0 = tensor.empty(%len) : tensor<2x2x?xf32>
  %mk0 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s0 : tensor<2x2x?xf32>) outs(%me0 : tensor<2x2x?xf32>) {
    ^bb0(%in: f32, %out: f32):
      %i = linalg.index 1 : index
      %j = linalg.index 2 : index
      %p = arith.addi %pos, %i : index
      %c = arith.cmpi ugt, %j, %p : index
      %s = arith.select %c, %ninf, %in : f32
      linalg.yield %s : f32
    } -> tensor<2x2x?xf32>
  %pe0 = tensor.empty(%len) : tensor<2x2x?xf32>
  %pr0 = linalg.softmax dimension(2) ins(%mk0 : tensor<2x2x?xf32>) outs(%pe0 : tensor<2x2x?xf32>) -> tensor<2x2x?xf32>
  %oe0 = tensor.empty() : tensor<2x2x4xf32>
  %oz0 = linalg.fill ins(%zero : f32) outs(%oe0 : tensor<2x2x4xf32>) -> tensor<2x2x4xf32>
  %o0 = linalg.generic {indexing_maps = [#wp3, #wv3, #wo3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%pr0, %vr0 : tensor<2x2x?xf32>, tensor<?x2x4xf32>) outs(%oz0 : tensor<2x2x4xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<2x2x4xf32>
  return %o0, %kw0, %vw0 : tensor<2x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>
}

// -----

// f16 queries against an f16 cache read without extf (the scores are f16):
// the queries are extended to f32 for kvq.cache_attend, which accumulates in
// f32.
// EQUIV: func=queries_f16 caches=3,4 cache_results=1,2 pos=5 steps=3 tokens=1

// CHECK-LABEL: func.func @queries_f16(
// CHECK: kvq.cache_update
// CHECK: arith.extf %{{.*}} : f16 to f32
// CHECK: kvq.cache_attend
// SAME: @queries_f16: {{[0-9]+}} values over 3 steps agree

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#sq3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d3)>
#sk3 = affine_map<(d0, d1, d2, d3) -> (d2, d0, d3)>
#ss3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#wp3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
#wv3 = affine_map<(d0, d1, d2, d3) -> (d3, d0, d2)>
#wo3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d2)>

func.func @queries_f16(%q: tensor<1x2x4xf16>, %k0: tensor<1x2x4xf32>, %v0: tensor<1x2x4xf32>, %kc: tensor<1x16x2x4xf16>, %vc: tensor<1x16x2x4xf16>, %pos: index)
    -> (tensor<1x2x4xf32>, tensor<1x16x2x4xf16>, tensor<1x16x2x4xf16>) {
  %zero_h = arith.constant 0.000000e+00 : f16
  %zero = arith.constant 0.000000e+00 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %c1 = arith.constant 1 : index
  %len = arith.addi %pos, %c1 : index
  // Layer 0
  %kh0 = tensor.empty() : tensor<1x2x4xf16>
  %kt0 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%k0 : tensor<1x2x4xf32>) outs(%kh0 : tensor<1x2x4xf16>) {
    ^bb0(%in: f32, %out: f16):
      %t = arith.truncf %in : f32 to f16
      linalg.yield %t : f16
    } -> tensor<1x2x4xf16>
  %vh0 = tensor.empty() : tensor<1x2x4xf16>
  %vt0 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%v0 : tensor<1x2x4xf32>) outs(%vh0 : tensor<1x2x4xf16>) {
    ^bb0(%in: f32, %out: f16):
      %t = arith.truncf %in : f32 to f16
      linalg.yield %t : f16
    } -> tensor<1x2x4xf16>
  %kw0 = tensor.insert_slice %kt0 into %kc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf16> into tensor<1x16x2x4xf16>
  %kr0 = tensor.extract_slice %kw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf16> to tensor<?x2x4xf16>
  %vw0 = tensor.insert_slice %vt0 into %vc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf16> into tensor<1x16x2x4xf16>
  %vr0 = tensor.extract_slice %vw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf16> to tensor<?x2x4xf16>
  %ve0 = tensor.empty(%len) : tensor<?x2x4xf32>
  %vf0 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%vr0 : tensor<?x2x4xf16>) outs(%ve0 : tensor<?x2x4xf32>) {
    ^bb0(%in: f16, %out: f32):
      %e = arith.extf %in : f16 to f32
      linalg.yield %e : f32
    } -> tensor<?x2x4xf32>
  %se0 = tensor.empty(%len) : tensor<2x1x?xf16>
  %sz0 = linalg.fill ins(%zero_h : f16) outs(%se0 : tensor<2x1x?xf16>) -> tensor<2x1x?xf16>
  %s0 = linalg.generic {indexing_maps = [#sq3, #sk3, #ss3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %kr0 : tensor<1x2x4xf16>, tensor<?x2x4xf16>) outs(%sz0 : tensor<2x1x?xf16>) {
    ^bb0(%in: f16, %in_1: f16, %out: f16):
      %m = arith.mulf %in, %in_1 : f16
      %a = arith.addf %out, %m : f16
      linalg.yield %a : f16
    } -> tensor<2x1x?xf16>
  %scale0 = arith.constant 0.5 : f16
  %sce0 = tensor.empty(%len) : tensor<2x1x?xf16>
  %sc0 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s0 : tensor<2x1x?xf16>) outs(%sce0 : tensor<2x1x?xf16>) {
    ^bb0(%in: f16, %out: f16):
      %m = arith.mulf %in, %scale0 : f16
      linalg.yield %m : f16
    } -> tensor<2x1x?xf16>
  %pe0 = tensor.empty(%len) : tensor<2x1x?xf16>
  %pr0 = linalg.softmax dimension(2) ins(%sc0 : tensor<2x1x?xf16>) outs(%pe0 : tensor<2x1x?xf16>) -> tensor<2x1x?xf16>
  %pfe0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %pf0 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%pr0 : tensor<2x1x?xf16>) outs(%pfe0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f16, %out: f32):
      %e = arith.extf %in : f16 to f32
      linalg.yield %e : f32
    } -> tensor<2x1x?xf32>
  %oe0 = tensor.empty() : tensor<1x2x4xf32>
  %oz0 = linalg.fill ins(%zero : f32) outs(%oe0 : tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  %o0 = linalg.generic {indexing_maps = [#wp3, #wv3, #wo3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%pf0, %vf0 : tensor<2x1x?xf32>, tensor<?x2x4xf32>) outs(%oz0 : tensor<1x2x4xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<1x2x4xf32>
  return %o0, %kw0, %vw0 : tensor<1x2x4xf32>, tensor<1x16x2x4xf16>, tensor<1x16x2x4xf16>
}

// -----

// A bf16 model exported as it is: bf16 caches, queries and values, the
// contractions accumulating in f32 (extf in the body, as torch-mlir and
// StableHLO lower a bf16 matmul with an f32 accumulator). The !kvq.cache
// takes the K/V widened to f32 (exact).
// EQUIV: func=bf16_decode caches=3,4 cache_results=1,2 pos=5 steps=4

// CHECK: !cache = !kvq.cache<layers = 1, kv_heads = 2, head_dim = 4, element_type = f32,
// CHECK-LABEL: func.func @bf16_decode(
// CHECK: arith.extf {{.*}} : bf16 to f32
// CHECK: kvq.cache_update
// CHECK: kvq.cache_attend
// SAME: @bf16_decode: 32 values over 4 steps agree

#bq = affine_map<(h, t, d) -> (h, d)>
#bk = affine_map<(h, t, d) -> (t, h, d)>
#bs = affine_map<(h, t, d) -> (h, t)>
#bp = affine_map<(h, d, t) -> (h, t)>
#bv = affine_map<(h, d, t) -> (t, h, d)>
#bo = affine_map<(h, d, t) -> (h, d)>
#bid = affine_map<(h, t) -> (h, t)>

func.func @bf16_decode(%q: tensor<2x4xbf16>, %k: tensor<1x2x4xbf16>, %v: tensor<1x2x4xbf16>, %kc: tensor<16x2x4xbf16>, %vc: tensor<16x2x4xbf16>, %pos: index)
    -> (tensor<2x4xf32>, tensor<16x2x4xbf16>, tensor<16x2x4xbf16>) {
  %c1 = arith.constant 1 : index
  %len = arith.addi %pos, %c1 : index
  %kw = tensor.insert_slice %k into %kc[%pos, 0, 0] [1, 2, 4] [1, 1, 1] : tensor<1x2x4xbf16> into tensor<16x2x4xbf16>
  %vw = tensor.insert_slice %v into %vc[%pos, 0, 0] [1, 2, 4] [1, 1, 1] : tensor<1x2x4xbf16> into tensor<16x2x4xbf16>
  %kr = tensor.extract_slice %kw[0, 0, 0] [%len, 2, 4] [1, 1, 1] : tensor<16x2x4xbf16> to tensor<?x2x4xbf16>
  %vr = tensor.extract_slice %vw[0, 0, 0] [%len, 2, 4] [1, 1, 1] : tensor<16x2x4xbf16> to tensor<?x2x4xbf16>
  %zero = arith.constant 0.000000e+00 : f32
  %half = arith.constant 5.000000e-01 : f32
  %se = tensor.empty(%len) : tensor<2x?xf32>
  %sz = linalg.fill ins(%zero : f32) outs(%se : tensor<2x?xf32>) -> tensor<2x?xf32>
  %s = linalg.generic {indexing_maps = [#bq, #bk, #bs], iterator_types = ["parallel", "parallel", "reduction"]} ins(%q, %kr : tensor<2x4xbf16>, tensor<?x2x4xbf16>) outs(%sz : tensor<2x?xf32>) {
    ^bb0(%a: bf16, %b: bf16, %acc: f32):
      %a32 = arith.extf %a : bf16 to f32
      %b32 = arith.extf %b : bf16 to f32
      %m = arith.mulf %a32, %b32 : f32
      %r = arith.addf %acc, %m : f32
      linalg.yield %r : f32
    } -> tensor<2x?xf32>
  %xe = tensor.empty(%len) : tensor<2x?xf32>
  %x = linalg.generic {indexing_maps = [#bid, #bid], iterator_types = ["parallel", "parallel"]} ins(%s : tensor<2x?xf32>) outs(%xe : tensor<2x?xf32>) {
    ^bb0(%a: f32, %o: f32):
      %r = arith.mulf %a, %half : f32
      linalg.yield %r : f32
    } -> tensor<2x?xf32>
  %pe = tensor.empty(%len) : tensor<2x?xf32>
  %pr = linalg.softmax dimension(1) ins(%x : tensor<2x?xf32>) outs(%pe : tensor<2x?xf32>) -> tensor<2x?xf32>
  %oe = tensor.empty() : tensor<2x4xf32>
  %oz = linalg.fill ins(%zero : f32) outs(%oe : tensor<2x4xf32>) -> tensor<2x4xf32>
  %out = linalg.generic {indexing_maps = [#bp, #bv, #bo], iterator_types = ["parallel", "parallel", "reduction"]} ins(%pr, %vr : tensor<2x?xf32>, tensor<?x2x4xbf16>) outs(%oz : tensor<2x4xf32>) {
    ^bb0(%a: f32, %b: bf16, %acc: f32):
      %b32 = arith.extf %b : bf16 to f32
      %m = arith.mulf %a, %b32 : f32
      %r = arith.addf %acc, %m : f32
      linalg.yield %r : f32
    } -> tensor<2x4xf32>
  return %out, %kw, %vw : tensor<2x4xf32>, tensor<16x2x4xbf16>, tensor<16x2x4xbf16>
}
