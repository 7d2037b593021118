// RUN: kvq-opt %s -split-input-file -verify-diagnostics

// Integer attributes the lowering passes as the runtime's int32_t
// parameters are range-checked by the verifier: with a dynamic dimension no
// shape rule bounds them, and 2^32 + 4 would reach the runtime as 4.

func.func @group_quant_group_over_i32(%k: tensor<8x?xf16>) {
  // expected-error @below {{group size 4294967300 exceeds the runtime's limit of 2147483647}}
  %c, %s, %z = kvq.group_quant %k axis per_token group 4294967300 bits 2
      : tensor<8x?xf16> -> tensor<8x?xi8>, tensor<8x?xf16>, tensor<8x?xf16>
  return
}

// -----

func.func @group_dequant_group_over_i32(%c: tensor<8x?xi8>, %s: tensor<8x?xf16>, %z: tensor<8x?xf16>) {
  // expected-error @below {{group size 2147483648 exceeds the runtime's limit of 2147483647}}
  %x = kvq.group_dequant %c, %s, %z axis per_token group 2147483648 bits 2
      : tensor<8x?xi8>, tensor<8x?xf16>, tensor<8x?xf16> -> tensor<8x?xf32>
  return
}

// -----

func.func @nuq_fit_group_over_i32(%k: tensor<8x?xf16>) {
  // expected-error @below {{group size 4294967300 exceeds the runtime's limit of 2147483647}}
  %l = kvq.nuq_fit %k axis per_token group 4294967300 bits 3 iters 8
      : tensor<8x?xf16> -> tensor<8x?x8xf16>
  return
}

// -----

func.func @nuq_fit_iters_over_limit(%k: tensor<8x?xf16>) {
  // expected-error @below {{iters 1001 exceeds the runtime's limit of 1000}}
  %l = kvq.nuq_fit %k axis per_token group 64 bits 3 iters 1001
      : tensor<8x?xf16> -> tensor<8x?x8xf16>
  return
}

// -----

func.func @nuq_fit_iters_over_i32(%k: tensor<8x?xf16>) {
  // expected-error @below {{iters 4294967304 exceeds the runtime's limit of 1000}}
  %l = kvq.nuq_fit %k axis per_token group 64 bits 3 iters 4294967304
      : tensor<8x?xf16> -> tensor<8x?x8xf16>
  return
}

// -----

func.func @nuq_quant_group_over_i32(%k: tensor<8x?xf16>, %l: tensor<8x?x8xf16>) {
  // expected-error @below {{group size 4294967300 exceeds the runtime's limit of 2147483647}}
  %c = kvq.nuq_quant %k, %l axis per_token group 4294967300 bits 3
      : tensor<8x?xf16>, tensor<8x?x8xf16> -> tensor<8x?xi8>
  return
}

// -----

func.func @nuq_dequant_group_over_i32(%c: tensor<8x?xi8>, %l: tensor<8x?x8xf16>) {
  // expected-error @below {{group size 4294967300 exceeds the runtime's limit of 2147483647}}
  %x = kvq.nuq_dequant %c, %l axis per_token group 4294967300 bits 3
      : tensor<8x?xi8>, tensor<8x?x8xf16> -> tensor<8x?xf16>
  return
}

// -----

func.func @outlier_split_group_over_i32(%k: tensor<8x?xf16>) {
  // expected-error @below {{group size 4294967300 exceeds the runtime's limit of 2147483647}}
  %m, %t = kvq.outlier_split %k axis per_token group 4294967300 fraction 0.01
      : tensor<8x?xf16> -> tensor<8x?xi1>, tensor<8x?xf32>
  return
}

// -----

func.func @sink_select_count_over_i32(%n: tensor<?xf32>) {
  // expected-error @below {{sink count 4294967300 exceeds the runtime's limit of 2147483647}}
  %p = kvq.sink_select %n count 4294967300 : tensor<?xf32> -> tensor<4294967300xi64>
  return
}

// -----

// The largest values accepted.
func.func @largest_accepted(%k: tensor<8x?xf16>, %n: tensor<?xf32>) {
  %c, %s, %z = kvq.group_quant %k axis per_token group 2147483647 bits 2
      : tensor<8x?xf16> -> tensor<8x?xi8>, tensor<8x?xf16>, tensor<8x?xf16>
  %l = kvq.nuq_fit %k axis per_token group 2147483647 bits 3 iters 1000
      : tensor<8x?xf16> -> tensor<8x?x8xf16>
  %p = kvq.sink_select %n count 2147483647 : tensor<?xf32> -> tensor<2147483647xi64>
  return
}
