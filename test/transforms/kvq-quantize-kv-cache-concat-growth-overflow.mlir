// REQUIRES: mlir-runner
// RUN: not %python %S/Inputs/equivalence.py %s --run "%kvq_run" 2>&1 | FileCheck %s

// A cache grown by tensor.concat, adopted with max-context=2 and run for
// three steps: the third step stops (the rewritten step's capacity
// assertion aborts the process) instead of writing past the cache the
// option promised. The same graph runs four steps under max-context=16 in
// kvq-quantize-kv-cache-concat-growth.mlir.
// EQUIV: func=dynamic_cache_decode caches=3,4 cache_results=1,2 steps=3 options=max-context=2

// CHECK: equivalence: running the rewritten graph failed (-6)

#hq = affine_map<(b, h, n, t, d) -> (b, h, n, d)>
#hk = affine_map<(b, h, n, t, d) -> (b, h, t, d)>
#hs = affine_map<(b, h, n, t, d) -> (b, h, n, t)>
#hp = affine_map<(b, h, n, d, t) -> (b, h, n, t)>
#hv = affine_map<(b, h, n, d, t) -> (b, h, t, d)>
#ho = affine_map<(b, h, n, d, t) -> (b, h, n, d)>
#id4 = affine_map<(b, h, n, t) -> (b, h, n, t)>

func.func @dynamic_cache_decode(%q: tensor<1x2x1x4xf32>, %k: tensor<1x2x1x4xf32>, %v: tensor<1x2x1x4xf32>, %kc: tensor<1x2x?x4xf32>, %vc: tensor<1x2x?x4xf32>)
    -> (tensor<1x2x1x4xf32>, tensor<1x2x?x4xf32>, tensor<1x2x?x4xf32>) {
  %kn = tensor.concat dim(2) %kc, %k : (tensor<1x2x?x4xf32>, tensor<1x2x1x4xf32>) -> tensor<1x2x?x4xf32>
  %vn = tensor.concat dim(2) %vc, %v : (tensor<1x2x?x4xf32>, tensor<1x2x1x4xf32>) -> tensor<1x2x?x4xf32>
  %c2 = arith.constant 2 : index
  %len = tensor.dim %kn, %c2 : tensor<1x2x?x4xf32>
  %zero = arith.constant 0.000000e+00 : f32
  %se = tensor.empty(%len) : tensor<1x2x1x?xf32>
  %sz = linalg.fill ins(%zero : f32) outs(%se : tensor<1x2x1x?xf32>) -> tensor<1x2x1x?xf32>
  %s = linalg.generic {indexing_maps = [#hq, #hk, #hs], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%q, %kn : tensor<1x2x1x4xf32>, tensor<1x2x?x4xf32>) outs(%sz : tensor<1x2x1x?xf32>) {
    ^bb0(%a: f32, %b: f32, %acc: f32):
      %m = arith.mulf %a, %b : f32
      %r = arith.addf %acc, %m : f32
      linalg.yield %r : f32
    } -> tensor<1x2x1x?xf32>
  %sqrt = arith.constant 2.000000e+00 : f32
  %xe = tensor.empty(%len) : tensor<1x2x1x?xf32>
  %x = linalg.generic {indexing_maps = [#id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s : tensor<1x2x1x?xf32>) outs(%xe : tensor<1x2x1x?xf32>) {
    ^bb0(%a: f32, %o: f32):
      %r = arith.divf %a, %sqrt : f32
      linalg.yield %r : f32
    } -> tensor<1x2x1x?xf32>
  %pe = tensor.empty(%len) : tensor<1x2x1x?xf32>
  %pr = linalg.softmax dimension(3) ins(%x : tensor<1x2x1x?xf32>) outs(%pe : tensor<1x2x1x?xf32>) -> tensor<1x2x1x?xf32>
  %oe = tensor.empty() : tensor<1x2x1x4xf32>
  %oz = linalg.fill ins(%zero : f32) outs(%oe : tensor<1x2x1x4xf32>) -> tensor<1x2x1x4xf32>
  %out = linalg.generic {indexing_maps = [#hp, #hv, #ho], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%pr, %vn : tensor<1x2x1x?xf32>, tensor<1x2x?x4xf32>) outs(%oz : tensor<1x2x1x4xf32>) {
    ^bb0(%a: f32, %b: f32, %acc: f32):
      %m = arith.mulf %a, %b : f32
      %r = arith.addf %acc, %m : f32
      linalg.yield %r : f32
    } -> tensor<1x2x1x4xf32>
  return %out, %kn, %vn : tensor<1x2x1x4xf32>, tensor<1x2x?x4xf32>, tensor<1x2x?x4xf32>
}
