// RUN: kvq-opt %s --kvq-configure-caches="method=kvquant bits=2" | FileCheck %s

// The RoPE of a pre-RoPE key cache says what the keys arriving at the cache
// are, not how they are quantized: a change of method keeps it (dropping it
// would feed pre-RoPE keys to a cache that attends with them unrotated).

// CHECK: !cache = !kvq.cache<layers = 1, kv_heads = 2, head_dim = 64, element_type = f16, config = <method = kvquant, key_bits = 2, value_bits = 2, rope = <theta = 1.000000e+04, style = interleaved>>>
!cache = !kvq.cache<layers = 1, kv_heads = 2, head_dim = 64, element_type = f16,
    config = <method = kivi, key_bits = 2, value_bits = 2,
              rope = <theta = 10000.0, style = interleaved>>>

// CHECK-LABEL: func.func @decode_step(%{{.*}}: !cache,
func.func @decode_step(%c: !cache, %k: tensor<1x2x64xf16>, %v: tensor<1x2x64xf16>) {
  kvq.cache_update %c[0], %k, %v : !cache, tensor<1x2x64xf16>, tensor<1x2x64xf16>
  return
}
