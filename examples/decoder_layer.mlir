// A decoder attention block over a kvq cache, as a model compiler would emit
// it after the projections: each generated token appends its K/V to the
// layer's quantized cache and its query heads attend over everything cached.
//
// The cache is written as plain fp16 here; the demo compiles the same graph
// once per method with `kvq-opt --kvq-configure-caches=method=...`, and the
// fp16 build is the reference the others are compared with.
//
// Shapes: 8 KV heads of head_dim 64; 16 query heads (grouped-query
// attention, 2 per KV head). Entry points are exported with C interfaces
// (`_mlir_ciface_*`) for the host program (tools/kvq-demo).

!cache = !kvq.cache<layers = 1, kv_heads = 8, head_dim = 64, element_type = f16,
    config = <method = fp16, key_bits = 16, value_bits = 16>>

/// A fresh, empty cache. The host owns it and frees it with @free_cache.
func.func @new_cache() -> !cache attributes {llvm.emit_c_interface} {
  %c = kvq.cache_create : !cache
  return %c : !cache
}

func.func @free_cache(%c: !cache) attributes {llvm.emit_c_interface} {
  kvq.cache_destroy %c : !cache
  return
}

/// The prompt: every prompt token's K/V at once (the cache's prefill).
func.func @prefill(%c: !cache, %k: tensor<?x8x64xf16>, %v: tensor<?x8x64xf16>)
    attributes {llvm.emit_c_interface} {
  kvq.cache_update %c[0], %k, %v : !cache, tensor<?x8x64xf16>, tensor<?x8x64xf16>
  return
}

/// One generated token: append its K/V, attend with its 16 query heads.
func.func @decode_step(%c: !cache, %k: tensor<1x8x64xf16>, %v: tensor<1x8x64xf16>,
                       %q: tensor<1x16x64xf32>) -> tensor<1x16x64xf32>
    attributes {llvm.emit_c_interface} {
  kvq.cache_update %c[0], %k, %v : !cache, tensor<1x8x64xf16>, tensor<1x8x64xf16>
  %out = kvq.cache_attend %c[0], %q : !cache, tensor<1x16x64xf32> -> tensor<1x16x64xf32>
  return %out : tensor<1x16x64xf32>
}

/// Bytes the cache holds (codes, scales, tables, outliers, fp16 rows).
func.func @cache_bytes(%c: !cache) -> i64 attributes {llvm.emit_c_interface} {
  %tokens, %bytes, %fp16_bytes, %bits = kvq.cache_stats %c : !cache
  return %bytes : i64
}

/// Bytes an fp16 cache would hold for the same tokens.
func.func @fp16_bytes(%c: !cache) -> i64 attributes {llvm.emit_c_interface} {
  %tokens, %bytes, %fp16_bytes, %bits = kvq.cache_stats %c : !cache
  return %fp16_bytes : i64
}

/// Stored bits per cached K/V element.
func.func @effective_bits(%c: !cache) -> f64 attributes {llvm.emit_c_interface} {
  %tokens, %bytes, %fp16_bytes, %bits = kvq.cache_stats %c : !cache
  return %bits : f64
}
