// REQUIRES: mlir-runner
// RUN: not %python %S/Inputs/equivalence.py %s --run "%kvq_run" 2>&1 | FileCheck %s

// torch-mlir's TOSA index_put of a chunk of two tokens
// (kvq-quantize-kv-cache-tosa.mlir, @torch_index_put_chunk), run with
// cache_position = [2i, 2i + 2]: positions that are not consecutive. The
// original graph writes those slots; the rewritten one, which writes a
// chunk from its first position on, stops at the check the pass adds
// instead of computing something else. (The check's message is printed
// on stdout before the abort, unflushed; the FileCheck of
// kvq-quantize-kv-cache-tosa.mlir pins it in the IR.)
// EQUIV: func=torch_index_put_chunk caches=3,4 cache_results=1,2 pos=5 steps=2 tokens=2 gap=2 mask=6

// CHECK: equivalence: running the rewritten graph failed (-6)

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
