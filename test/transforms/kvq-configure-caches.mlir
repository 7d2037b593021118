// RUN: kvq-opt %s --kvq-configure-caches="method=kivi_sink bits=2 sinks=5" | FileCheck %s --check-prefix=SINK
// RUN: kvq-opt %s --kvq-configure-caches="method=kvquant outlier-fraction=0.02 kvquant-sinks=2" | FileCheck %s --check-prefix=NUQ
// RUN: kvq-opt %s --kvq-configure-caches="key-bits=4 residual-mode=block residual-length=64" | FileCheck %s --check-prefix=KEEP
// RUN: not kvq-opt %s --kvq-configure-caches="method=gptq" 2>&1 | FileCheck %s --check-prefix=BADMETHOD
// RUN: not kvq-opt %s --kvq-configure-caches="method=kivi group-size=48" 2>&1 | FileCheck %s --check-prefix=BADGROUP
// RUN: not kvq-opt %s --kvq-configure-caches="bits=5" 2>&1 | FileCheck %s --check-prefix=BADBITS
// RUN: not kvq-opt %s --kvq-configure-caches="residual-mode=ring" 2>&1 | FileCheck %s --check-prefix=BADMODE
// RUN: not kvq-opt %s --kvq-configure-caches="sinks=5" 2>&1 | FileCheck %s --check-prefix=KIVISINKS
// RUN: kvq-opt %s --kvq-configure-caches="method=kivi_sink" | FileCheck %s --check-prefix=SINKDEFAULT
// RUN: not kvq-opt %s --kvq-configure-caches="method=fp16 bits=4" 2>&1 | FileCheck %s --check-prefix=FP16BITS
// RUN: not kvq-opt %s --kvq-configure-caches="bits=two" 2>&1 | FileCheck %s --check-prefix=NOTINT

// The pass rewrites the cache type everywhere: alias, signatures, results.

// SINK: !cache = !kvq.cache<layers = 2, kv_heads = 2, head_dim = 64, element_type = f16, config = <method = kivi_sink, key_bits = 2, value_bits = 2, n_sink_tokens = 5>>
// SINK-NOT: method = fp16
// NUQ: !cache = !kvq.cache<layers = 2, kv_heads = 2, head_dim = 64, element_type = f16, config = <method = kvquant, key_bits = 3, value_bits = 3, outlier_fraction = 2.000000e-02, kvquant_n_sink = 2>>
// KEEP: !cache = !kvq.cache<layers = 2, kv_heads = 2, head_dim = 64, element_type = f16, config = <method = kivi, key_bits = 4, value_bits = 2, residual_length = 64, residual_mode = block>>
// Option values are parsed as the dialect spells its enums (one place, the
// .td file); a bad one names the option. Configuration errors point at the
// first op that uses the cache (here the function's signature).
// BADMETHOD: for the --method option: 'gptq' is not one of fp16, kivi, kivi_sink or kvquant
// BADGROUP: kvq-configure-caches.mlir:[[@LINE+16]]:1: error: kvq-configure-caches: group_size 48 does not divide head_dim 64
// BADBITS: error: kvq-configure-caches: unsupported key_bits 5; supported bit widths are 2, 3, 4 and 8
// BADMODE: for the --residual-mode option: 'ring' is not one of sliding or block
// fp16 stores fp16 whatever bits say: asking for bits is an error, not a
// configuration that prints key_bits = 4 and means nothing.
// FP16BITS: error: kvq-configure-caches: bits, key-bits and value-bits do not apply to method fp16 (it stores fp16 K/V)
// NOTINT: for the --bits option: 'two' is not an integer
// Plain KIVI keeps no sinks (the runtime's rule, kvq/config_limits.h); an
// unset n_sink_tokens is the method's default (5 for kivi_sink).
// KIVISINKS: error: kvq-configure-caches: n_sink_tokens = 5 needs method kivi_sink
// SINKDEFAULT: !cache = !kvq.cache<layers = 2, kv_heads = 2, head_dim = 64, element_type = f16, config = <method = kivi_sink, key_bits = 2, value_bits = 2>>
!cache = !kvq.cache<layers = 2, kv_heads = 2, head_dim = 64, element_type = f16,
    config = <method = kivi, key_bits = 2, value_bits = 2>>

// SINK-LABEL: func.func @decode_step
// SINK-SAME: (%{{.*}}: !cache,
func.func @decode_step(%c: !cache, %k: tensor<1x2x64xf16>, %v: tensor<1x2x64xf16>)
    -> !cache {
  // SINK: kvq.cache_update %{{.*}}[1], %{{.*}}, %{{.*}} : !cache,
  kvq.cache_update %c[1], %k, %v : !cache, tensor<1x2x64xf16>, tensor<1x2x64xf16>
  return %c : !cache
}

// SINK-LABEL: func.func @make
// SINK: kvq.cache_create : !cache
func.func @make() -> !cache {
  %c = kvq.cache_create : !cache
  return %c : !cache
}
