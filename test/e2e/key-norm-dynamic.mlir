// REQUIRES: mlir-runner
// RUN: kvq-opt %s --kvq-to-llvm | %kvq_run | FileCheck %s

// kvq.key_norm on keys whose kv_heads and head_dim are dynamic: the lowering
// reads both from the buffer (it once passed the static size -1 and the
// runtime refused). Keys [2 tokens, 2 heads, 2]: token 0 has head rows
// (3, 4) and (0, 8), norms 5 and 8, mean 6.5; token 1 has (6, 8) and
// (5, 12), norms 10 and 13, mean 11.5.

func.func @main() {
  %k = arith.constant dense<[[[3.0, 4.0], [0.0, 8.0]],
                             [[6.0, 8.0], [5.0, 12.0]]]> : tensor<2x2x2xf32>
  %d = tensor.cast %k : tensor<2x2x2xf32> to tensor<?x?x?xf32>
  %n = kvq.key_norm %d : tensor<?x?x?xf32> -> tensor<?xf32>
  %u = tensor.cast %n : tensor<?xf32> to tensor<*xf32>
  // CHECK: sizes = [2]
  // CHECK-NEXT: [6.5,  11.5]
  call @printMemrefF32(%u) : (tensor<*xf32>) -> ()
  return
}

func.func private @printMemrefF32(tensor<*xf32>)
