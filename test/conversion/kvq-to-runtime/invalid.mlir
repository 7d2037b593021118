// RUN: kvq-opt %s --convert-kvq-to-runtime -split-input-file -verify-diagnostics
// RUN: not kvq-opt %s --convert-kvq-to-runtime="target=cuda" 2>&1 | FileCheck %s --check-prefix=TARGET
// RUN: not kvq-opt %s --convert-kvq-to-runtime="on-error=ignore" 2>&1 | FileCheck %s --check-prefix=ONERROR

// Enum options (RuntimeTarget, OnRuntimeError in kvq/passes/Passes.h): a bad
// value stops at option parsing, naming the option; the module is not run
// (nor printed).
// TARGET: for the --target option: Cannot find option named 'cuda'!
// TARGET-NOT: func.func
// ONERROR: for the --on-error option: Cannot find option named 'ignore'!
// ONERROR-NOT: func.func

func.func @tensor_form(%v: tensor<16x2x64xf16>) -> tensor<16xf32> {
  // expected-error @below {{convert-kvq-to-runtime needs the memref form of kvq ops; run --one-shot-bufferize first (or use --kvq-to-llvm / --kvq-to-metal)}}
  %n = kvq.key_norm %v : tensor<16x2x64xf16> -> tensor<16xf32>
  return %n : tensor<16xf32>
}
