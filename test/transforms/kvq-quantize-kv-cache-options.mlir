// RUN: not kvq-opt %s --kvq-quantize-kv-cache="bits=0 group-size=-1" 2>&1 | FileCheck %s --check-prefix=BITS
// RUN: not kvq-opt %s --kvq-quantize-kv-cache="group-size=-1" 2>&1 | FileCheck %s --check-prefix=GROUP
// RUN: not kvq-opt %s --kvq-quantize-kv-cache="method=fp16 bits=4" 2>&1 | FileCheck %s --check-prefix=FP16
// RUN: kvq-opt %s --kvq-quantize-kv-cache="method=kivi bits=4" | FileCheck %s --check-prefix=OK

// Options are checked before the pass looks for a cache: a bad one is an
// error even on a function with no cache at all (it used to pass silently).

// BITS: error: kvq-quantize-kv-cache: unsupported key_bits 0
// GROUP: error: kvq-quantize-kv-cache: {{.*}}group
// FP16: error: kvq-quantize-kv-cache:
// OK-LABEL: func.func @no_cache
func.func @no_cache(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
