// A decoder attention block for one generated token, written against a kvq
// cache: project the hidden state to Q, K and V, append K/V to the layer's
// quantized cache, and attend over everything cached so far.
//
// The cache starts as plain fp16; `kvq-opt --kvq-configure-caches=method=...`
// turns the same graph into a KIVI, KIVI-Sink or KVQuant model.

!cache = !kvq.cache<layers = 2, kv_heads = 2, head_dim = 64, element_type = f16,
    config = <method = fp16, key_bits = 16, value_bits = 16>>

// Grouped-query attention: 4 query heads share 2 KV heads.
func.func @attention_layer_0(%cache: !cache, %hidden: tensor<1x256xf32>,
                             %wq: tensor<256x256xf32>, %wk: tensor<256x128xf32>,
                             %wv: tensor<256x128xf32>) -> tensor<1x4x64xf32> {
  %zero = arith.constant 0.0 : f32
  %q_init = tensor.empty() : tensor<1x256xf32>
  %q_acc = linalg.fill ins(%zero : f32) outs(%q_init : tensor<1x256xf32>) -> tensor<1x256xf32>
  %q_flat = linalg.matmul ins(%hidden, %wq : tensor<1x256xf32>, tensor<256x256xf32>)
                          outs(%q_acc : tensor<1x256xf32>) -> tensor<1x256xf32>
  %kv_init = tensor.empty() : tensor<1x128xf32>
  %kv_acc = linalg.fill ins(%zero : f32) outs(%kv_init : tensor<1x128xf32>) -> tensor<1x128xf32>
  %k_flat = linalg.matmul ins(%hidden, %wk : tensor<1x256xf32>, tensor<256x128xf32>)
                          outs(%kv_acc : tensor<1x128xf32>) -> tensor<1x128xf32>
  %v_flat = linalg.matmul ins(%hidden, %wv : tensor<1x256xf32>, tensor<256x128xf32>)
                          outs(%kv_acc : tensor<1x128xf32>) -> tensor<1x128xf32>

  %q = tensor.expand_shape %q_flat [[0], [1, 2]] output_shape [1, 4, 64]
      : tensor<1x256xf32> into tensor<1x4x64xf32>
  %k32 = tensor.expand_shape %k_flat [[0], [1, 2]] output_shape [1, 2, 64]
      : tensor<1x128xf32> into tensor<1x2x64xf32>
  %v32 = tensor.expand_shape %v_flat [[0], [1, 2]] output_shape [1, 2, 64]
      : tensor<1x128xf32> into tensor<1x2x64xf32>
  %k = arith.truncf %k32 : tensor<1x2x64xf32> to tensor<1x2x64xf16>
  %v = arith.truncf %v32 : tensor<1x2x64xf32> to tensor<1x2x64xf16>

  kvq.cache_update %cache[0], %k, %v : !cache, tensor<1x2x64xf16>, tensor<1x2x64xf16>
  %out = kvq.cache_attend %cache[0], %q : !cache, tensor<1x4x64xf32> -> tensor<1x4x64xf32>
  return %out : tensor<1x4x64xf32>
}

// Byte accounting of the whole cache after a step.
func.func @cache_report(%cache: !cache) -> (i64, i64, f64) {
  %tokens, %bytes, %fp16_bytes, %bits = kvq.cache_stats %cache : !cache
  return %bytes, %fp16_bytes, %bits : i64, i64, f64
}
