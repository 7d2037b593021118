// RUN: kvq-opt %s --split-input-file --verify-diagnostics --kvq-quantize-kv-cache=method=fp16 | FileCheck %s
// REQUIRES: mlir-runner
// RUN: %python %S/Inputs/equivalence.py %s --run "%kvq_run" | FileCheck %s --check-prefix=SAME

// Softmax spellings: the expansion is checked by evaluating its elementwise
// steps (exp(x - max), e / sum), so one fused generic or several do. The
// second RUN line runs each graph before and after the rewrite and
// compares (Inputs/equivalence.py).

// torch's softmax decomposition (lib/Dialect/Torch/Transforms/
// DecomposeComplexOps.cpp, getSoftmaxResult: max.dim with keepdim, sub,
// exp, sum.dim_IntList with keepdim, div) as TorchToLinalg lowers it
// (Reduction.cpp: max.dim as one generic with the value and its index,
// unsqueezed by expand_shape; sum with keepdim as a constant-0 output
// map), on Hugging Face's [batch, kv_heads, max_len, head_dim] static cache
// with the additive attention mask.
// EQUIV: func=torch_softmax_decode caches=3,4 cache_results=1,2 pos=5 steps=4 mask=6

// CHECK-LABEL: func.func @torch_softmax_decode(
// CHECK-SAME: !cache
// CHECK: kvq.cache_update
// CHECK: kvq.cache_attend
// CHECK-NOT: math.exp
// SAME: @torch_softmax_decode: 32 values over 4 steps agree

#hq = affine_map<(b, h, n, t, d) -> (b, h, n, d)>
#hk = affine_map<(b, h, n, t, d) -> (b, h, t, d)>
#hs = affine_map<(b, h, n, t, d) -> (b, h, n, t)>
#hp = affine_map<(b, h, n, d, t) -> (b, h, n, t)>
#hv = affine_map<(b, h, n, d, t) -> (b, h, t, d)>
#ho = affine_map<(b, h, n, d, t) -> (b, h, n, d)>
#id4 = affine_map<(b, h, n, t) -> (b, h, n, t)>
#bmask = affine_map<(b, h, n, t) -> (0, 0, n, t)>
#red = affine_map<(b, h, n, t) -> (b, h, n)>
#keep = affine_map<(b, h, n, t) -> (b, h, n, 0)>

// expected-remark@below {{adopted on the assumption that argument #6 is the causal attention mask}}
func.func @torch_softmax_decode(%q: tensor<1x2x1x4xf32>, %k: tensor<1x2x1x4xf32>, %v: tensor<1x2x1x4xf32>, %kc: tensor<1x2x16x4xf32>, %vc: tensor<1x2x16x4xf32>, %pos: index, %mask: tensor<1x1x1x16xf32>)
    -> (tensor<1x2x1x4xf32>, tensor<1x2x16x4xf32>, tensor<1x2x16x4xf32>) {
  %kw = tensor.insert_slice %k into %kc[0, 0, %pos, 0] [1, 2, 1, 4] [1, 1, 1, 1] : tensor<1x2x1x4xf32> into tensor<1x2x16x4xf32>
  %vw = tensor.insert_slice %v into %vc[0, 0, %pos, 0] [1, 2, 1, 4] [1, 1, 1, 1] : tensor<1x2x1x4xf32> into tensor<1x2x16x4xf32>
  %zero = arith.constant 0.000000e+00 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %se = tensor.empty() : tensor<1x2x1x16xf32>
  %sz = linalg.fill ins(%zero : f32) outs(%se : tensor<1x2x1x16xf32>) -> tensor<1x2x1x16xf32>
  %s = linalg.generic {indexing_maps = [#hq, #hk, #hs], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%q, %kw : tensor<1x2x1x4xf32>, tensor<1x2x16x4xf32>) outs(%sz : tensor<1x2x1x16xf32>) {
    ^bb0(%a: f32, %b: f32, %acc: f32):
      %m = arith.mulf %a, %b : f32
      %r = arith.addf %acc, %m : f32
      linalg.yield %r : f32
    } -> tensor<1x2x1x16xf32>
  %sqrt = arith.constant 2.000000e+00 : f32
  %xe = tensor.empty() : tensor<1x2x1x16xf32>
  %sc = linalg.generic {indexing_maps = [#id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s : tensor<1x2x1x16xf32>) outs(%xe : tensor<1x2x1x16xf32>) {
    ^bb0(%a: f32, %o: f32):
      %r = arith.divf %a, %sqrt : f32
      linalg.yield %r : f32
    } -> tensor<1x2x1x16xf32>
  %x = linalg.generic {indexing_maps = [#id4, #bmask, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%sc, %mask : tensor<1x2x1x16xf32>, tensor<1x1x1x16xf32>) outs(%xe : tensor<1x2x1x16xf32>) {
    ^bb0(%a: f32, %m: f32, %o: f32):
      %r = arith.addf %a, %m : f32
      linalg.yield %r : f32
    } -> tensor<1x2x1x16xf32>
  // max.dim(x, -1, keepdim) -> (values, indices)
  %mve = tensor.empty() : tensor<1x2x1xf32>
  %mvi = linalg.fill ins(%ninf : f32) outs(%mve : tensor<1x2x1xf32>) -> tensor<1x2x1xf32>
  %c0i = arith.constant 0 : i64
  %mie = tensor.empty() : tensor<1x2x1xi64>
  %mii = linalg.fill ins(%c0i : i64) outs(%mie : tensor<1x2x1xi64>) -> tensor<1x2x1xi64>
  %mx:2 = linalg.generic {indexing_maps = [#id4, #red, #red], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%x : tensor<1x2x1x16xf32>) outs(%mvi, %mii : tensor<1x2x1xf32>, tensor<1x2x1xi64>) {
    ^bb0(%in: f32, %old: f32, %oldi: i64):
      %t = linalg.index 3 : index
      %ti = arith.index_cast %t : index to i64
      %gt = arith.cmpf ogt, %in, %old : f32
      %nv = arith.maximumf %in, %old : f32
      %ni = arith.select %gt, %ti, %oldi : i64
      linalg.yield %nv, %ni : f32, i64
    } -> (tensor<1x2x1xf32>, tensor<1x2x1xi64>)
  %mxk = tensor.expand_shape %mx#0 [[0], [1], [2, 3]] output_shape [1, 2, 1, 1] : tensor<1x2x1xf32> into tensor<1x2x1x1xf32>
  // sub, then exp
  %de = tensor.empty() : tensor<1x2x1x16xf32>
  %d = linalg.generic {indexing_maps = [#id4, #keep, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%x, %mxk : tensor<1x2x1x16xf32>, tensor<1x2x1x1xf32>) outs(%de : tensor<1x2x1x16xf32>) {
    ^bb0(%a: f32, %b: f32, %o: f32):
      %r = arith.subf %a, %b : f32
      linalg.yield %r : f32
    } -> tensor<1x2x1x16xf32>
  %ee = tensor.empty() : tensor<1x2x1x16xf32>
  %e = linalg.generic {indexing_maps = [#id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%d : tensor<1x2x1x16xf32>) outs(%ee : tensor<1x2x1x16xf32>) {
    ^bb0(%a: f32, %o: f32):
      %r = math.exp %a : f32
      linalg.yield %r : f32
    } -> tensor<1x2x1x16xf32>
  // sum.dim_IntList(e, -1, keepdim)
  %ze = tensor.empty() : tensor<1x2x1x1xf32>
  %zi = linalg.fill ins(%zero : f32) outs(%ze : tensor<1x2x1x1xf32>) -> tensor<1x2x1x1xf32>
  %z = linalg.generic {indexing_maps = [#id4, #keep], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%e : tensor<1x2x1x16xf32>) outs(%zi : tensor<1x2x1x1xf32>) {
    ^bb0(%a: f32, %acc: f32):
      %r = arith.addf %a, %acc : f32
      linalg.yield %r : f32
    } -> tensor<1x2x1x1xf32>
  %pe = tensor.empty() : tensor<1x2x1x16xf32>
  %pr = linalg.generic {indexing_maps = [#id4, #keep, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%e, %z : tensor<1x2x1x16xf32>, tensor<1x2x1x1xf32>) outs(%pe : tensor<1x2x1x16xf32>) {
    ^bb0(%a: f32, %b: f32, %o: f32):
      %r = arith.divf %a, %b : f32
      linalg.yield %r : f32
    } -> tensor<1x2x1x16xf32>
  %oe = tensor.empty() : tensor<1x2x1x4xf32>
  %oz = linalg.fill ins(%zero : f32) outs(%oe : tensor<1x2x1x4xf32>) -> tensor<1x2x1x4xf32>
  %out = linalg.generic {indexing_maps = [#hp, #hv, #ho], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%pr, %vw : tensor<1x2x1x16xf32>, tensor<1x2x16x4xf32>) outs(%oz : tensor<1x2x1x4xf32>) {
    ^bb0(%a: f32, %b: f32, %acc: f32):
      %m = arith.mulf %a, %b : f32
      %r = arith.addf %acc, %m : f32
      linalg.yield %r : f32
    } -> tensor<1x2x1x4xf32>
  return %out, %kw, %vw : tensor<1x2x1x4xf32>, tensor<1x2x16x4xf32>, tensor<1x2x16x4xf32>
}

// -----

// exp / sum / divide without the max (mathematically the same softmax), on
// the written prefix of a [seq, kv_heads, head_dim] cache, the division as
// a multiplication by the reciprocal.
// EQUIV: func=softmax_without_max caches=3,4 cache_results=1,2 pos=5 steps=4

// CHECK-LABEL: func.func @softmax_without_max(
// CHECK-SAME: !cache
// CHECK: kvq.cache_attend
// CHECK-NOT: math.exp
// SAME: @softmax_without_max: 32 values over 4 steps agree

#q3 = affine_map<(h, t, d) -> (h, d)>
#k3 = affine_map<(h, t, d) -> (t, h, d)>
#s3 = affine_map<(h, t, d) -> (h, t)>
#p3 = affine_map<(h, d, t) -> (h, t)>
#v3 = affine_map<(h, d, t) -> (t, h, d)>
#o3 = affine_map<(h, d, t) -> (h, d)>
#id2 = affine_map<(h, t) -> (h, t)>
#row = affine_map<(h, t) -> (h)>

func.func @softmax_without_max(%q: tensor<2x4xf32>, %k: tensor<1x2x4xf32>, %v: tensor<1x2x4xf32>, %kc: tensor<16x2x4xf32>, %vc: tensor<16x2x4xf32>, %pos: index)
    -> (tensor<2x4xf32>, tensor<16x2x4xf32>, tensor<16x2x4xf32>) {
  %c1 = arith.constant 1 : index
  %len = arith.addi %pos, %c1 : index
  %kw = tensor.insert_slice %k into %kc[%pos, 0, 0] [1, 2, 4] [1, 1, 1] : tensor<1x2x4xf32> into tensor<16x2x4xf32>
  %vw = tensor.insert_slice %v into %vc[%pos, 0, 0] [1, 2, 4] [1, 1, 1] : tensor<1x2x4xf32> into tensor<16x2x4xf32>
  %kr = tensor.extract_slice %kw[0, 0, 0] [%len, 2, 4] [1, 1, 1] : tensor<16x2x4xf32> to tensor<?x2x4xf32>
  %vr = tensor.extract_slice %vw[0, 0, 0] [%len, 2, 4] [1, 1, 1] : tensor<16x2x4xf32> to tensor<?x2x4xf32>
  %zero = arith.constant 0.000000e+00 : f32
  %one = arith.constant 1.000000e+00 : f32
  %half = arith.constant 5.000000e-01 : f32
  %se = tensor.empty(%len) : tensor<2x?xf32>
  %sz = linalg.fill ins(%zero : f32) outs(%se : tensor<2x?xf32>) -> tensor<2x?xf32>
  %s = linalg.generic {indexing_maps = [#q3, #k3, #s3], iterator_types = ["parallel", "parallel", "reduction"]} ins(%q, %kr : tensor<2x4xf32>, tensor<?x2x4xf32>) outs(%sz : tensor<2x?xf32>) {
    ^bb0(%a: f32, %b: f32, %acc: f32):
      %m = arith.mulf %a, %b : f32
      %r = arith.addf %acc, %m : f32
      linalg.yield %r : f32
    } -> tensor<2x?xf32>
  %xe = tensor.empty(%len) : tensor<2x?xf32>
  %x = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]} ins(%s : tensor<2x?xf32>) outs(%xe : tensor<2x?xf32>) {
    ^bb0(%a: f32, %o: f32):
      %r = arith.mulf %a, %half : f32
      linalg.yield %r : f32
    } -> tensor<2x?xf32>
  %ee = tensor.empty(%len) : tensor<2x?xf32>
  %e = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<2x?xf32>) outs(%ee : tensor<2x?xf32>) {
    ^bb0(%a: f32, %o: f32):
      %r = math.exp %a : f32
      linalg.yield %r : f32
    } -> tensor<2x?xf32>
  %ze = tensor.empty() : tensor<2xf32>
  %zi = linalg.fill ins(%zero : f32) outs(%ze : tensor<2xf32>) -> tensor<2xf32>
  %z = linalg.generic {indexing_maps = [#id2, #row], iterator_types = ["parallel", "reduction"]} ins(%e : tensor<2x?xf32>) outs(%zi : tensor<2xf32>) {
    ^bb0(%a: f32, %acc: f32):
      %r = arith.addf %a, %acc : f32
      linalg.yield %r : f32
    } -> tensor<2xf32>
  %pe = tensor.empty(%len) : tensor<2x?xf32>
  %pr = linalg.generic {indexing_maps = [#id2, #row, #id2], iterator_types = ["parallel", "parallel"]} ins(%e, %z : tensor<2x?xf32>, tensor<2xf32>) outs(%pe : tensor<2x?xf32>) {
    ^bb0(%a: f32, %b: f32, %o: f32):
      %rc = arith.divf %one, %b : f32
      %r = arith.mulf %a, %rc : f32
      linalg.yield %r : f32
    } -> tensor<2x?xf32>
  %oe = tensor.empty() : tensor<2x4xf32>
  %oz = linalg.fill ins(%zero : f32) outs(%oe : tensor<2x4xf32>) -> tensor<2x4xf32>
  %out = linalg.generic {indexing_maps = [#p3, #v3, #o3], iterator_types = ["parallel", "parallel", "reduction"]} ins(%pr, %vr : tensor<2x?xf32>, tensor<?x2x4xf32>) outs(%oz : tensor<2x4xf32>) {
    ^bb0(%a: f32, %b: f32, %acc: f32):
      %m = arith.mulf %a, %b : f32
      %r = arith.addf %acc, %m : f32
      linalg.yield %r : f32
    } -> tensor<2x4xf32>
  return %out, %kw, %vw : tensor<2x4xf32>, tensor<16x2x4xf32>, tensor<16x2x4xf32>
}

// -----

// The same softmax without the max, its scale fused into the exp generic
// (exp(s * 0.5)), as elementwise fusion leaves it.
// EQUIV: func=fused_scale_exp caches=3,4 cache_results=1,2 pos=5 steps=4

// CHECK-LABEL: func.func @fused_scale_exp(
// CHECK-SAME: !cache
// CHECK: kvq.cache_attend
// CHECK-NOT: math.exp
// SAME: @fused_scale_exp: 32 values over 4 steps agree

#q3 = affine_map<(h, t, d) -> (h, d)>
#k3 = affine_map<(h, t, d) -> (t, h, d)>
#s3 = affine_map<(h, t, d) -> (h, t)>
#p3 = affine_map<(h, d, t) -> (h, t)>
#v3 = affine_map<(h, d, t) -> (t, h, d)>
#o3 = affine_map<(h, d, t) -> (h, d)>
#id2 = affine_map<(h, t) -> (h, t)>
#row = affine_map<(h, t) -> (h)>

func.func @fused_scale_exp(%q: tensor<2x4xf32>, %k: tensor<1x2x4xf32>, %v: tensor<1x2x4xf32>, %kc: tensor<16x2x4xf32>, %vc: tensor<16x2x4xf32>, %pos: index)
    -> (tensor<2x4xf32>, tensor<16x2x4xf32>, tensor<16x2x4xf32>) {
  %c1 = arith.constant 1 : index
  %len = arith.addi %pos, %c1 : index
  %kw = tensor.insert_slice %k into %kc[%pos, 0, 0] [1, 2, 4] [1, 1, 1] : tensor<1x2x4xf32> into tensor<16x2x4xf32>
  %vw = tensor.insert_slice %v into %vc[%pos, 0, 0] [1, 2, 4] [1, 1, 1] : tensor<1x2x4xf32> into tensor<16x2x4xf32>
  %kr = tensor.extract_slice %kw[0, 0, 0] [%len, 2, 4] [1, 1, 1] : tensor<16x2x4xf32> to tensor<?x2x4xf32>
  %vr = tensor.extract_slice %vw[0, 0, 0] [%len, 2, 4] [1, 1, 1] : tensor<16x2x4xf32> to tensor<?x2x4xf32>
  %zero = arith.constant 0.000000e+00 : f32
  %one = arith.constant 1.000000e+00 : f32
  %half = arith.constant 5.000000e-01 : f32
  %se = tensor.empty(%len) : tensor<2x?xf32>
  %sz = linalg.fill ins(%zero : f32) outs(%se : tensor<2x?xf32>) -> tensor<2x?xf32>
  %s = linalg.generic {indexing_maps = [#q3, #k3, #s3], iterator_types = ["parallel", "parallel", "reduction"]} ins(%q, %kr : tensor<2x4xf32>, tensor<?x2x4xf32>) outs(%sz : tensor<2x?xf32>) {
    ^bb0(%a: f32, %b: f32, %acc: f32):
      %m = arith.mulf %a, %b : f32
      %r = arith.addf %acc, %m : f32
      linalg.yield %r : f32
    } -> tensor<2x?xf32>
  %ee = tensor.empty(%len) : tensor<2x?xf32>
  %e = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]} ins(%s : tensor<2x?xf32>) outs(%ee : tensor<2x?xf32>) {
    ^bb0(%a: f32, %o: f32):
      %sa = arith.mulf %a, %half : f32
      %r = math.exp %sa : f32
      linalg.yield %r : f32
    } -> tensor<2x?xf32>
  %ze = tensor.empty() : tensor<2xf32>
  %zi = linalg.fill ins(%zero : f32) outs(%ze : tensor<2xf32>) -> tensor<2xf32>
  %z = linalg.generic {indexing_maps = [#id2, #row], iterator_types = ["parallel", "reduction"]} ins(%e : tensor<2x?xf32>) outs(%zi : tensor<2xf32>) {
    ^bb0(%a: f32, %acc: f32):
      %r = arith.addf %a, %acc : f32
      linalg.yield %r : f32
    } -> tensor<2xf32>
  %pe = tensor.empty(%len) : tensor<2x?xf32>
  %pr = linalg.generic {indexing_maps = [#id2, #row, #id2], iterator_types = ["parallel", "parallel"]} ins(%e, %z : tensor<2x?xf32>, tensor<2xf32>) outs(%pe : tensor<2x?xf32>) {
    ^bb0(%a: f32, %b: f32, %o: f32):
      %rc = arith.divf %one, %b : f32
      %r = arith.mulf %a, %rc : f32
      linalg.yield %r : f32
    } -> tensor<2x?xf32>
  %oe = tensor.empty() : tensor<2x4xf32>
  %oz = linalg.fill ins(%zero : f32) outs(%oe : tensor<2x4xf32>) -> tensor<2x4xf32>
  %out = linalg.generic {indexing_maps = [#p3, #v3, #o3], iterator_types = ["parallel", "parallel", "reduction"]} ins(%pr, %vr : tensor<2x?xf32>, tensor<?x2x4xf32>) outs(%oz : tensor<2x4xf32>) {
    ^bb0(%a: f32, %b: f32, %acc: f32):
      %m = arith.mulf %a, %b : f32
      %r = arith.addf %acc, %m : f32
      linalg.yield %r : f32
    } -> tensor<2x4xf32>
  return %out, %kw, %vw : tensor<2x4xf32>, tensor<16x2x4xf32>, tensor<16x2x4xf32>
}
