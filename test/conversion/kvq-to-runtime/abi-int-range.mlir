// RUN: kvq-opt %s --convert-kvq-to-runtime | FileCheck %s

// The largest group size, sink count and Lloyd iterations the verifier
// accepts (test/dialect/invalid-abi-ints.mlir) reach the runtime unchanged.

// CHECK-LABEL: func.func @largest
// CHECK: call @kvq_group_quant(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %c2147483647_i32{{[_0-9]*}},
// CHECK: call @kvq_nuq_fit(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %c2147483647_i32{{[_0-9]*}}, %{{.*}}, %c1000_i32{{[_0-9]*}},
// CHECK: call @kvq_sink_select(%{{.*}}, %{{.*}}, %c2147483647_i32{{[_0-9]*}},
func.func @largest(%k: memref<8x?xf16>, %n: memref<?xf32>) {
  %c, %s, %z = kvq.group_quant %k axis per_token group 2147483647 bits 2
      : memref<8x?xf16> -> memref<8x?xi8>, memref<8x?xf16>, memref<8x?xf16>
  %l = kvq.nuq_fit %k axis per_token group 2147483647 bits 3 iters 1000
      : memref<8x?xf16> -> memref<8x?x8xf16>
  %p = kvq.sink_select %n count 2147483647 : memref<?xf32> -> memref<2147483647xi64>
  return
}
