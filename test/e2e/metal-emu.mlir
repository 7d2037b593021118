// REQUIRES: mlir-runner, metal-emu
// RUN: kvq-opt %s --kvq-to-metal --convert-linalg-to-loops --expand-strided-metadata \
// RUN:   --lower-affine --convert-scf-to-cf --convert-to-llvm --reconcile-unrealized-casts \
// RUN:   | %kvq_run_metal | FileCheck %s

// The Metal lowering executed: --kvq-to-metal emits kvq_metal_* calls, and
// the Metal backend built on Linux (its MSL kernels compiled as C++ through
// the shim and run by the CPU grid executor) answers them. Same data and
// hand-checked answers as cache-attend.mlir and group-quant.mlir.

!cache = !kvq.cache<layers = 1, kv_heads = 1, head_dim = 4, element_type = f32,
    config = <method = kivi, key_bits = 2, value_bits = 2, group_size = 4,
              residual_length = 0>>

func.func @main() {
  %k = arith.constant dense<[[[0.0, 3.0, 1.0, 2.0]], [[1.0, 2.0, 0.0, 3.0]],
                             [[2.0, 1.0, 3.0, 0.0]], [[3.0, 0.0, 2.0, 1.0]]]> : tensor<4x1x4xf32>
  %v = arith.constant dense<[[[0.0, 1.0, 2.0, 3.0]], [[3.0, 2.0, 1.0, 0.0]],
                             [[1.0, 0.0, 3.0, 2.0]], [[0.0, 3.0, 0.0, 3.0]]]> : tensor<4x1x4xf32>
  %c = kvq.cache_create : !cache
  kvq.cache_update %c[0], %k, %v : !cache, tensor<4x1x4xf32>, tensor<4x1x4xf32>

  // A zero query: the mean of the (exactly stored) value rows.
  %q = arith.constant dense<0.0> : tensor<1x1x4xf32>
  %o = kvq.cache_attend %c[0], %q : !cache, tensor<1x1x4xf32> -> tensor<1x1x4xf32>
  %ou = tensor.cast %o : tensor<1x1x4xf32> to tensor<*xf32>
  // CHECK: sizes = [1, 1, 4]
  // CHECK-NEXT: {{\[}}{{\[}}[1,   1.5,   1.5,   2]]]
  call @printMemrefF32(%ou) : (tensor<*xf32>) -> ()

  // A stateless kernel with the device context: codes = values.
  %x = arith.constant dense<[[0.0, 1.0, 2.0, 3.0, 10.0, 10.0, 10.0, 10.0]]> : tensor<1x8xf32>
  %cc, %s, %z = kvq.group_quant %x axis per_token group 4 bits 2
      : tensor<1x8xf32> -> tensor<1x8xi8>, tensor<1x2xf16>, tensor<1x2xf16>
  %ci = arith.extui %cc : tensor<1x8xi8> to tensor<1x8xi32>
  %cu = tensor.cast %ci : tensor<1x8xi32> to tensor<*xi32>
  // CHECK: sizes = [1, 8]
  // CHECK-NEXT: {{\[}}[0,   1,   2,   3,   0,   0,   0,   0]]
  call @printMemrefI32(%cu) : (tensor<*xi32>) -> ()

  // 8 B of codes + 16 B key scales/zeros + 16 B value scales/zeros.
  %tokens, %bytes, %fp16_bytes, %bits = kvq.cache_stats %c : !cache
  // CHECK-NEXT: 40
  vector.print %bytes : i64
  kvq.cache_destroy %c : !cache
  return
}

func.func private @printMemrefF32(tensor<*xf32>)
func.func private @printMemrefI32(tensor<*xi32>)
