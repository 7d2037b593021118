// RUN: kvq-opt %s --kvq-to-llvm | mlir-translate --mlir-to-llvmir -o %t.ll
// RUN: %host_cc %t.ll %kvq_host_link -o %t
// RUN: not --crash stdbuf -o0 %t | FileCheck %s

// Keys [2 tokens, 2 heads, 6] grouped by 4 along a dynamic head_dim: the
// runtime sees rows of 12 elements, which 4 divides, and would write 3
// scales per row into buffers sized for 2 (6 / 4, rounded down). The
// compiled program stops before the call instead (the message is written
// unbuffered so that the abort does not lose it).

// CHECK: kvq: kvq.group_quant: group size 4 does not divide dimension 2
func.func @main() -> i32 {
  %k = arith.constant dense<1.0> : tensor<2x2x6xf32>
  %d = tensor.cast %k : tensor<2x2x6xf32> to tensor<?x?x?xf32>
  %c, %s, %z = kvq.group_quant %d axis per_token group 4 bits 2
      : tensor<?x?x?xf32> -> tensor<?x?x?xi8>, tensor<?x?x?xf16>, tensor<?x?x?xf16>
  %i = arith.constant 0 : index
  %first = tensor.extract %s[%i, %i, %i] : tensor<?x?x?xf16>
  %status = arith.fptosi %first : f16 to i32
  return %status : i32
}
