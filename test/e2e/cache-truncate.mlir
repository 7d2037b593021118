// REQUIRES: mlir-runner
// RUN: kvq-opt %s --kvq-to-llvm | %kvq_run | FileCheck %s

// kvq.cache_truncate compiled and run: N tokens in, truncate to n, and the
// cache holds exactly the first n. Values are small integers, exact in fp16
// and (with 2-bit codes spanning [0, 3]) in KIVI, so every printed number
// is checkable by hand: a zero query weighs the cached tokens equally, so
// attention is the mean of their value rows.

// fp16 and KIVI whose 4-token residual window holds every token here: both
// cut exactly anywhere.
!fp16 = !kvq.cache<layers = 2, kv_heads = 1, head_dim = 4, element_type = f32,
    config = <method = fp16, key_bits = 16, value_bits = 16>>
!kivi = !kvq.cache<layers = 1, kv_heads = 1, head_dim = 4, element_type = f32,
    config = <method = kivi, key_bits = 2, value_bits = 2, group_size = 4,
              residual_length = 4>>
// A cut the runtime refuses: cache-truncate-refused.mlir.

func.func @main() {
  %k = arith.constant dense<[[[0.0, 3.0, 1.0, 2.0]], [[1.0, 2.0, 0.0, 3.0]],
                             [[2.0, 1.0, 3.0, 0.0]], [[3.0, 0.0, 2.0, 1.0]]]> : tensor<4x1x4xf32>
  %v = arith.constant dense<[[[0.0, 1.0, 2.0, 3.0]], [[2.0, 3.0, 0.0, 1.0]],
                             [[1.0, 0.0, 3.0, 2.0]], [[0.0, 3.0, 0.0, 3.0]]]> : tensor<4x1x4xf32>
  %k1 = arith.constant dense<[[[1.0, 1.0, 1.0, 1.0]]]> : tensor<1x1x4xf32>
  %v1 = arith.constant dense<[[[3.0, 2.0, 1.0, 0.0]]]> : tensor<1x1x4xf32>
  %q = arith.constant dense<0.0> : tensor<1x1x4xf32>
  %two = arith.constant 2 : i64
  %three = arith.constant 3 : i64

  // fp16, two layers: 4 tokens in layer 0, 1 in layer 1; keep 2.
  %f = kvq.cache_create : !fp16
  kvq.cache_update %f[0], %k, %v : !fp16, tensor<4x1x4xf32>, tensor<4x1x4xf32>
  kvq.cache_update %f[1], %k1, %v1 : !fp16, tensor<1x1x4xf32>, tensor<1x1x4xf32>
  kvq.cache_truncate %f, %two : !fp16
  // Layer 0 holds tokens 0 and 1, layer 1 (fewer than 2) is unchanged.
  // CHECK: fp16 layer 0 tokens: 2
  // CHECK-NEXT: fp16 layer 1 tokens: 1
  %t0, %b0, %x0, %e0 = kvq.cache_stats %f[0] : !fp16
  vector.print str "fp16 layer 0 tokens: "
  vector.print %t0 : i64
  %t1, %b1, %x1, %e1 = kvq.cache_stats %f[1] : !fp16
  vector.print str "fp16 layer 1 tokens: "
  vector.print %t1 : i64
  // Mean of value rows 0 and 1: ([0,1,2,3] + [2,3,0,1]) / 2.
  // CHECK: {{\[}}{{\[}}[1,   2,   1,   2]]]
  %o0 = kvq.cache_attend %f[0], %q : !fp16, tensor<1x1x4xf32> -> tensor<1x1x4xf32>
  %o0u = tensor.cast %o0 : tensor<1x1x4xf32> to tensor<*xf32>
  call @printMemrefF32(%o0u) : (tensor<*xf32>) -> ()
  // A token appended after the cut lands at position 2: mean of rows 0, 1
  // and [3, 2, 1, 0] -- the dropped rows 2 and 3 are gone.
  // CHECK: fp16 after append: 3
  // CHECK: {{\[}}{{\[}}[1.66667,   2,   1,   1.33333]]]
  kvq.cache_update %f[0], %k1, %v1 : !fp16, tensor<1x1x4xf32>, tensor<1x1x4xf32>
  %t2, %b2, %x2, %e2 = kvq.cache_stats %f[0] : !fp16
  vector.print str "fp16 after append: "
  vector.print %t2 : i64
  %o1 = kvq.cache_attend %f[0], %q : !fp16, tensor<1x1x4xf32> -> tensor<1x1x4xf32>
  %o1u = tensor.cast %o1 : tensor<1x1x4xf32> to tensor<*xf32>
  call @printMemrefF32(%o1u) : (tensor<*xf32>) -> ()
  kvq.cache_destroy %f : !fp16

  // KIVI: 4 tokens in the residual window, keep 3 (a speculative rollback).
  %c = kvq.cache_create : !kivi
  kvq.cache_update %c[0], %k, %v : !kivi, tensor<4x1x4xf32>, tensor<4x1x4xf32>
  kvq.cache_truncate %c, %three : !kivi
  // Update-and-fetch after the cut: the 3 kept rows and the new one.
  // CHECK: kivi tokens: 3
  // CHECK: sizes = [4, 1, 4]
  // CHECK-NEXT: {{\[}}{{\[}}[0,   1,   2,   3]],
  // CHECK-NEXT: {{\[}}[2,   3,   0,   1]],
  // CHECK-NEXT: {{\[}}[1,   0,   3,   2]],
  // CHECK-NEXT: {{\[}}[3,   2,   1,   0]]]
  %ct, %cb, %cx, %ce = kvq.cache_stats %c : !kivi
  vector.print str "kivi tokens: "
  vector.print %ct : i64
  %ak, %av = kvq.cache_update %c[0], %k1, %v1 : !kivi, tensor<1x1x4xf32>, tensor<1x1x4xf32>
      -> tensor<?x1x4xf32>, tensor<?x1x4xf32>
  %avu = tensor.cast %av : tensor<?x1x4xf32> to tensor<*xf32>
  call @printMemrefF32(%avu) : (tensor<*xf32>) -> ()
  // Mean of those rows: [6, 6, 6, 6] / 4.
  // CHECK: {{\[}}{{\[}}[1.5,   1.5,   1.5,   1.5]]]
  %o2 = kvq.cache_attend %c[0], %q : !kivi, tensor<1x1x4xf32> -> tensor<1x1x4xf32>
  %o2u = tensor.cast %o2 : tensor<1x1x4xf32> to tensor<*xf32>
  call @printMemrefF32(%o2u) : (tensor<*xf32>) -> ()
  kvq.cache_destroy %c : !kivi
  return
}

func.func private @printMemrefF32(tensor<*xf32>)
