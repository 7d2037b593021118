// fp16 stores keys and values unquantized: #kvq.config<method = fp16> is
// complete (key_bits and value_bits are implied, 16), prints without them,
// and reads back the same; writing 16 explicitly is the same attribute.
// RUN: kvq-opt %s | FileCheck %s
// RUN: kvq-opt %s | kvq-opt | FileCheck %s
// RUN: kvq-opt %s --mlir-print-op-generic | kvq-opt | FileCheck %s
// The lowering passes the implied 16 bits to the runtime's config.
// RUN: kvq-opt %s --one-shot-bufferize --convert-kvq-to-runtime | FileCheck %s --check-prefix=ABI

// CHECK: !cache = !kvq.cache<layers = 1, kv_heads = 2, head_dim = 64, element_type = f16, config = <method = fp16>>
// CHECK-NOT: key_bits
!short = !kvq.cache<layers = 1, kv_heads = 2, head_dim = 64, element_type = f16,
    config = <method = fp16>>
!long = !kvq.cache<layers = 1, kv_heads = 2, head_dim = 64, element_type = f16,
    config = <method = fp16, key_bits = 16, value_bits = 16>>

// CHECK-LABEL: func.func @same_type
// CHECK-SAME: (%{{.*}}: !cache, %{{.*}}: !cache)
func.func @same_type(%a: !short, %b: !long) {
  return
}

// CHECK-LABEL: func.func @create
// CHECK: kvq.cache_create : !cache
// ABI-LABEL: func.func @create
// method fp16 = 0, then key_bits and value_bits.
// ABI: call @kvq_cache_create_flat(%c0_i32{{[_0-9]*}}, %c16_i32{{[_0-9]*}}, %c16_i32{{[_0-9]*}},
func.func @create() -> !short {
  %c = kvq.cache_create : !short
  return %c : !short
}
