// RUN: kvq-opt %s --kvq-to-metal | FileCheck %s --check-prefix=METAL
// RUN: kvq-opt %s --kvq-to-llvm | FileCheck %s --check-prefix=LLVM
// RUN: kvq-opt %s --kvq-to-llvm="on-error=report" | FileCheck %s --check-prefix=REPORT

// Both pipelines start from tensors. --kvq-to-metal stops at the Metal
// calls (func/memref level); --kvq-to-llvm goes down to the LLVM dialect.

// The pipeline starts from tensors and stops at the Metal calls.
// METAL-LABEL: func.func @from_tensors
// METAL-SAME: (%{{.*}}: memref<16x2x64xf16>) -> memref<16xf32>
// METAL: call @kvq_metal_key_norm
// METAL-NOT: llvm.func
func.func @from_tensors(%v: tensor<16x2x64xf16>) -> tensor<16xf32> {
  %n = kvq.key_norm %v : tensor<16x2x64xf16> -> tensor<16xf32>
  return %n : tensor<16xf32>
}

// LLVM: llvm.func @kvq_key_norm(!llvm.ptr, i32, i64, i32, i32, !llvm.ptr) -> i32
// LLVM-LABEL: llvm.func @from_tensors
// LLVM: llvm.call @kvq_key_norm(
// LLVM: llvm.call @kvq_check_status(
// LLVM: llvm.call @abort
// LLVM-NOT: kvq.
// LLVM-NOT: func.func
// REPORT-LABEL: llvm.func @from_tensors
// REPORT: llvm.call @kvq_check_status(
// REPORT-NOT: llvm.call @abort
