// REQUIRES: mlir-runner
// RUN: kvq-opt %s --kvq-to-llvm | %kvq_run | FileCheck %s

// Uniform group quantization compiled and run against the runtime, on
// inputs whose codes, scales and reconstruction are exact by hand:
// group [0, 1, 2, 3] at 2 bits has scale (3 - 0) / 3 = 1 and zero 0, so
// codes = values; a constant group [10 x4] has scale 0, codes 0, zero 10.
// Per channel at 3 bits, the column 0..7 has scale 1: codes = values.

func.func @main() {
  %x = arith.constant dense<[[0.0, 1.0, 2.0, 3.0, 10.0, 10.0, 10.0, 10.0],
                             [3.0, 2.0, 1.0, 0.0, -1.0, -1.0, 2.0, 2.0]]> : tensor<2x8xf32>
  %c, %s, %z = kvq.group_quant %x axis per_token group 4 bits 2
      : tensor<2x8xf32> -> tensor<2x8xi8>, tensor<2x2xf16>, tensor<2x2xf16>
  %ci = arith.extui %c : tensor<2x8xi8> to tensor<2x8xi32>
  %cu = tensor.cast %ci : tensor<2x8xi32> to tensor<*xi32>
  // CHECK: sizes = [2, 8]
  // CHECK-NEXT: {{\[}}[0,   1,   2,   3,   0,   0,   0,   0],
  // CHECK-NEXT: [3,   2,   1,   0,   0,   0,   3,   3]]
  call @printMemrefI32(%cu) : (tensor<*xi32>) -> ()

  %s32 = arith.extf %s : tensor<2x2xf16> to tensor<2x2xf32>
  %su = tensor.cast %s32 : tensor<2x2xf32> to tensor<*xf32>
  // CHECK: sizes = [2, 2]
  // CHECK-NEXT: {{\[}}[1,   0],
  // CHECK-NEXT: [1,   1]]
  call @printMemrefF32(%su) : (tensor<*xf32>) -> ()

  %d = kvq.group_dequant %c, %s, %z axis per_token group 4 bits 2
      : tensor<2x8xi8>, tensor<2x2xf16>, tensor<2x2xf16> -> tensor<2x8xf32>
  %du = tensor.cast %d : tensor<2x8xf32> to tensor<*xf32>
  // CHECK: sizes = [2, 8]
  // CHECK-NEXT: {{\[}}[0,   1,   2,   3,   10,   10,   10,   10],
  // CHECK-NEXT: [3,   2,   1,   0,   -1,   -1,   2,   2]]
  call @printMemrefF32(%du) : (tensor<*xf32>) -> ()

  %col = arith.constant dense<[[0.0], [1.0], [2.0], [3.0], [4.0], [5.0], [6.0], [7.0]]> : tensor<8x1xf16>
  %cc, %cs, %cz = kvq.group_quant %col axis per_channel group 8 bits 3
      : tensor<8x1xf16> -> tensor<8x1xi8>, tensor<1x1xf16>, tensor<1x1xf16>
  %cci = arith.extui %cc : tensor<8x1xi8> to tensor<8x1xi32>
  %ccu = tensor.cast %cci : tensor<8x1xi32> to tensor<*xi32>
  // CHECK: sizes = [8, 1]
  // CHECK-NEXT: {{\[}}[0],
  // CHECK-NEXT: [1],
  // CHECK-NEXT: [2],
  // CHECK-NEXT: [3],
  // CHECK-NEXT: [4],
  // CHECK-NEXT: [5],
  // CHECK-NEXT: [6],
  // CHECK-NEXT: [7]]
  call @printMemrefI32(%ccu) : (tensor<*xi32>) -> ()
  return
}

func.func private @printMemrefI32(tensor<*xi32>)
func.func private @printMemrefF32(tensor<*xf32>)
