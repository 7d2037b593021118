// RUN: kvq-opt %s --kvq-to-llvm | mlir-translate --mlir-to-llvmir -o %t.ll
// RUN: %host_cc %t.ll %S/Inputs/primitive_ops_driver.c %kvq_host_link -o %t
// RUN: %t | FileCheck %s

// Every primitive kvq op compiled by --kvq-to-llvm and run, once with
// static shapes and once with every dimension dynamic. The host program
// (Inputs/primitive_ops_driver.c) builds seeded inputs, calls the runtime's
// C entry point on them directly, and requires each compiled function to
// return results of the expected shape with the same bytes. The expected
// values never come from the lowered code. primitive-ops-arm64.mlir runs
// this module on arm64.

// CHECK: group_quant static: match
// CHECK-NEXT: group_quant dynamic: match
// CHECK-NEXT: group_dequant static: match
// CHECK-NEXT: group_dequant dynamic: match
// CHECK-NEXT: nuq_fit static: match
// CHECK-NEXT: nuq_fit dynamic: match
// CHECK-NEXT: nuq_quant static: match
// CHECK-NEXT: nuq_quant dynamic: match
// CHECK-NEXT: nuq_dequant static: match
// CHECK-NEXT: nuq_dequant dynamic: match
// CHECK-NEXT: outlier_split static: match
// CHECK-NEXT: outlier_split dynamic: match
// CHECK-NEXT: outlier_screen static: match
// CHECK-NEXT: outlier_screen dynamic: match
// CHECK-NEXT: key_norm static: match
// CHECK-NEXT: key_norm dynamic: match
// CHECK-NEXT: sink_select static: match
// CHECK-NEXT: sink_select dynamic: match
// CHECK-NEXT: pending status: 0

// Keys and values are [tokens 8, kv_heads 2, head_dim 16].

func.func @group_quant_static(%x: tensor<8x2x16xf16>, %m: tensor<8x2x16xi1>)
    -> (tensor<8x2x16xi8>, tensor<8x2x2xf16>, tensor<8x2x2xf16>)
    attributes {llvm.emit_c_interface} {
  %c, %s, %z = kvq.group_quant %x axis per_token group 8 bits 2 exclude(%m : tensor<8x2x16xi1>)
      : tensor<8x2x16xf16> -> tensor<8x2x16xi8>, tensor<8x2x2xf16>, tensor<8x2x2xf16>
  return %c, %s, %z : tensor<8x2x16xi8>, tensor<8x2x2xf16>, tensor<8x2x2xf16>
}
func.func @group_quant_dynamic(%x: tensor<?x?x?xf16>, %m: tensor<?x?x?xi1>)
    -> (tensor<?x?x?xi8>, tensor<?x?x?xf16>, tensor<?x?x?xf16>)
    attributes {llvm.emit_c_interface} {
  %c, %s, %z = kvq.group_quant %x axis per_token group 8 bits 2 exclude(%m : tensor<?x?x?xi1>)
      : tensor<?x?x?xf16> -> tensor<?x?x?xi8>, tensor<?x?x?xf16>, tensor<?x?x?xf16>
  return %c, %s, %z : tensor<?x?x?xi8>, tensor<?x?x?xf16>, tensor<?x?x?xf16>
}

func.func @group_dequant_static(%c: tensor<8x2x16xi8>, %s: tensor<2x2x16xf16>, %z: tensor<2x2x16xf16>)
    -> tensor<8x2x16xf32> attributes {llvm.emit_c_interface} {
  %x = kvq.group_dequant %c, %s, %z axis per_channel group 4 bits 3
      : tensor<8x2x16xi8>, tensor<2x2x16xf16>, tensor<2x2x16xf16> -> tensor<8x2x16xf32>
  return %x : tensor<8x2x16xf32>
}
func.func @group_dequant_dynamic(%c: tensor<?x?x?xi8>, %s: tensor<?x?x?xf16>, %z: tensor<?x?x?xf16>)
    -> tensor<?x?x?xf32> attributes {llvm.emit_c_interface} {
  %x = kvq.group_dequant %c, %s, %z axis per_channel group 4 bits 3
      : tensor<?x?x?xi8>, tensor<?x?x?xf16>, tensor<?x?x?xf16> -> tensor<?x?x?xf32>
  return %x : tensor<?x?x?xf32>
}

func.func @nuq_fit_static(%x: tensor<8x2x16xf32>, %m: tensor<8x2x16xi1>)
    -> tensor<1x2x16x8xf16> attributes {llvm.emit_c_interface} {
  %l = kvq.nuq_fit %x axis per_channel group 8 bits 3 iters 4 exclude(%m : tensor<8x2x16xi1>)
      : tensor<8x2x16xf32> -> tensor<1x2x16x8xf16>
  return %l : tensor<1x2x16x8xf16>
}
func.func @nuq_fit_dynamic(%x: tensor<?x?x?xf32>, %m: tensor<?x?x?xi1>)
    -> tensor<?x?x?x?xf16> attributes {llvm.emit_c_interface} {
  %l = kvq.nuq_fit %x axis per_channel group 8 bits 3 iters 4 exclude(%m : tensor<?x?x?xi1>)
      : tensor<?x?x?xf32> -> tensor<?x?x?x?xf16>
  return %l : tensor<?x?x?x?xf16>
}

func.func @nuq_quant_static(%x: tensor<8x2x16xf16>, %l: tensor<8x2x1x4xf16>)
    -> tensor<8x2x16xi8> attributes {llvm.emit_c_interface} {
  %c = kvq.nuq_quant %x, %l axis per_token group 16 bits 2
      : tensor<8x2x16xf16>, tensor<8x2x1x4xf16> -> tensor<8x2x16xi8>
  return %c : tensor<8x2x16xi8>
}
func.func @nuq_quant_dynamic(%x: tensor<?x?x?xf16>, %l: tensor<?x?x?x?xf16>)
    -> tensor<?x?x?xi8> attributes {llvm.emit_c_interface} {
  %c = kvq.nuq_quant %x, %l axis per_token group 16 bits 2
      : tensor<?x?x?xf16>, tensor<?x?x?x?xf16> -> tensor<?x?x?xi8>
  return %c : tensor<?x?x?xi8>
}

func.func @nuq_dequant_static(%c: tensor<8x2x16xi8>, %l: tensor<8x2x1x4xf16>)
    -> tensor<8x2x16xf16> attributes {llvm.emit_c_interface} {
  %x = kvq.nuq_dequant %c, %l axis per_token group 16 bits 2
      : tensor<8x2x16xi8>, tensor<8x2x1x4xf16> -> tensor<8x2x16xf16>
  return %x : tensor<8x2x16xf16>
}
func.func @nuq_dequant_dynamic(%c: tensor<?x?x?xi8>, %l: tensor<?x?x?x?xf16>)
    -> tensor<?x?x?xf16> attributes {llvm.emit_c_interface} {
  %x = kvq.nuq_dequant %c, %l axis per_token group 16 bits 2
      : tensor<?x?x?xi8>, tensor<?x?x?x?xf16> -> tensor<?x?x?xf16>
  return %x : tensor<?x?x?xf16>
}

func.func @outlier_split_static(%x: tensor<8x2x16xf32>, %m: tensor<8x2x16xi1>)
    -> (tensor<8x2x16xi1>, tensor<1x2x16xf32>) attributes {llvm.emit_c_interface} {
  %o, %t = kvq.outlier_split %x axis per_channel group 8 fraction 0.25 exclude(%m : tensor<8x2x16xi1>)
      : tensor<8x2x16xf32> -> tensor<8x2x16xi1>, tensor<1x2x16xf32>
  return %o, %t : tensor<8x2x16xi1>, tensor<1x2x16xf32>
}
func.func @outlier_split_dynamic(%x: tensor<?x?x?xf32>, %m: tensor<?x?x?xi1>)
    -> (tensor<?x?x?xi1>, tensor<?x?x?xf32>) attributes {llvm.emit_c_interface} {
  %o, %t = kvq.outlier_split %x axis per_channel group 8 fraction 0.25 exclude(%m : tensor<?x?x?xi1>)
      : tensor<?x?x?xf32> -> tensor<?x?x?xi1>, tensor<?x?x?xf32>
  return %o, %t : tensor<?x?x?xi1>, tensor<?x?x?xf32>
}

func.func @outlier_screen_static(%x: tensor<3x2x16xf32>, %t: tensor<2x16xf32>)
    -> tensor<3x2x16xi1> attributes {llvm.emit_c_interface} {
  %o = kvq.outlier_screen %x above %t : tensor<3x2x16xf32>, tensor<2x16xf32> -> tensor<3x2x16xi1>
  return %o : tensor<3x2x16xi1>
}
func.func @outlier_screen_dynamic(%x: tensor<?x?x?xf32>, %t: tensor<?x?xf32>)
    -> tensor<?x?x?xi1> attributes {llvm.emit_c_interface} {
  %o = kvq.outlier_screen %x above %t : tensor<?x?x?xf32>, tensor<?x?xf32> -> tensor<?x?x?xi1>
  return %o : tensor<?x?x?xi1>
}

func.func @key_norm_static(%k: tensor<8x2x16xf16>) -> tensor<8xf32>
    attributes {llvm.emit_c_interface} {
  %n = kvq.key_norm %k : tensor<8x2x16xf16> -> tensor<8xf32>
  return %n : tensor<8xf32>
}
func.func @key_norm_dynamic(%k: tensor<?x?x?xf16>) -> tensor<?xf32>
    attributes {llvm.emit_c_interface} {
  %n = kvq.key_norm %k : tensor<?x?x?xf16> -> tensor<?xf32>
  return %n : tensor<?xf32>
}

func.func @sink_select_static(%n: tensor<8xf32>) -> tensor<3xi64>
    attributes {llvm.emit_c_interface} {
  %p = kvq.sink_select %n count 3 : tensor<8xf32> -> tensor<3xi64>
  return %p : tensor<3xi64>
}
func.func @sink_select_dynamic(%n: tensor<?xf32>) -> tensor<?xi64>
    attributes {llvm.emit_c_interface} {
  %p = kvq.sink_select %n count 3 : tensor<?xf32> -> tensor<?xi64>
  return %p : tensor<?xi64>
}
