// RUN: kvq-opt %s --split-input-file --verify-diagnostics --kvq-quantize-kv-cache=method=fp16 | FileCheck %s
// REQUIRES: mlir-runner
// RUN: %python %S/Inputs/equivalence.py %s --run "%kvq_run" | FileCheck %s --check-prefix=SAME

// One token written at a runtime position spelled as a scatter: the pass
// reads it as the insert_slice at that position (on its copy of the
// function) and adopts the cache. Several indices, or a generic that writes
// more than the one slot, keep their remarks
// (kvq-quantize-kv-cache-frontend-remarks.mlir). The second RUN line runs
// each graph before and after the rewrite and compares.

// Hugging Face StaticCache.update (cache_utils.py:
// k_out.index_copy_(2, cache_position, key_states)) as a tensor.scatter at
// the position held in a tensor, read whole under the additive mask.
// (Not run before the rewrite: tensor.scatter has no upstream lowering to
// loops; the rewritten graph is the one @hf_sdpa_mask_decode in
// kvq-quantize-kv-cache-masks.mlir runs and compares.)

// CHECK-LABEL: func.func @torch_index_copy_decode(
// CHECK-SAME: !cache
// CHECK: kvq.cache_update
// CHECK: kvq.cache_attend
// CHECK-NOT: tensor.scatter

#hq = affine_map<(b, h, n, t, d) -> (b, h, n, d)>
#hk = affine_map<(b, h, n, t, d) -> (b, h, t, d)>
#hs = affine_map<(b, h, n, t, d) -> (b, h, n, t)>
#hp = affine_map<(b, h, n, d, t) -> (b, h, n, t)>
#hv = affine_map<(b, h, n, d, t) -> (b, h, t, d)>
#ho = affine_map<(b, h, n, d, t) -> (b, h, n, d)>
#id4 = affine_map<(b, h, n, t) -> (b, h, n, t)>
#bmask = affine_map<(b, h, n, t) -> (0, 0, n, t)>

// expected-remark@below {{adopted on the assumption that argument #6 is the causal attention mask}}
func.func @torch_index_copy_decode(%q: tensor<1x2x1x4xf32>, %k: tensor<1x2x1x4xf32>, %v: tensor<1x2x1x4xf32>, %kc: tensor<1x2x16x4xf32>, %vc: tensor<1x2x16x4xf32>, %pos: tensor<1x1xi64>, %mask: tensor<1x1x1x16xf32>)
    -> (tensor<1x2x1x4xf32>, tensor<1x2x16x4xf32>, tensor<1x2x16x4xf32>) {
  %ks = tensor.expand_shape %k [[0, 1], [2], [3], [4]] output_shape [1, 1, 2, 1, 4] : tensor<1x2x1x4xf32> into tensor<1x1x2x1x4xf32>
  %vs = tensor.expand_shape %v [[0, 1], [2], [3], [4]] output_shape [1, 1, 2, 1, 4] : tensor<1x2x1x4xf32> into tensor<1x1x2x1x4xf32>
  %kw = tensor.scatter %ks into %kc[%pos] scatter_dims([2]) unique : (tensor<1x1x2x1x4xf32>, tensor<1x2x16x4xf32>, tensor<1x1xi64>) -> tensor<1x2x16x4xf32>
  %vw = tensor.scatter %vs into %vc[%pos] scatter_dims([2]) unique : (tensor<1x1x2x1x4xf32>, tensor<1x2x16x4xf32>, tensor<1x1xi64>) -> tensor<1x2x16x4xf32>
  %zero = arith.constant 0.000000e+00 : f32
  %se = tensor.empty() : tensor<1x2x1x16xf32>
  %sz = linalg.fill ins(%zero : f32) outs(%se : tensor<1x2x1x16xf32>) -> tensor<1x2x1x16xf32>
  %s = linalg.generic {indexing_maps = [#hq, #hk, #hs], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%q, %kw : tensor<1x2x1x4xf32>, tensor<1x2x16x4xf32>) outs(%sz : tensor<1x2x1x16xf32>) {
    ^bb0(%a: f32, %b: f32, %acc: f32):
      %m = arith.mulf %a, %b : f32
      %r = arith.addf %acc, %m : f32
      linalg.yield %r : f32
    } -> tensor<1x2x1x16xf32>
  %scale = arith.constant 5.000000e-01 : f32
  %xe = tensor.empty() : tensor<1x2x1x16xf32>
  %sc = linalg.generic {indexing_maps = [#id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s : tensor<1x2x1x16xf32>) outs(%xe : tensor<1x2x1x16xf32>) {
    ^bb0(%a: f32, %o: f32):
      %r = arith.mulf %a, %scale : f32
      linalg.yield %r : f32
    } -> tensor<1x2x1x16xf32>
  %x = linalg.generic {indexing_maps = [#id4, #bmask, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%sc, %mask : tensor<1x2x1x16xf32>, tensor<1x1x1x16xf32>) outs(%xe : tensor<1x2x1x16xf32>) {
    ^bb0(%a: f32, %m: f32, %o: f32):
      %r = arith.addf %a, %m : f32
      linalg.yield %r : f32
    } -> tensor<1x2x1x16xf32>
  %pe = tensor.empty() : tensor<1x2x1x16xf32>
  %pr = linalg.softmax dimension(3) ins(%x : tensor<1x2x1x16xf32>) outs(%pe : tensor<1x2x1x16xf32>) -> tensor<1x2x1x16xf32>
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

// torch.where(arange(max_len) == pos, new, cache) written as one generic
// over the cache that picks the slot at the position read from a tensor.
// EQUIV: func=where_slot_decode caches=3,4 cache_results=1,2 pos=5 steps=4

// CHECK-LABEL: func.func @where_slot_decode(
// CHECK-SAME: !cache
// CHECK: kvq.cache_update
// CHECK: kvq.cache_attend
// SAME: @where_slot_decode: 32 values over 4 steps agree

#q3 = affine_map<(h, t, d) -> (h, d)>
#k3 = affine_map<(h, t, d) -> (t, h, d)>
#s3 = affine_map<(h, t, d) -> (h, t)>
#p3 = affine_map<(h, d, t) -> (h, t)>
#v3 = affine_map<(h, d, t) -> (t, h, d)>
#o3 = affine_map<(h, d, t) -> (h, d)>
#id2 = affine_map<(h, t) -> (h, t)>
#id3 = affine_map<(t, h, d) -> (t, h, d)>

func.func @where_slot_decode(%q: tensor<2x4xf32>, %k: tensor<1x2x4xf32>, %v: tensor<1x2x4xf32>, %kc: tensor<16x2x4xf32>, %vc: tensor<16x2x4xf32>, %pos: tensor<1xi64>)
    -> (tensor<2x4xf32>, tensor<16x2x4xf32>, tensor<16x2x4xf32>) {
  %kw = linalg.generic {indexing_maps = [#id3], iterator_types = ["parallel", "parallel", "parallel"]} outs(%kc : tensor<16x2x4xf32>) {
  ^bb0(%out: f32):
    %t = linalg.index 0 : index
    %h = linalg.index 1 : index
    %c = linalg.index 2 : index
    %c0 = arith.constant 0 : index
    %p64 = tensor.extract %pos[%c0] : tensor<1xi64>
    %p = arith.index_cast %p64 : i64 to index
    %eq = arith.cmpi eq, %t, %p : index
    %new = tensor.extract %k[%c0, %h, %c] : tensor<1x2x4xf32>
    %r = arith.select %eq, %new, %out : f32
    linalg.yield %r : f32
  } -> tensor<16x2x4xf32>
  %vw = linalg.generic {indexing_maps = [#id3], iterator_types = ["parallel", "parallel", "parallel"]} outs(%vc : tensor<16x2x4xf32>) {
  ^bb0(%out: f32):
    %t = linalg.index 0 : index
    %h = linalg.index 1 : index
    %c = linalg.index 2 : index
    %c0 = arith.constant 0 : index
    %p64 = tensor.extract %pos[%c0] : tensor<1xi64>
    %p = arith.index_cast %p64 : i64 to index
    %eq = arith.cmpi eq, %t, %p : index
    %new = tensor.extract %v[%c0, %h, %c] : tensor<1x2x4xf32>
    %r = arith.select %eq, %new, %out : f32
    linalg.yield %r : f32
  } -> tensor<16x2x4xf32>
  %c0i = arith.constant 0 : index
  %p64o = tensor.extract %pos[%c0i] : tensor<1xi64>
  %po = arith.index_cast %p64o : i64 to index
  %c1 = arith.constant 1 : index
  %len = arith.addi %po, %c1 : index
  %kr = tensor.extract_slice %kw[0, 0, 0] [%len, 2, 4] [1, 1, 1] : tensor<16x2x4xf32> to tensor<?x2x4xf32>
  %vr = tensor.extract_slice %vw[0, 0, 0] [%len, 2, 4] [1, 1, 1] : tensor<16x2x4xf32> to tensor<?x2x4xf32>
  %zero = arith.constant 0.000000e+00 : f32
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
  %pe = tensor.empty(%len) : tensor<2x?xf32>
  %pr = linalg.softmax dimension(1) ins(%x : tensor<2x?xf32>) outs(%pe : tensor<2x?xf32>) -> tensor<2x?xf32>
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
