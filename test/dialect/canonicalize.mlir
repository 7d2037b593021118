// RUN: kvq-opt %s -canonicalize -split-input-file | FileCheck %s

// Exact folds only: quantization is lossy, so dequant(quant(x)) stays.

// CHECK-LABEL: func.func @no_outliers_folds_to_constants
// CHECK-DAG: %[[MASK:.*]] = arith.constant dense<false> : tensor<128x8x64xi1>
// CHECK-DAG: %[[THR:.*]] = arith.constant dense<0x7F800000> : tensor<1x8x64xf32>
// CHECK-NOT: kvq.outlier_split
// CHECK: return %[[MASK]], %[[THR]]
func.func @no_outliers_folds_to_constants(%k: tensor<128x8x64xf16>)
    -> (tensor<128x8x64xi1>, tensor<1x8x64xf32>) {
  %m, %t = kvq.outlier_split %k axis per_channel group 128 fraction 0.0
      : tensor<128x8x64xf16> -> tensor<128x8x64xi1>, tensor<1x8x64xf32>
  return %m, %t : tensor<128x8x64xi1>, tensor<1x8x64xf32>
}

// -----

// CHECK-LABEL: func.func @some_outliers_stay
// CHECK: kvq.outlier_split
func.func @some_outliers_stay(%k: tensor<128x8x64xf16>)
    -> (tensor<128x8x64xi1>, tensor<1x8x64xf32>) {
  %m, %t = kvq.outlier_split %k axis per_channel group 128 fraction 0.01
      : tensor<128x8x64xf16> -> tensor<128x8x64xi1>, tensor<1x8x64xf32>
  return %m, %t : tensor<128x8x64xi1>, tensor<1x8x64xf32>
}

// -----

// CHECK-LABEL: func.func @no_outliers_dynamic_shape_stays
// CHECK: kvq.outlier_split
func.func @no_outliers_dynamic_shape_stays(%k: tensor<?x8x64xf16>)
    -> (tensor<?x8x64xi1>, tensor<?x8x64xf32>) {
  %m, %t = kvq.outlier_split %k axis per_channel group 1 fraction 0.0
      : tensor<?x8x64xf16> -> tensor<?x8x64xi1>, tensor<?x8x64xf32>
  return %m, %t : tensor<?x8x64xi1>, tensor<?x8x64xf32>
}

// -----

// CHECK-LABEL: func.func @select_no_sinks
// CHECK: %[[P:.*]] = arith.constant dense<> : tensor<0xi64>
// CHECK-NOT: kvq.sink_select
// CHECK: return %[[P]]
func.func @select_no_sinks(%n: tensor<128xf32>) -> tensor<0xi64> {
  %p = kvq.sink_select %n count 0 : tensor<128xf32> -> tensor<0xi64>
  return %p : tensor<0xi64>
}

// -----

// CHECK-LABEL: func.func @select_every_token
// CHECK: %[[P:.*]] = arith.constant dense<[0, 1, 2, 3]> : tensor<4xi64>
// CHECK-NOT: kvq.sink_select
// CHECK: return %[[P]]
func.func @select_every_token(%n: tensor<4xf32>) -> tensor<4xi64> {
  %p = kvq.sink_select %n count 4 : tensor<4xf32> -> tensor<4xi64>
  return %p : tensor<4xi64>
}

// -----

// CHECK-LABEL: func.func @select_some_stays
// CHECK: kvq.sink_select
func.func @select_some_stays(%n: tensor<4xf32>) -> tensor<2xi64> {
  %p = kvq.sink_select %n count 2 : tensor<4xf32> -> tensor<2xi64>
  return %p : tensor<2xi64>
}

// -----

// CHECK-LABEL: func.func @quant_round_trip_is_not_folded
// CHECK: kvq.group_quant
// CHECK: kvq.group_dequant
func.func @quant_round_trip_is_not_folded(%v: tensor<4x64xf16>) -> tensor<4x64xf16> {
  %c, %s, %z = kvq.group_quant %v axis per_token group 32 bits 8
      : tensor<4x64xf16> -> tensor<4x64xi8>, tensor<4x2xf16>, tensor<4x2xf16>
  %x = kvq.group_dequant %c, %s, %z axis per_token group 32 bits 8
      : tensor<4x64xi8>, tensor<4x2xf16>, tensor<4x2xf16> -> tensor<4x64xf16>
  return %x : tensor<4x64xf16>
}
