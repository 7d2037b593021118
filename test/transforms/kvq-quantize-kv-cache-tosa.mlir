// RUN: kvq-opt %s --split-input-file --kvq-quantize-kv-cache=method=fp16 | FileCheck %s --implicit-check-not=tosa.
// REQUIRES: mlir-runner
// RUN: %python %S/Inputs/equivalence.py %s --run "%kvq_run" | FileCheck %s --check-prefix=SAME

// Attention written in TOSA, as torch-mlir's TOSA backend and TFLite-style
// importers emit it: heads by tosa.reshape/tosa.transpose, scores and the
// weighted sum by tosa.matmul, the softmax as reduce_max/sub/exp/
// reduce_sum/reciprocal/mul, an additive mask. kvq-quantize-kv-cache
// matches the linalg that upstream's TOSA conversions make of it
// (passes/TosaInput.cpp), so an adopted function leaves in linalg (no tosa.
// op remains); the second RUN line compiles each graph as written through
// --kvq-to-llvm (which converts TOSA the same way) and after the rewrite,
// runs both and compares every output.

// The cache written by tosa.scatter with the KV heads as its batch
// ([kv_heads, seq, head_dim] values, one index per head, each the step's
// position broadcast by tosa.add); the position is a tensor, as a TOSA
// graph holds it. (torch-mlir's own index_put lowering flattens the heads
// into the index instead: @torch_index_put below.)
// EQUIV: func=tosa_scatter_decode caches=3,4 cache_results=1,2 pos=5 mask=6 steps=4

// CHECK-LABEL: func.func @tosa_scatter_decode(
// CHECK: kvq.cache_update %{{.*}}[0], %{{.*}}, %{{.*}} : !cache, tensor<1x2x4xf32>, tensor<1x2x4xf32>
// CHECK: kvq.cache_attend %{{.*}}[0], %{{.*}} : !cache, tensor<1x2x4xf32> -> tensor<1x2x4xf32>
// SAME: @tosa_scatter_decode: 32 values over 4 steps agree
func.func @tosa_scatter_decode(%q: tensor<2x1x4xf32>, %k: tensor<2x1x4xf32>, %v: tensor<2x1x4xf32>, %kc: tensor<2x16x4xf32>, %vc: tensor<2x16x4xf32>, %pos: tensor<1x1xi32>, %mask: tensor<1x1x16xf32>) -> (tensor<2x1x4xf32>, tensor<2x16x4xf32>, tensor<2x16x4xf32>) {
  %z = "tosa.const"() {values = dense<0> : tensor<2x1xi32>} : () -> tensor<2x1xi32>
  %idx = tosa.add %z, %pos : (tensor<2x1xi32>, tensor<1x1xi32>) -> tensor<2x1xi32>
  %kc1 = tosa.scatter %kc, %idx, %k : (tensor<2x16x4xf32>, tensor<2x1xi32>, tensor<2x1x4xf32>) -> tensor<2x16x4xf32>
  %vc1 = tosa.scatter %vc, %idx, %v : (tensor<2x16x4xf32>, tensor<2x1xi32>, tensor<2x1x4xf32>) -> tensor<2x16x4xf32>
  %kt = tosa.transpose %kc1 {perms = array<i32: 0, 2, 1>} : (tensor<2x16x4xf32>) -> tensor<2x4x16xf32>
  %zp = "tosa.const"() {values = dense<0.0> : tensor<1xf32>} : () -> tensor<1xf32>
  %s = tosa.matmul %q, %kt, %zp, %zp : (tensor<2x1x4xf32>, tensor<2x4x16xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x1x16xf32>
  %scale = "tosa.const"() {values = dense<0.5> : tensor<1x1x1xf32>} : () -> tensor<1x1x1xf32>
  %shift = "tosa.const"() {values = dense<0> : tensor<1xi8>} : () -> tensor<1xi8>
  %ss = tosa.mul %s, %scale, %shift : (tensor<2x1x16xf32>, tensor<1x1x1xf32>, tensor<1xi8>) -> tensor<2x1x16xf32>
  %sm = tosa.add %ss, %mask : (tensor<2x1x16xf32>, tensor<1x1x16xf32>) -> tensor<2x1x16xf32>
  %mx = tosa.reduce_max %sm {axis = 2 : i32} : (tensor<2x1x16xf32>) -> tensor<2x1x1xf32>
  %d = tosa.sub %sm, %mx : (tensor<2x1x16xf32>, tensor<2x1x1xf32>) -> tensor<2x1x16xf32>
  %e = tosa.exp %d : (tensor<2x1x16xf32>) -> tensor<2x1x16xf32>
  %sum = tosa.reduce_sum %e {axis = 2 : i32} : (tensor<2x1x16xf32>) -> tensor<2x1x1xf32>
  %r = tosa.reciprocal %sum : (tensor<2x1x1xf32>) -> tensor<2x1x1xf32>
  %p = tosa.mul %e, %r, %shift : (tensor<2x1x16xf32>, tensor<2x1x1xf32>, tensor<1xi8>) -> tensor<2x1x16xf32>
  %o = tosa.matmul %p, %vc1, %zp, %zp : (tensor<2x1x16xf32>, tensor<2x16x4xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x1x4xf32>
  return %o, %kc1, %vc1 : tensor<2x1x4xf32>, tensor<2x16x4xf32>, tensor<2x16x4xf32>
}

// -----

// Grouped-query attention (4 query heads over 2 KV heads): repeat_kv as
// tosa.reshape + tosa.tile + tosa.reshape, the scale on the queries,
// activations flat ([1, heads * head_dim]), the cache written by
// tensor.insert_slice at an index position.
// EQUIV: func=tosa_gqa caches=3,4 cache_results=1,2 pos=5 mask=6 steps=4

// CHECK-LABEL: func.func @tosa_gqa(
// CHECK: kvq.cache_update %{{.*}}[0], %{{.*}}, %{{.*}} : !cache, tensor<1x2x4xf32>, tensor<1x2x4xf32>
// CHECK: kvq.cache_attend %{{.*}}[0], %{{.*}} : !cache, tensor<1x4x4xf32> -> tensor<1x4x4xf32>
// SAME: @tosa_gqa: 64 values over 4 steps agree
func.func @tosa_gqa(%x: tensor<1x16xf32>, %k: tensor<1x8xf32>, %v: tensor<1x8xf32>, %kc: tensor<2x16x4xf32>, %vc: tensor<2x16x4xf32>, %pos: index, %mask: tensor<1x1x16xf32>) -> (tensor<1x16xf32>, tensor<2x16x4xf32>, tensor<2x16x4xf32>) {
  %s3 = tosa.const_shape {values = dense<[2, 1, 4]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %k3 = tosa.reshape %k, %s3 : (tensor<1x8xf32>, !tosa.shape<3>) -> tensor<2x1x4xf32>
  %v3 = tosa.reshape %v, %s3 : (tensor<1x8xf32>, !tosa.shape<3>) -> tensor<2x1x4xf32>
  %kc1 = tensor.insert_slice %k3 into %kc[0, %pos, 0] [2, 1, 4] [1, 1, 1] : tensor<2x1x4xf32> into tensor<2x16x4xf32>
  %vc1 = tensor.insert_slice %v3 into %vc[0, %pos, 0] [2, 1, 4] [1, 1, 1] : tensor<2x1x4xf32> into tensor<2x16x4xf32>
  %sq = tosa.const_shape {values = dense<[4, 1, 4]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %q3 = tosa.reshape %x, %sq : (tensor<1x16xf32>, !tosa.shape<3>) -> tensor<4x1x4xf32>
  %shift = "tosa.const"() {values = dense<0> : tensor<1xi8>} : () -> tensor<1xi8>
  %scale = "tosa.const"() {values = dense<0.5> : tensor<1x1x1xf32>} : () -> tensor<1x1x1xf32>
  %qs = tosa.mul %q3, %scale, %shift : (tensor<4x1x4xf32>, tensor<1x1x1xf32>, tensor<1xi8>) -> tensor<4x1x4xf32>
  %s4 = tosa.const_shape {values = dense<[2, 1, 16, 4]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %mul = tosa.const_shape {values = dense<[1, 2, 1, 1]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %sg = tosa.const_shape {values = dense<[4, 16, 4]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %k4 = tosa.reshape %kc1, %s4 : (tensor<2x16x4xf32>, !tosa.shape<4>) -> tensor<2x1x16x4xf32>
  %kt4 = tosa.tile %k4, %mul : (tensor<2x1x16x4xf32>, !tosa.shape<4>) -> tensor<2x2x16x4xf32>
  %kg = tosa.reshape %kt4, %sg : (tensor<2x2x16x4xf32>, !tosa.shape<3>) -> tensor<4x16x4xf32>
  %v4 = tosa.reshape %vc1, %s4 : (tensor<2x16x4xf32>, !tosa.shape<4>) -> tensor<2x1x16x4xf32>
  %vt4 = tosa.tile %v4, %mul : (tensor<2x1x16x4xf32>, !tosa.shape<4>) -> tensor<2x2x16x4xf32>
  %vg = tosa.reshape %vt4, %sg : (tensor<2x2x16x4xf32>, !tosa.shape<3>) -> tensor<4x16x4xf32>
  %kt = tosa.transpose %kg {perms = array<i32: 0, 2, 1>} : (tensor<4x16x4xf32>) -> tensor<4x4x16xf32>
  %zp = "tosa.const"() {values = dense<0.0> : tensor<1xf32>} : () -> tensor<1xf32>
  %s = tosa.matmul %qs, %kt, %zp, %zp : (tensor<4x1x4xf32>, tensor<4x4x16xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<4x1x16xf32>
  %sm = tosa.add %s, %mask : (tensor<4x1x16xf32>, tensor<1x1x16xf32>) -> tensor<4x1x16xf32>
  %mx = tosa.reduce_max %sm {axis = 2 : i32} : (tensor<4x1x16xf32>) -> tensor<4x1x1xf32>
  %d = tosa.sub %sm, %mx : (tensor<4x1x16xf32>, tensor<4x1x1xf32>) -> tensor<4x1x16xf32>
  %e = tosa.exp %d : (tensor<4x1x16xf32>) -> tensor<4x1x16xf32>
  %sum = tosa.reduce_sum %e {axis = 2 : i32} : (tensor<4x1x16xf32>) -> tensor<4x1x1xf32>
  %r = tosa.reciprocal %sum : (tensor<4x1x1xf32>) -> tensor<4x1x1xf32>
  %p = tosa.mul %e, %r, %shift : (tensor<4x1x16xf32>, tensor<4x1x1xf32>, tensor<1xi8>) -> tensor<4x1x16xf32>
  %o = tosa.matmul %p, %vg, %zp, %zp : (tensor<4x1x16xf32>, tensor<4x16x4xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<4x1x4xf32>
  %so = tosa.const_shape {values = dense<[1, 16]> : tensor<2xindex>} : () -> !tosa.shape<2>
  %of = tosa.reshape %o, %so : (tensor<4x1x4xf32>, !tosa.shape<2>) -> tensor<1x16xf32>
  return %of, %kc1, %vc1 : tensor<1x16xf32>, tensor<2x16x4xf32>, tensor<2x16x4xf32>
}

// -----

// The cache in Hugging Face's [batch, kv_heads, seq, head_dim], seen as
// [kv_heads, seq, head_dim] by tosa.reshape for the 3-D tosa.scatter and
// reshaped back where it is returned (tosa.scatter takes 3-D values).
// EQUIV: func=tosa_scatter_4d caches=3,4 cache_results=1,2 pos=5 mask=6 steps=4

// CHECK-LABEL: func.func @tosa_scatter_4d(
// CHECK: kvq.cache_update %{{.*}}[0], %{{.*}}, %{{.*}} : !cache, tensor<1x2x4xf32>, tensor<1x2x4xf32>
// CHECK: kvq.cache_attend %{{.*}}[0], %{{.*}} : !cache, tensor<1x2x4xf32> -> tensor<1x2x4xf32>
// SAME: @tosa_scatter_4d: 32 values over 4 steps agree
func.func @tosa_scatter_4d(%q: tensor<2x1x4xf32>, %k: tensor<2x1x4xf32>, %v: tensor<2x1x4xf32>, %kc4: tensor<1x2x16x4xf32>, %vc4: tensor<1x2x16x4xf32>, %pos: tensor<1x1xi32>, %mask: tensor<1x1x16xf32>) -> (tensor<2x1x4xf32>, tensor<1x2x16x4xf32>, tensor<1x2x16x4xf32>) {
  %s3 = tosa.const_shape {values = dense<[2, 16, 4]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %s4 = tosa.const_shape {values = dense<[1, 2, 16, 4]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %kc = tosa.reshape %kc4, %s3 : (tensor<1x2x16x4xf32>, !tosa.shape<3>) -> tensor<2x16x4xf32>
  %vc = tosa.reshape %vc4, %s3 : (tensor<1x2x16x4xf32>, !tosa.shape<3>) -> tensor<2x16x4xf32>
  %z = "tosa.const"() {values = dense<0> : tensor<2x1xi32>} : () -> tensor<2x1xi32>
  %idx = tosa.add %z, %pos : (tensor<2x1xi32>, tensor<1x1xi32>) -> tensor<2x1xi32>
  %kc1 = tosa.scatter %kc, %idx, %k : (tensor<2x16x4xf32>, tensor<2x1xi32>, tensor<2x1x4xf32>) -> tensor<2x16x4xf32>
  %vc1 = tosa.scatter %vc, %idx, %v : (tensor<2x16x4xf32>, tensor<2x1xi32>, tensor<2x1x4xf32>) -> tensor<2x16x4xf32>
  %kt = tosa.transpose %kc1 {perms = array<i32: 0, 2, 1>} : (tensor<2x16x4xf32>) -> tensor<2x4x16xf32>
  %zp = "tosa.const"() {values = dense<0.0> : tensor<1xf32>} : () -> tensor<1xf32>
  %s = tosa.matmul %q, %kt, %zp, %zp : (tensor<2x1x4xf32>, tensor<2x4x16xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x1x16xf32>
  %scale = "tosa.const"() {values = dense<0.5> : tensor<1x1x1xf32>} : () -> tensor<1x1x1xf32>
  %shift = "tosa.const"() {values = dense<0> : tensor<1xi8>} : () -> tensor<1xi8>
  %ss = tosa.mul %s, %scale, %shift : (tensor<2x1x16xf32>, tensor<1x1x1xf32>, tensor<1xi8>) -> tensor<2x1x16xf32>
  %sm = tosa.add %ss, %mask : (tensor<2x1x16xf32>, tensor<1x1x16xf32>) -> tensor<2x1x16xf32>
  %mx = tosa.reduce_max %sm {axis = 2 : i32} : (tensor<2x1x16xf32>) -> tensor<2x1x1xf32>
  %d = tosa.sub %sm, %mx : (tensor<2x1x16xf32>, tensor<2x1x1xf32>) -> tensor<2x1x16xf32>
  %e = tosa.exp %d : (tensor<2x1x16xf32>) -> tensor<2x1x16xf32>
  %sum = tosa.reduce_sum %e {axis = 2 : i32} : (tensor<2x1x16xf32>) -> tensor<2x1x1xf32>
  %r = tosa.reciprocal %sum : (tensor<2x1x1xf32>) -> tensor<2x1x1xf32>
  %p = tosa.mul %e, %r, %shift : (tensor<2x1x16xf32>, tensor<2x1x1xf32>, tensor<1xi8>) -> tensor<2x1x16xf32>
  %o = tosa.matmul %p, %vc1, %zp, %zp : (tensor<2x1x16xf32>, tensor<2x16x4xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x1x4xf32>
  %kr = tosa.reshape %kc1, %s4 : (tensor<2x16x4xf32>, !tosa.shape<4>) -> tensor<1x2x16x4xf32>
  %vr = tosa.reshape %vc1, %s4 : (tensor<2x16x4xf32>, !tosa.shape<4>) -> tensor<1x2x16x4xf32>
  return %o, %kr, %vr : tensor<2x1x4xf32>, tensor<1x2x16x4xf32>, tensor<1x2x16x4xf32>
}

// -----

// torch-mlir's TOSA lowering of a static cache's index_put
// (`k_cache[:, :, cache_position] = k` on [batch, kv_heads, seq, head_dim],
// TorchToTosa's AtenIndexPutHackedTwinOp and convertScatterNdOp): one
// coordinate tensor per dimension (batch zeros, the head arange, the
// position tiled over heads) cast to i32 and concatenated, multiplied by the
// strides [H * S, S, 1] and summed (reduce_sum) into one index per head of
// the cache seen as [1, H * S, D]; the scatter's result reshaped back. The
// pass evaluates the indices to head * 16 + position and folds the scatter
// into a write of the cache as passed in.
// EQUIV: func=torch_index_put caches=3,4 cache_results=1,2 pos=5 mask=6 steps=4

// CHECK-LABEL: func.func @torch_index_put(
// CHECK: kvq.cache_update %{{.*}}[0], %{{.*}}, %{{.*}} : !cache, tensor<1x2x4xf32>, tensor<1x2x4xf32>
// CHECK: kvq.cache_attend %{{.*}}[0], %{{.*}} : !cache, tensor<1x2x4xf32> -> tensor<1x2x4xf32>
// SAME: @torch_index_put: 32 values over 4 steps agree
func.func @torch_index_put(%q: tensor<2x1x4xf32>, %k: tensor<1x2x1x4xf32>, %v: tensor<1x2x1x4xf32>, %kc4: tensor<1x2x16x4xf32>, %vc4: tensor<1x2x16x4xf32>, %pos: tensor<1xi64>, %mask: tensor<1x1x16xf32>) -> (tensor<2x1x4xf32>, tensor<1x2x16x4xf32>, tensor<1x2x16x4xf32>) {
  %s111 = tosa.const_shape {values = dense<[1, 1, 1]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %m121 = tosa.const_shape {values = dense<[1, 2, 1]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %p64 = tosa.reshape %pos, %s111 : (tensor<1xi64>, !tosa.shape<3>) -> tensor<1x1x1xi64>
  %pt = tosa.tile %p64, %m121 : (tensor<1x1x1xi64>, !tosa.shape<3>) -> tensor<1x2x1xi64>
  %i0 = "tosa.const"() {values = dense<0> : tensor<1x2x1xi64>} : () -> tensor<1x2x1xi64>
  %i1 = "tosa.const"() {values = dense<[[[0], [1]]]> : tensor<1x2x1xi64>} : () -> tensor<1x2x1xi64>
  %c0 = tosa.cast %i0 : (tensor<1x2x1xi64>) -> tensor<1x2x1xi32>
  %c1 = tosa.cast %i1 : (tensor<1x2x1xi64>) -> tensor<1x2x1xi32>
  %c2 = tosa.cast %pt : (tensor<1x2x1xi64>) -> tensor<1x2x1xi32>
  %s1211 = tosa.const_shape {values = dense<[1, 2, 1, 1]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %r0 = tosa.reshape %c0, %s1211 : (tensor<1x2x1xi32>, !tosa.shape<4>) -> tensor<1x2x1x1xi32>
  %r1 = tosa.reshape %c1, %s1211 : (tensor<1x2x1xi32>, !tosa.shape<4>) -> tensor<1x2x1x1xi32>
  %r2 = tosa.reshape %c2, %s1211 : (tensor<1x2x1xi32>, !tosa.shape<4>) -> tensor<1x2x1x1xi32>
  %ind = tosa.concat %r0, %r1, %r2 {axis = 3 : i32} : (tensor<1x2x1x1xi32>, tensor<1x2x1x1xi32>, tensor<1x2x1x1xi32>) -> tensor<1x2x1x3xi32>
  %s124 = tosa.const_shape {values = dense<[1, 2, 4]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %s1324 = tosa.const_shape {values = dense<[1, 32, 4]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %s23 = tosa.const_shape {values = dense<[2, 3]> : tensor<2xindex>} : () -> !tosa.shape<2>
  %s12 = tosa.const_shape {values = dense<[1, 2]> : tensor<2xindex>} : () -> !tosa.shape<2>
  %s4 = tosa.const_shape {values = dense<[1, 2, 16, 4]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %kf = tosa.reshape %k, %s124 : (tensor<1x2x1x4xf32>, !tosa.shape<3>) -> tensor<1x2x4xf32>
  %vf = tosa.reshape %v, %s124 : (tensor<1x2x1x4xf32>, !tosa.shape<3>) -> tensor<1x2x4xf32>
  %kc = tosa.reshape %kc4, %s1324 : (tensor<1x2x16x4xf32>, !tosa.shape<3>) -> tensor<1x32x4xf32>
  %vc = tosa.reshape %vc4, %s1324 : (tensor<1x2x16x4xf32>, !tosa.shape<3>) -> tensor<1x32x4xf32>
  %im = tosa.reshape %ind, %s23 : (tensor<1x2x1x3xi32>, !tosa.shape<2>) -> tensor<2x3xi32>
  %coef = "tosa.const"() {values = dense<[32, 16, 1]> : tensor<3xi32>} : () -> tensor<3xi32>
  %s13 = tosa.const_shape {values = dense<[1, 3]> : tensor<2xindex>} : () -> !tosa.shape<2>
  %coef2 = tosa.reshape %coef, %s13 : (tensor<3xi32>, !tosa.shape<2>) -> tensor<1x3xi32>
  %sh = "tosa.const"() {values = dense<0> : tensor<1xi8>} : () -> tensor<1xi8>
  %mm = tosa.mul %im, %coef2, %sh : (tensor<2x3xi32>, tensor<1x3xi32>, tensor<1xi8>) -> tensor<2x3xi32>
  %rs = tosa.reduce_sum %mm {axis = 1 : i32} : (tensor<2x3xi32>) -> tensor<2x1xi32>
  %idx = tosa.reshape %rs, %s12 : (tensor<2x1xi32>, !tosa.shape<2>) -> tensor<1x2xi32>
  %kc1 = tosa.scatter %kc, %idx, %kf : (tensor<1x32x4xf32>, tensor<1x2xi32>, tensor<1x2x4xf32>) -> tensor<1x32x4xf32>
  %vc1 = tosa.scatter %vc, %idx, %vf : (tensor<1x32x4xf32>, tensor<1x2xi32>, tensor<1x2x4xf32>) -> tensor<1x32x4xf32>
  %kr = tosa.reshape %kc1, %s4 : (tensor<1x32x4xf32>, !tosa.shape<4>) -> tensor<1x2x16x4xf32>
  %vr = tosa.reshape %vc1, %s4 : (tensor<1x32x4xf32>, !tosa.shape<4>) -> tensor<1x2x16x4xf32>
  %s3 = tosa.const_shape {values = dense<[2, 16, 4]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %ka = tosa.reshape %kr, %s3 : (tensor<1x2x16x4xf32>, !tosa.shape<3>) -> tensor<2x16x4xf32>
  %va = tosa.reshape %vr, %s3 : (tensor<1x2x16x4xf32>, !tosa.shape<3>) -> tensor<2x16x4xf32>
  %kt = tosa.transpose %ka {perms = array<i32: 0, 2, 1>} : (tensor<2x16x4xf32>) -> tensor<2x4x16xf32>
  %zp = "tosa.const"() {values = dense<0.0> : tensor<1xf32>} : () -> tensor<1xf32>
  %s = tosa.matmul %q, %kt, %zp, %zp : (tensor<2x1x4xf32>, tensor<2x4x16xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x1x16xf32>
  %scale = "tosa.const"() {values = dense<0.5> : tensor<1x1x1xf32>} : () -> tensor<1x1x1xf32>
  %ss = tosa.mul %s, %scale, %sh : (tensor<2x1x16xf32>, tensor<1x1x1xf32>, tensor<1xi8>) -> tensor<2x1x16xf32>
  %sm = tosa.add %ss, %mask : (tensor<2x1x16xf32>, tensor<1x1x16xf32>) -> tensor<2x1x16xf32>
  %mx = tosa.reduce_max %sm {axis = 2 : i32} : (tensor<2x1x16xf32>) -> tensor<2x1x1xf32>
  %d = tosa.sub %sm, %mx : (tensor<2x1x16xf32>, tensor<2x1x1xf32>) -> tensor<2x1x16xf32>
  %e = tosa.exp %d : (tensor<2x1x16xf32>) -> tensor<2x1x16xf32>
  %sum = tosa.reduce_sum %e {axis = 2 : i32} : (tensor<2x1x16xf32>) -> tensor<2x1x1xf32>
  %r = tosa.reciprocal %sum : (tensor<2x1x1xf32>) -> tensor<2x1x1xf32>
  %p = tosa.mul %e, %r, %sh : (tensor<2x1x16xf32>, tensor<2x1x1xf32>, tensor<1xi8>) -> tensor<2x1x16xf32>
  %o = tosa.matmul %p, %va, %zp, %zp : (tensor<2x1x16xf32>, tensor<2x16x4xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x1x4xf32>
  return %o, %kr, %vr : tensor<2x1x4xf32>, tensor<1x2x16x4xf32>, tensor<1x2x16x4xf32>
}

// -----

// The same index_put for a chunk of two new tokens (chunked prefill or
// speculative verification: `k_cache[:, :, cache_position] = k` with
// cache_position = arange(pos, pos + 2)): the coordinates are [1, H, 2],
// the indices head * 16 + cache_position[j] in the order (head, j), and
// Hugging Face's additive causal mask covers the chunk's rows. The pass
// reads the chunk as written at cache_position[0] and checks at run time
// that cache_position[j] = cache_position[0] + j.
// EQUIV: func=torch_index_put_chunk caches=3,4 cache_results=1,2 pos=5 steps=4 tokens=2 mask=6

// CHECK-LABEL: func.func @torch_index_put_chunk(
// CHECK: cf.assert %{{.*}}, "kvq: the chunk's positions (argument #5) are not consecutive
// CHECK: kvq.cache_update %{{.*}}[0], %{{.*}}, %{{.*}} : !cache, tensor<2x2x4xf32>, tensor<2x2x4xf32>
// CHECK: kvq.cache_attend %{{.*}}[0], %{{.*}} : !cache, tensor<2x2x4xf32> -> tensor<2x2x4xf32>
// SAME: @torch_index_put_chunk: 64 values over 4 steps agree
func.func @torch_index_put_chunk(%q: tensor<2x2x4xf32>, %k: tensor<1x2x2x4xf32>, %v: tensor<1x2x2x4xf32>, %kc4: tensor<1x2x16x4xf32>, %vc4: tensor<1x2x16x4xf32>, %pos: tensor<2xi64>, %mask: tensor<1x2x16xf32>) -> (tensor<2x2x4xf32>, tensor<1x2x16x4xf32>, tensor<1x2x16x4xf32>) {
  %s112 = tosa.const_shape {values = dense<[1, 1, 2]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %m121 = tosa.const_shape {values = dense<[1, 2, 1]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %p64 = tosa.reshape %pos, %s112 : (tensor<2xi64>, !tosa.shape<3>) -> tensor<1x1x2xi64>
  %pt = tosa.tile %p64, %m121 : (tensor<1x1x2xi64>, !tosa.shape<3>) -> tensor<1x2x2xi64>
  %i0 = "tosa.const"() {values = dense<0> : tensor<1x2x2xi64>} : () -> tensor<1x2x2xi64>
  %i1 = "tosa.const"() {values = dense<[[[0, 0], [1, 1]]]> : tensor<1x2x2xi64>} : () -> tensor<1x2x2xi64>
  %c0 = tosa.cast %i0 : (tensor<1x2x2xi64>) -> tensor<1x2x2xi32>
  %c1 = tosa.cast %i1 : (tensor<1x2x2xi64>) -> tensor<1x2x2xi32>
  %c2 = tosa.cast %pt : (tensor<1x2x2xi64>) -> tensor<1x2x2xi32>
  %s1221 = tosa.const_shape {values = dense<[1, 2, 2, 1]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %r0 = tosa.reshape %c0, %s1221 : (tensor<1x2x2xi32>, !tosa.shape<4>) -> tensor<1x2x2x1xi32>
  %r1 = tosa.reshape %c1, %s1221 : (tensor<1x2x2xi32>, !tosa.shape<4>) -> tensor<1x2x2x1xi32>
  %r2 = tosa.reshape %c2, %s1221 : (tensor<1x2x2xi32>, !tosa.shape<4>) -> tensor<1x2x2x1xi32>
  %ind = tosa.concat %r0, %r1, %r2 {axis = 3 : i32} : (tensor<1x2x2x1xi32>, tensor<1x2x2x1xi32>, tensor<1x2x2x1xi32>) -> tensor<1x2x2x3xi32>
  %s144 = tosa.const_shape {values = dense<[1, 4, 4]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %s1324 = tosa.const_shape {values = dense<[1, 32, 4]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %s43 = tosa.const_shape {values = dense<[4, 3]> : tensor<2xindex>} : () -> !tosa.shape<2>
  %s14 = tosa.const_shape {values = dense<[1, 4]> : tensor<2xindex>} : () -> !tosa.shape<2>
  %s4 = tosa.const_shape {values = dense<[1, 2, 16, 4]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %kf = tosa.reshape %k, %s144 : (tensor<1x2x2x4xf32>, !tosa.shape<3>) -> tensor<1x4x4xf32>
  %vf = tosa.reshape %v, %s144 : (tensor<1x2x2x4xf32>, !tosa.shape<3>) -> tensor<1x4x4xf32>
  %kc = tosa.reshape %kc4, %s1324 : (tensor<1x2x16x4xf32>, !tosa.shape<3>) -> tensor<1x32x4xf32>
  %vc = tosa.reshape %vc4, %s1324 : (tensor<1x2x16x4xf32>, !tosa.shape<3>) -> tensor<1x32x4xf32>
  %im = tosa.reshape %ind, %s43 : (tensor<1x2x2x3xi32>, !tosa.shape<2>) -> tensor<4x3xi32>
  %coef = "tosa.const"() {values = dense<[32, 16, 1]> : tensor<3xi32>} : () -> tensor<3xi32>
  %s13 = tosa.const_shape {values = dense<[1, 3]> : tensor<2xindex>} : () -> !tosa.shape<2>
  %coef2 = tosa.reshape %coef, %s13 : (tensor<3xi32>, !tosa.shape<2>) -> tensor<1x3xi32>
  %sh = "tosa.const"() {values = dense<0> : tensor<1xi8>} : () -> tensor<1xi8>
  %mm = tosa.mul %im, %coef2, %sh : (tensor<4x3xi32>, tensor<1x3xi32>, tensor<1xi8>) -> tensor<4x3xi32>
  %rs = tosa.reduce_sum %mm {axis = 1 : i32} : (tensor<4x3xi32>) -> tensor<4x1xi32>
  %idx = tosa.reshape %rs, %s14 : (tensor<4x1xi32>, !tosa.shape<2>) -> tensor<1x4xi32>
  %kc1 = tosa.scatter %kc, %idx, %kf : (tensor<1x32x4xf32>, tensor<1x4xi32>, tensor<1x4x4xf32>) -> tensor<1x32x4xf32>
  %vc1 = tosa.scatter %vc, %idx, %vf : (tensor<1x32x4xf32>, tensor<1x4xi32>, tensor<1x4x4xf32>) -> tensor<1x32x4xf32>
  %kr = tosa.reshape %kc1, %s4 : (tensor<1x32x4xf32>, !tosa.shape<4>) -> tensor<1x2x16x4xf32>
  %vr = tosa.reshape %vc1, %s4 : (tensor<1x32x4xf32>, !tosa.shape<4>) -> tensor<1x2x16x4xf32>
  %s3 = tosa.const_shape {values = dense<[2, 16, 4]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %ka = tosa.reshape %kr, %s3 : (tensor<1x2x16x4xf32>, !tosa.shape<3>) -> tensor<2x16x4xf32>
  %va = tosa.reshape %vr, %s3 : (tensor<1x2x16x4xf32>, !tosa.shape<3>) -> tensor<2x16x4xf32>
  %kt = tosa.transpose %ka {perms = array<i32: 0, 2, 1>} : (tensor<2x16x4xf32>) -> tensor<2x4x16xf32>
  %zp = "tosa.const"() {values = dense<0.0> : tensor<1xf32>} : () -> tensor<1xf32>
  %s = tosa.matmul %q, %kt, %zp, %zp : (tensor<2x2x4xf32>, tensor<2x4x16xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x2x16xf32>
  %scale = "tosa.const"() {values = dense<0.5> : tensor<1x1x1xf32>} : () -> tensor<1x1x1xf32>
  %ss = tosa.mul %s, %scale, %sh : (tensor<2x2x16xf32>, tensor<1x1x1xf32>, tensor<1xi8>) -> tensor<2x2x16xf32>
  %sm = tosa.add %ss, %mask : (tensor<2x2x16xf32>, tensor<1x2x16xf32>) -> tensor<2x2x16xf32>
  %mx = tosa.reduce_max %sm {axis = 2 : i32} : (tensor<2x2x16xf32>) -> tensor<2x2x1xf32>
  %d = tosa.sub %sm, %mx : (tensor<2x2x16xf32>, tensor<2x2x1xf32>) -> tensor<2x2x16xf32>
  %e = tosa.exp %d : (tensor<2x2x16xf32>) -> tensor<2x2x16xf32>
  %sum = tosa.reduce_sum %e {axis = 2 : i32} : (tensor<2x2x16xf32>) -> tensor<2x2x1xf32>
  %r = tosa.reciprocal %sum : (tensor<2x2x1xf32>) -> tensor<2x2x1xf32>
  %p = tosa.mul %e, %r, %sh : (tensor<2x2x16xf32>, tensor<2x2x1xf32>, tensor<1xi8>) -> tensor<2x2x16xf32>
  %o = tosa.matmul %p, %va, %zp, %zp : (tensor<2x2x16xf32>, tensor<2x16x4xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x2x4xf32>
  return %o, %kr, %vr : tensor<2x2x4xf32>, tensor<1x2x16x4xf32>, tensor<1x2x16x4xf32>
}

// -----

// A chunk of two tokens written by tosa.scatter with the KV heads as its
// batch (input [H, 2, D], indices [H, 2]: the step's positions broadcast
// over the heads): one insert_slice at the first position, under the
// check that the positions are consecutive.
// EQUIV: func=tosa_scatter_chunk_rows caches=3,4 cache_results=1,2 pos=5 steps=4 tokens=2 mask=6

// CHECK-LABEL: func.func @tosa_scatter_chunk_rows(
// CHECK: cf.assert %{{.*}}, "kvq: the chunk's positions are not consecutive
// CHECK-NOT: cf.assert %{{.*}}, "kvq: the chunk's positions
// CHECK: kvq.cache_update %{{.*}}[0], %{{.*}}, %{{.*}} : !cache, tensor<2x2x4xf32>, tensor<2x2x4xf32>
// CHECK: kvq.cache_attend %{{.*}}[0], %{{.*}} : !cache, tensor<2x2x4xf32> -> tensor<2x2x4xf32>
// SAME: @tosa_scatter_chunk_rows: 64 values over 4 steps agree
func.func @tosa_scatter_chunk_rows(%q: tensor<2x2x4xf32>, %k: tensor<2x2x4xf32>, %v: tensor<2x2x4xf32>, %kc: tensor<2x16x4xf32>, %vc: tensor<2x16x4xf32>, %pos: tensor<1x2xi32>, %mask: tensor<1x2x16xf32>) -> (tensor<2x2x4xf32>, tensor<2x16x4xf32>, tensor<2x16x4xf32>) {
  %z = "tosa.const"() {values = dense<0> : tensor<2x2xi32>} : () -> tensor<2x2xi32>
  %idx = tosa.add %z, %pos : (tensor<2x2xi32>, tensor<1x2xi32>) -> tensor<2x2xi32>
  %kc1 = tosa.scatter %kc, %idx, %k : (tensor<2x16x4xf32>, tensor<2x2xi32>, tensor<2x2x4xf32>) -> tensor<2x16x4xf32>
  %vc1 = tosa.scatter %vc, %idx, %v : (tensor<2x16x4xf32>, tensor<2x2xi32>, tensor<2x2x4xf32>) -> tensor<2x16x4xf32>
  %kt = tosa.transpose %kc1 {perms = array<i32: 0, 2, 1>} : (tensor<2x16x4xf32>) -> tensor<2x4x16xf32>
  %zp = "tosa.const"() {values = dense<0.0> : tensor<1xf32>} : () -> tensor<1xf32>
  %s = tosa.matmul %q, %kt, %zp, %zp : (tensor<2x2x4xf32>, tensor<2x4x16xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x2x16xf32>
  %scale = "tosa.const"() {values = dense<0.5> : tensor<1x1x1xf32>} : () -> tensor<1x1x1xf32>
  %shift = "tosa.const"() {values = dense<0> : tensor<1xi8>} : () -> tensor<1xi8>
  %ss = tosa.mul %s, %scale, %shift : (tensor<2x2x16xf32>, tensor<1x1x1xf32>, tensor<1xi8>) -> tensor<2x2x16xf32>
  %sm = tosa.add %ss, %mask : (tensor<2x2x16xf32>, tensor<1x2x16xf32>) -> tensor<2x2x16xf32>
  %mx = tosa.reduce_max %sm {axis = 2 : i32} : (tensor<2x2x16xf32>) -> tensor<2x2x1xf32>
  %d = tosa.sub %sm, %mx : (tensor<2x2x16xf32>, tensor<2x2x1xf32>) -> tensor<2x2x16xf32>
  %e = tosa.exp %d : (tensor<2x2x16xf32>) -> tensor<2x2x16xf32>
  %sum = tosa.reduce_sum %e {axis = 2 : i32} : (tensor<2x2x16xf32>) -> tensor<2x2x1xf32>
  %r = tosa.reciprocal %sum : (tensor<2x2x1xf32>) -> tensor<2x2x1xf32>
  %p = tosa.mul %e, %r, %shift : (tensor<2x2x16xf32>, tensor<2x2x1xf32>, tensor<1xi8>) -> tensor<2x2x16xf32>
  %o = tosa.matmul %p, %vc1, %zp, %zp : (tensor<2x2x16xf32>, tensor<2x16x4xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x2x4xf32>
  return %o, %kc1, %vc1 : tensor<2x2x4xf32>, tensor<2x16x4xf32>, tensor<2x16x4xf32>
}
