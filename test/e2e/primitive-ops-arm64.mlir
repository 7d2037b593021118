// REQUIRES: arm64
// RUN: kvq-opt %S/primitive-ops.mlir --kvq-to-llvm | mlir-translate --mlir-to-llvmir -o %t.ll
// RUN: llc -mtriple=aarch64-linux-gnu -mattr=+neon -filetype=obj %t.ll -o %t.arm64.o
// RUN: %arm64_cc %t.arm64.o %S/Inputs/primitive_ops_driver.c %kvq_arm64_link -o %t.arm64
// RUN: %arm64_run %t.arm64 | FileCheck %S/primitive-ops.mlir

// primitive-ops.mlir's module and host program built for arm64 (+neon) and
// run under qemu against the arm64 runtime (NEON kernel table): every
// compiled primitive op, static and dynamic, gives the bytes the runtime
// gives when called directly.
