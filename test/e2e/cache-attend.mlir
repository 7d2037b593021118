// REQUIRES: mlir-runner
// RUN: kvq-opt %s --kvq-to-llvm | %kvq_run | FileCheck %s

// A KIVI 2-bit cache (G = 4, no residual window) compiled and run. The data
// is exactly representable: each key channel over the 4 tokens and each
// value token over its 4 channels spans [0, 3] with integer steps, so the
// codes reproduce it exactly and everything printed is checkable by hand.

!kivi = !kvq.cache<layers = 1, kv_heads = 1, head_dim = 4, element_type = f32,
    config = <method = kivi, key_bits = 2, value_bits = 2, group_size = 4,
              residual_length = 0>>
!fp16 = !kvq.cache<layers = 1, kv_heads = 1, head_dim = 4, element_type = f32,
    config = <method = fp16, key_bits = 16, value_bits = 16>>

func.func @main() {
  %k = arith.constant dense<[[[0.0, 3.0, 1.0, 2.0]], [[1.0, 2.0, 0.0, 3.0]],
                             [[2.0, 1.0, 3.0, 0.0]], [[3.0, 0.0, 2.0, 1.0]]]> : tensor<4x1x4xf32>
  %v = arith.constant dense<[[[0.0, 1.0, 2.0, 3.0]], [[3.0, 2.0, 1.0, 0.0]],
                             [[1.0, 0.0, 3.0, 2.0]], [[0.0, 3.0, 0.0, 3.0]]]> : tensor<4x1x4xf32>
  %c = kvq.cache_create : !kivi

  // Update-and-fetch returns the dequantized cache: here the input itself.
  %ak, %av = kvq.cache_update %c[0], %k, %v : !kivi, tensor<4x1x4xf32>, tensor<4x1x4xf32>
      -> tensor<?x1x4xf32>, tensor<?x1x4xf32>
  %avu = tensor.cast %av : tensor<?x1x4xf32> to tensor<*xf32>
  // CHECK: sizes = [4, 1, 4]
  // CHECK-NEXT: {{\[}}{{\[}}[0,   1,   2,   3]],
  // CHECK-NEXT: {{\[}}[3,   2,   1,   0]],
  // CHECK-NEXT: {{\[}}[1,   0,   3,   2]],
  // CHECK-NEXT: {{\[}}[0,   3,   0,   3]]]
  call @printMemrefF32(%avu) : (tensor<*xf32>) -> ()

  // A zero query weighs every token equally: the mean of the value rows.
  %q = arith.constant dense<0.0> : tensor<1x1x4xf32>
  %o = kvq.cache_attend %c[0], %q : !kivi, tensor<1x1x4xf32> -> tensor<1x1x4xf32>
  %ou = tensor.cast %o : tensor<1x1x4xf32> to tensor<*xf32>
  // CHECK: sizes = [1, 1, 4]
  // CHECK-NEXT: {{\[}}{{\[}}[1,   1.5,   1.5,   2]]]
  call @printMemrefF32(%ou) : (tensor<*xf32>) -> ()

  // Bytes: 32 codes x 2 bits = 8; keys 4 channels x (scale + zero) x 2 B =
  // 16; values 4 tokens x 1 group x 4 B = 16: 40 of fp16's 64 bytes, so
  // 40 * 8 / 32 elements = 10 effective bits.
  %tokens, %bytes, %fp16_bytes, %bits = kvq.cache_stats %c : !kivi
  // CHECK: 4
  // CHECK-NEXT: 40
  // CHECK-NEXT: 64
  // CHECK-NEXT: 10
  vector.print %tokens : i64
  vector.print %bytes : i64
  vector.print %fp16_bytes : i64
  vector.print %bits : f64
  kvq.cache_destroy %c : !kivi

  // The fp16 baseline keeps every token as is: 64 bytes, 16 bits.
  %f = kvq.cache_create : !fp16
  kvq.cache_update %f[0], %k, %v : !fp16, tensor<4x1x4xf32>, tensor<4x1x4xf32>
  %ft, %fb, %ff, %fbits = kvq.cache_stats %f[0] : !fp16
  // CHECK-NEXT: 64
  // CHECK-NEXT: 16
  vector.print %fb : i64
  vector.print %fbits : f64
  kvq.cache_destroy %f : !fp16
  return
}

func.func private @printMemrefF32(tensor<*xf32>)
