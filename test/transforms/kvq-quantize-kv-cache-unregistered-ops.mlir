// RUN: kvq-opt %s --allow-unregistered-dialect --kvq-quantize-kv-cache | FileCheck %s

// Ops of no registered dialect (allowed by the flag) are walked past, not
// dereferenced as a dialect's: the function is left as it is.
// CHECK-LABEL: func.func @unregistered(
// CHECK: "foo.bar"
func.func @unregistered(%a: tensor<2xf32>) -> tensor<2xf32> {
  %b = "foo.bar"(%a) : (tensor<2xf32>) -> tensor<2xf32>
  return %b : tensor<2xf32>
}
