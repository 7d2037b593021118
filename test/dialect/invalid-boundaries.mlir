// RUN: kvq-opt %s -split-input-file -verify-diagnostics

// Verifier bounds at their exact edge (one past the largest valid value, and
// the largest valid value itself): an off-by-one in a check fails here.

func.func @one_sink_too_many(%n: tensor<3xf32>) {
  // expected-error @below {{sink count 4 exceeds the 3 tokens it selects from}}
  %p = kvq.sink_select %n count 4 : tensor<3xf32> -> tensor<4xi64>
  return
}

// -----

func.func @every_token_a_sink(%n: tensor<3xf32>) -> tensor<3xi64> {
  %p = kvq.sink_select %n count 3 : tensor<3xf32> -> tensor<3xi64>
  return %p : tensor<3xi64>
}
