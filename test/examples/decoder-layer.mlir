// The demo's example graph (docs/ARCHITECTURE.md) stays valid and configurable for every method,
// and each configuration reaches the runtime as the C ABI's values: the
// expectations below are written from kvq/runtime.h (method enum fp16 = 0,
// kivi = 1, kivi_sink = 2, kvquant = 3; kvq_config_init's defaults: G = R =
// 32, sliding = 0, 5 sinks for kivi_sink only, 8 Lloyd iterations, refit
// every 128, 1 kvquant sink, kvquant group 32) and the graph's cache type
// (1 layer, 8 KV heads, head_dim 64, f16 = dtype 0, CPU backend 0).
// RUN: kvq-opt %kvq_src_root/examples/decoder_layer.mlir | FileCheck %s --check-prefixes=FP16,ALL
// RUN: kvq-opt %kvq_src_root/examples/decoder_layer.mlir --kvq-configure-caches=method=kivi | FileCheck %s --check-prefixes=KIVI,ALL
// RUN: kvq-opt %kvq_src_root/examples/decoder_layer.mlir --kvq-configure-caches=method=kivi_sink | FileCheck %s --check-prefixes=SINK,ALL
// RUN: kvq-opt %kvq_src_root/examples/decoder_layer.mlir --kvq-configure-caches=method=kvquant | FileCheck %s --check-prefixes=NUQ,ALL
// RUN: kvq-opt %kvq_src_root/examples/decoder_layer.mlir --one-shot-bufferize --convert-kvq-to-runtime | FileCheck %s --check-prefixes=FP16-ABI,ABI
// RUN: kvq-opt %kvq_src_root/examples/decoder_layer.mlir --kvq-configure-caches=method=kivi --one-shot-bufferize --convert-kvq-to-runtime | FileCheck %s --check-prefixes=KIVI-ABI,ABI
// RUN: kvq-opt %kvq_src_root/examples/decoder_layer.mlir --kvq-configure-caches=method=kivi_sink --one-shot-bufferize --convert-kvq-to-runtime | FileCheck %s --check-prefixes=SINK-ABI,ABI
// RUN: kvq-opt %kvq_src_root/examples/decoder_layer.mlir --kvq-configure-caches=method=kvquant --one-shot-bufferize --convert-kvq-to-runtime | FileCheck %s --check-prefixes=NUQ-ABI,ABI

// FP16: !cache = !kvq.cache<layers = 1, kv_heads = 8, head_dim = 64, element_type = f16, config = <method = fp16>>
// KIVI: !cache = !kvq.cache<layers = 1, kv_heads = 8, head_dim = 64, element_type = f16, config = <method = kivi, key_bits = 2, value_bits = 2>>
// SINK: !cache = !kvq.cache<layers = 1, kv_heads = 8, head_dim = 64, element_type = f16, config = <method = kivi_sink, key_bits = 2, value_bits = 2>>
// NUQ: !cache = !kvq.cache<layers = 1, kv_heads = 8, head_dim = 64, element_type = f16, config = <method = kvquant, key_bits = 3, value_bits = 3>>
// ALL-LABEL: func.func @new_cache
// ALL: kvq.cache_create
// ALL-LABEL: func.func @prefill
// ALL: kvq.cache_update %{{.*}}[0], %{{.*}}, %{{.*}} : !cache, tensor<?x8x64xf16>, tensor<?x8x64xf16>
// ALL-LABEL: func.func @decode_step
// ALL: kvq.cache_update %{{.*}}[0]
// ALL: kvq.cache_attend %{{.*}}[0], %{{.*}} : !cache, tensor<1x16x64xf32> -> tensor<1x16x64xf32>

// kvq_cache_create_flat(method, key_bits, value_bits, group_size,
//   residual_length, residual_mode, n_sink_tokens, outlier_fraction,
//   lloyd_iters, refit_interval, kvquant_n_sink, kvquant_group_size,
//   layers, kv_heads, head_dim, backend, rope_style, rope_theta, out)
// ABI-LABEL: func.func @new_cache
// FP16-ABI: call @kvq_cache_create_flat(%c0_i32{{[_0-9]*}}, %c16_i32{{[_0-9]*}}, %c16_i32{{[_0-9]*}}, %c32_i32{{[_0-9]*}}, %c32_i32{{[_0-9]*}}, %c0_i32{{[_0-9]*}}, %c0_i32{{[_0-9]*}}, %{{.*}}, %c8_i32{{[_0-9]*}}, %c128_i32{{[_0-9]*}}, %c1_i32{{[_0-9]*}}, %c32_i32{{[_0-9]*}}, %c1_i32{{[_0-9]*}}, %c8_i32{{[_0-9]*}}, %c64_i32{{[_0-9]*}}, %c0_i32{{[_0-9]*}}, %c0_i32{{[_0-9]*}}, %{{.*}}, %{{.*}})
// KIVI-ABI: call @kvq_cache_create_flat(%c1_i32{{[_0-9]*}}, %c2_i32{{[_0-9]*}}, %c2_i32{{[_0-9]*}}, %c32_i32{{[_0-9]*}}, %c32_i32{{[_0-9]*}}, %c0_i32{{[_0-9]*}}, %c0_i32{{[_0-9]*}}, %{{.*}}, %c8_i32{{[_0-9]*}}, %c128_i32{{[_0-9]*}}, %c1_i32{{[_0-9]*}}, %c32_i32{{[_0-9]*}}, %c1_i32{{[_0-9]*}}, %c8_i32{{[_0-9]*}}, %c64_i32{{[_0-9]*}}, %c0_i32{{[_0-9]*}}, %c0_i32{{[_0-9]*}}, %{{.*}}, %{{.*}})
// SINK-ABI: call @kvq_cache_create_flat(%c2_i32{{[_0-9]*}}, %c2_i32{{[_0-9]*}}, %c2_i32{{[_0-9]*}}, %c32_i32{{[_0-9]*}}, %c32_i32{{[_0-9]*}}, %c0_i32{{[_0-9]*}}, %c5_i32{{[_0-9]*}}, %{{.*}}, %c8_i32{{[_0-9]*}}, %c128_i32{{[_0-9]*}}, %c1_i32{{[_0-9]*}}, %c32_i32{{[_0-9]*}}, %c1_i32{{[_0-9]*}}, %c8_i32{{[_0-9]*}}, %c64_i32{{[_0-9]*}}, %c0_i32{{[_0-9]*}}, %c0_i32{{[_0-9]*}}, %{{.*}}, %{{.*}})
// NUQ-ABI: call @kvq_cache_create_flat(%c3_i32{{[_0-9]*}}, %c3_i32{{[_0-9]*}}, %c3_i32{{[_0-9]*}}, %c32_i32{{[_0-9]*}}, %c32_i32{{[_0-9]*}}, %c0_i32{{[_0-9]*}}, %c0_i32{{[_0-9]*}}, %{{.*}}, %c8_i32{{[_0-9]*}}, %c128_i32{{[_0-9]*}}, %c1_i32{{[_0-9]*}}, %c32_i32{{[_0-9]*}}, %c1_i32{{[_0-9]*}}, %c8_i32{{[_0-9]*}}, %c64_i32{{[_0-9]*}}, %c0_i32{{[_0-9]*}}, %c0_i32{{[_0-9]*}}, %{{.*}}, %{{.*}})
// kvq_cache_update(cache, layer 0, keys, values, tokens, dtype f16 = 0);
// one decode step is 1 token; attend gets 1 query step of 16 heads.
// ABI-LABEL: func.func @prefill
// ABI: call @kvq_cache_update(%{{.*}}, %c0_i32{{[_0-9]*}}, %{{.*}}, %{{.*}}, %{{.*}}, %c0_i32{{[_0-9]*}})
// ABI-LABEL: func.func @decode_step
// ABI: call @kvq_cache_update(%{{.*}}, %c0_i32{{[_0-9]*}}, %{{.*}}, %{{.*}}, %c1_i64{{[_0-9]*}}, %c0_i32{{[_0-9]*}})
// ABI: call @kvq_cache_attend(%{{.*}}, %c0_i32{{[_0-9]*}}, %{{.*}}, %c1_i64{{[_0-9]*}}, %c16_i32{{[_0-9]*}}, %{{.*}})
