// RUN: kvq-opt %s -split-input-file -verify-diagnostics

// One case per verifier message of the kvq attributes, types and ops.

// expected-error @below {{unsupported key_bits 5; supported bit widths are 2, 3, 4 and 8}}
// expected-error @below {{failed to parse Kvq_CacheType parameter 'config'}}
func.func @config_key_bits(%c: !kvq.cache<layers = 1, kv_heads = 1, head_dim = 64, element_type = f16, config = <method = kivi, key_bits = 5, value_bits = 2>>)

// -----

// expected-error @below {{unsupported value_bits 7; supported bit widths are 2, 3, 4 and 8}}
// expected-error @below {{failed to parse Kvq_CacheType parameter 'config'}}
func.func @config_value_bits(%c: !kvq.cache<layers = 1, kv_heads = 1, head_dim = 64, element_type = f16, config = <method = kvquant, key_bits = 3, value_bits = 7>>)

// -----

// Only fp16 implies its bits (16); a quantized method must be given them.
// expected-error @below {{unsupported key_bits 16 (fp16's width, which #kvq.config implies when it is left out); supported bit widths are 2, 3, 4 and 8}}
// expected-error @below {{failed to parse Kvq_CacheType parameter 'config'}}
func.func @config_kivi_without_bits(%c: !kvq.cache<layers = 1, kv_heads = 1, head_dim = 64, element_type = f16, config = <method = kivi>>)

// -----

// expected-error @below {{unsupported value_bits 16 (fp16's width, which #kvq.config implies when it is left out); supported bit widths are 2, 3, 4 and 8}}
// expected-error @below {{failed to parse Kvq_CacheType parameter 'config'}}
func.func @config_kvquant_without_value_bits(%c: !kvq.cache<layers = 1, kv_heads = 1, head_dim = 64, element_type = f16, config = <method = kvquant, key_bits = 3>>)

// -----

// expected-error @below {{group_size 0 must be positive}}
// expected-error @below {{failed to parse Kvq_CacheType parameter 'config'}}
func.func @config_group_zero(%c: !kvq.cache<layers = 1, kv_heads = 1, head_dim = 64, element_type = f16, config = <method = kivi, key_bits = 2, value_bits = 2, group_size = 0>>)

// -----

// expected-error @below {{residual_length -1 must be non-negative}}
// expected-error @below {{failed to parse Kvq_CacheType parameter 'config'}}
func.func @config_residual_negative(%c: !kvq.cache<layers = 1, kv_heads = 1, head_dim = 64, element_type = f16, config = <method = kivi, key_bits = 2, value_bits = 2, residual_length = -1>>)

// -----

// Plain KIVI keeps no sinks: the runtime's rule and message.
// expected-error @below {{n_sink_tokens = 5 needs method kivi_sink}}
// expected-error @below {{failed to parse Kvq_CacheType parameter 'config'}}
func.func @config_kivi_with_sinks(%c: !kvq.cache<layers = 1, kv_heads = 1, head_dim = 64, element_type = f16, config = <method = kivi, key_bits = 2, value_bits = 2, n_sink_tokens = 5>>)

// -----

// expected-error @below {{n_sink_tokens -5 must be non-negative}}
// expected-error @below {{failed to parse Kvq_CacheType parameter 'config'}}
func.func @config_sinks_negative(%c: !kvq.cache<layers = 1, kv_heads = 1, head_dim = 64, element_type = f16, config = <method = kivi_sink, key_bits = 2, value_bits = 2, n_sink_tokens = -5>>)

// -----

// expected-error @below {{lloyd_iters -1 must be non-negative}}
// expected-error @below {{failed to parse Kvq_CacheType parameter 'config'}}
func.func @config_lloyd_negative(%c: !kvq.cache<layers = 1, kv_heads = 1, head_dim = 64, element_type = f16, config = <method = kvquant, key_bits = 3, value_bits = 3, lloyd_iters = -1>>)

// -----

// expected-error @below {{refit_interval -2 must be non-negative}}
// expected-error @below {{failed to parse Kvq_CacheType parameter 'config'}}
func.func @config_refit_negative(%c: !kvq.cache<layers = 1, kv_heads = 1, head_dim = 64, element_type = f16, config = <method = kvquant, key_bits = 3, value_bits = 3, refit_interval = -2>>)

// -----

// expected-error @below {{kvquant_n_sink -1 must be non-negative}}
// expected-error @below {{failed to parse Kvq_CacheType parameter 'config'}}
func.func @config_kvquant_sinks_negative(%c: !kvq.cache<layers = 1, kv_heads = 1, head_dim = 64, element_type = f16, config = <method = kvquant, key_bits = 3, value_bits = 3, kvquant_n_sink = -1>>)

// -----

// expected-error @below {{kvquant_group_size 0 has no effect in kvq (key levels are fit per channel over the prefill, value levels per token over head_dim); leave it at 32}}
// expected-error @below {{failed to parse Kvq_CacheType parameter 'config'}}
func.func @config_kvquant_group_zero(%c: !kvq.cache<layers = 1, kv_heads = 1, head_dim = 64, element_type = f16, config = <method = kvquant, key_bits = 3, value_bits = 3, kvquant_group_size = 0>>)

// -----

// expected-error @below {{outlier_fraction 1 is not in [0, 1)}}
// expected-error @below {{failed to parse Kvq_CacheType parameter 'config'}}
func.func @config_fraction_one(%c: !kvq.cache<layers = 1, kv_heads = 1, head_dim = 64, element_type = f16, config = <method = kvquant, key_bits = 3, value_bits = 3, outlier_fraction = 1.0>>)

// -----

// expected-error @below {{outlier_fraction -0.01 is not in [0, 1)}}
// expected-error @below {{failed to parse Kvq_CacheType parameter 'config'}}
func.func @config_fraction_negative(%c: !kvq.cache<layers = 1, kv_heads = 1, head_dim = 64, element_type = f16, config = <method = kvquant, key_bits = 3, value_bits = 3, outlier_fraction = -0.01>>)

// -----

// expected-error @below {{residual_mode block flushes residual_length (48) keys at a time, which must be a positive multiple of group_size (32)}}
// expected-error @below {{failed to parse Kvq_CacheType parameter 'config'}}
func.func @config_block_residual(%c: !kvq.cache<layers = 1, kv_heads = 1, head_dim = 64, element_type = f16, config = <method = kivi, key_bits = 2, value_bits = 2, residual_length = 48, residual_mode = block>>)

// -----

// expected-error @below {{expected ::mlir::kvq::Method to be one of: fp16, kivi, kivi_sink, kvquant}}
// expected-error @below {{failed to parse Kvq_CacheConfigAttr parameter 'method'}}
// expected-error @below {{failed to parse Kvq_CacheType parameter 'config'}}
func.func @config_unknown_method(%c: !kvq.cache<layers = 1, kv_heads = 1, head_dim = 64, element_type = f16, config = <method = gptq, key_bits = 2, value_bits = 2>>)

// -----

// expected-error @below {{num_layers 0 must be positive}}
func.func @cache_no_layers(%c: !kvq.cache<layers = 0, kv_heads = 1, head_dim = 64, element_type = f16, config = <method = fp16, key_bits = 16, value_bits = 16>>)

// -----

// expected-error @below {{num_kv_heads 0 must be positive}}
func.func @cache_no_heads(%c: !kvq.cache<layers = 1, kv_heads = 0, head_dim = 64, element_type = f16, config = <method = fp16, key_bits = 16, value_bits = 16>>)

// -----

// expected-error @below {{head_dim -64 must be positive}}
func.func @cache_negative_head_dim(%c: !kvq.cache<layers = 1, kv_heads = 1, head_dim = -64, element_type = f16, config = <method = fp16, key_bits = 16, value_bits = 16>>)

// -----

// expected-error @below {{element_type must be f16 or f32, got 'bf16'}}
func.func @cache_bf16(%c: !kvq.cache<layers = 1, kv_heads = 1, head_dim = 64, element_type = bf16, config = <method = fp16, key_bits = 16, value_bits = 16>>)

// -----

// expected-error @below {{group_size 32 does not divide head_dim 48}}
func.func @cache_group_does_not_divide(%c: !kvq.cache<layers = 1, kv_heads = 1, head_dim = 48, element_type = f16, config = <method = kivi_sink, key_bits = 2, value_bits = 2>>)

// -----

func.func @group_quant_bits(%k: tensor<8x128xf16>) {
  // expected-error @below {{unsupported bit width 5; supported bit widths are 2, 3, 4 and 8}}
  %c, %s, %z = kvq.group_quant %k axis per_token group 32 bits 5
      : tensor<8x128xf16> -> tensor<8x128xi8>, tensor<8x4xf16>, tensor<8x4xf16>
  return
}

// -----

func.func @group_does_not_divide(%k: tensor<8x100xf16>) {
  // expected-error @below {{group size 32 does not divide dimension 1 of size 100}}
  %c, %s, %z = kvq.group_quant %k axis per_token group 32 bits 2
      : tensor<8x100xf16> -> tensor<8x100xi8>, tensor<8x3xf16>, tensor<8x3xf16>
  return
}

// -----

func.func @group_does_not_divide_tokens(%k: tensor<40x8x64xf16>) {
  // expected-error @below {{group size 32 does not divide dimension 0 of size 40}}
  %c, %s, %z = kvq.group_quant %k axis per_channel group 32 bits 2
      : tensor<40x8x64xf16> -> tensor<40x8x64xi8>, tensor<1x8x64xf16>, tensor<1x8x64xf16>
  return
}

// -----

func.func @per_channel_rank_one(%k: tensor<64xf16>) {
  // expected-error @below {{per_channel groups need an input of rank >= 2 (tokens x channels), got rank 1}}
  %c, %s, %z = kvq.group_quant %k axis per_channel group 32 bits 2
      : tensor<64xf16> -> tensor<64xi8>, tensor<2xf16>, tensor<2xf16>
  return
}

// -----

func.func @scalar_input(%k: tensor<f16>) {
  // expected-error @below {{expects an input of rank >= 1}}
  %c, %s, %z = kvq.group_quant %k axis per_token group 1 bits 2
      : tensor<f16> -> tensor<i8>, tensor<f16>, tensor<f16>
  return
}

// -----

func.func @group_size_zero(%k: tensor<8x128xf16>) {
  // expected-error @below {{attribute 'group' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive}}
  %c, %s, %z = kvq.group_quant %k axis per_token group 0 bits 2
      : tensor<8x128xf16> -> tensor<8x128xi8>, tensor<8x4xf16>, tensor<8x4xf16>
  return
}

// -----

func.func @codes_shape_mismatch(%k: tensor<8x128xf16>) {
  // expected-error @below {{codes has shape 8x64 but 8x128 is expected}}
  %c, %s, %z = kvq.group_quant %k axis per_token group 32 bits 2
      : tensor<8x128xf16> -> tensor<8x64xi8>, tensor<8x4xf16>, tensor<8x4xf16>
  return
}

// -----

func.func @scale_shape_mismatch(%k: tensor<8x128xf16>) {
  // expected-error @below {{scale has shape 8x2 but 8x4 is expected}}
  %c, %s, %z = kvq.group_quant %k axis per_token group 32 bits 2
      : tensor<8x128xf16> -> tensor<8x128xi8>, tensor<8x2xf16>, tensor<8x4xf16>
  return
}

// -----

func.func @zero_shape_mismatch(%k: tensor<8x128xf16>) {
  // expected-error @below {{zero point has shape 4x4 but 8x4 is expected}}
  %c, %s, %z = kvq.group_quant %k axis per_token group 32 bits 2
      : tensor<8x128xf16> -> tensor<8x128xi8>, tensor<8x4xf16>, tensor<4x4xf16>
  return
}

// -----

func.func @exclude_shape_mismatch(%k: tensor<8x128xf16>, %m: tensor<8xi1>) {
  // expected-error @below {{exclude mask has shape 8 but 8x128 is expected}}
  %c, %s, %z = kvq.group_quant %k axis per_token group 32 bits 2 exclude(%m : tensor<8xi1>)
      : tensor<8x128xf16> -> tensor<8x128xi8>, tensor<8x4xf16>, tensor<8x4xf16>
  return
}

// -----

func.func @codes_not_i8(%k: tensor<8x128xf16>) {
  // expected-error @below {{result #0 must be ranked tensor or memref of i8 codes}}
  %c, %s, %z = kvq.group_quant %k axis per_token group 32 bits 2
      : tensor<8x128xf16> -> tensor<8x128xi32>, tensor<8x4xf16>, tensor<8x4xf16>
  return
}

// -----

func.func @dequant_bits(%c: tensor<8x128xi8>, %s: tensor<8x4xf16>) {
  // expected-error @below {{unsupported bit width 1; supported bit widths are 2, 3, 4 and 8}}
  %x = kvq.group_dequant %c, %s, %s axis per_token group 32 bits 1
      : tensor<8x128xi8>, tensor<8x4xf16>, tensor<8x4xf16> -> tensor<8x128xf16>
  return
}

// -----

func.func @dequant_output_shape(%c: tensor<8x128xi8>, %s: tensor<8x4xf16>) {
  // expected-error @below {{output has shape 8x64 but 8x128 is expected}}
  %x = kvq.group_dequant %c, %s, %s axis per_token group 32 bits 2
      : tensor<8x128xi8>, tensor<8x4xf16>, tensor<8x4xf16> -> tensor<8x64xf16>
  return
}

// -----

func.func @dequant_scale_shape(%c: tensor<8x128xi8>, %s: tensor<8x2xf16>, %z: tensor<8x4xf16>) {
  // expected-error @below {{scale has shape 8x2 but 8x4 is expected}}
  %x = kvq.group_dequant %c, %s, %z axis per_token group 32 bits 2
      : tensor<8x128xi8>, tensor<8x2xf16>, tensor<8x4xf16> -> tensor<8x128xf16>
  return
}

// -----

func.func @nuq_fit_levels_shape(%k: tensor<128x8x64xf16>) {
  // expected-error @below {{levels has shape 1x8x64x4 but 1x8x64x8 is expected}}
  %l = kvq.nuq_fit %k axis per_channel group 128 bits 3 iters 8
      : tensor<128x8x64xf16> -> tensor<1x8x64x4xf16>
  return
}

// -----

func.func @nuq_fit_bits(%k: tensor<128x8x64xf16>) {
  // expected-error @below {{unsupported bit width 6; supported bit widths are 2, 3, 4 and 8}}
  %l = kvq.nuq_fit %k axis per_channel group 128 bits 6 iters 8
      : tensor<128x8x64xf16> -> tensor<1x8x64x64xf16>
  return
}

// -----

func.func @nuq_fit_negative_iters(%k: tensor<128x8x64xf16>) {
  // expected-error @below {{attribute 'iters' failed to satisfy constraint: 64-bit signless integer attribute whose value is non-negative}}
  %l = kvq.nuq_fit %k axis per_channel group 128 bits 3 iters -1
      : tensor<128x8x64xf16> -> tensor<1x8x64x8xf16>
  return
}

// -----

func.func @nuq_fit_exclude_shape(%k: tensor<128x8x64xf16>, %m: tensor<128x8xi1>) {
  // expected-error @below {{exclude mask has shape 128x8 but 128x8x64 is expected}}
  %l = kvq.nuq_fit %k axis per_channel group 128 bits 3 iters 8 exclude(%m : tensor<128x8xi1>)
      : tensor<128x8x64xf16> -> tensor<1x8x64x8xf16>
  return
}

// -----

func.func @nuq_quant_levels(%k: tensor<16x2x64xf16>, %l: tensor<16x2x8xf16>) {
  // expected-error @below {{levels has shape 16x2x8 but 16x2x1x8 is expected}}
  %c = kvq.nuq_quant %k, %l axis per_token group 64 bits 3
      : tensor<16x2x64xf16>, tensor<16x2x8xf16> -> tensor<16x2x64xi8>
  return
}

// -----

func.func @nuq_quant_codes(%k: tensor<16x2x64xf16>, %l: tensor<16x2x1x8xf16>) {
  // expected-error @below {{codes has shape 16x2x32 but 16x2x64 is expected}}
  %c = kvq.nuq_quant %k, %l axis per_token group 64 bits 3
      : tensor<16x2x64xf16>, tensor<16x2x1x8xf16> -> tensor<16x2x32xi8>
  return
}

// -----

func.func @nuq_quant_bits(%k: tensor<16x2x64xf16>, %l: tensor<16x2x1x8xf16>) {
  // expected-error @below {{unsupported bit width 7; supported bit widths are 2, 3, 4 and 8}}
  %c = kvq.nuq_quant %k, %l axis per_token group 64 bits 7
      : tensor<16x2x64xf16>, tensor<16x2x1x8xf16> -> tensor<16x2x64xi8>
  return
}

// -----

func.func @nuq_dequant_levels(%c: tensor<16x2x64xi8>, %l: tensor<16x2x1x4xf16>) {
  // expected-error @below {{levels has shape 16x2x1x4 but 16x2x1x8 is expected}}
  %x = kvq.nuq_dequant %c, %l axis per_token group 64 bits 3
      : tensor<16x2x64xi8>, tensor<16x2x1x4xf16> -> tensor<16x2x64xf32>
  return
}

// -----

func.func @nuq_dequant_output(%c: tensor<16x2x64xi8>, %l: tensor<16x2x1x8xf16>) {
  // expected-error @below {{output has shape 16x2x60 but 16x2x64 is expected}}
  %x = kvq.nuq_dequant %c, %l axis per_token group 64 bits 3
      : tensor<16x2x64xi8>, tensor<16x2x1x8xf16> -> tensor<16x2x60xf32>
  return
}

// -----

func.func @nuq_dequant_bits(%c: tensor<16x2x64xi8>, %l: tensor<16x2x1x8xf16>) {
  // expected-error @below {{unsupported bit width 0; supported bit widths are 2, 3, 4 and 8}}
  %x = kvq.nuq_dequant %c, %l axis per_token group 64 bits 0
      : tensor<16x2x64xi8>, tensor<16x2x1x8xf16> -> tensor<16x2x64xf32>
  return
}

// -----

func.func @outlier_fraction_one(%k: tensor<128x8x64xf16>) {
  // expected-error @below {{outlier fraction 1.000000e+00 is outside [0, 1)}}
  %m, %t = kvq.outlier_split %k axis per_channel group 128 fraction 1.0
      : tensor<128x8x64xf16> -> tensor<128x8x64xi1>, tensor<1x8x64xf32>
  return
}

// -----

func.func @outlier_fraction_negative(%k: tensor<128x8x64xf16>) {
  // expected-error @below {{outlier fraction -5.000000e-01 is outside [0, 1)}}
  %m, %t = kvq.outlier_split %k axis per_channel group 128 fraction -0.5
      : tensor<128x8x64xf16> -> tensor<128x8x64xi1>, tensor<1x8x64xf32>
  return
}

// -----

func.func @outlier_mask_shape(%k: tensor<128x8x64xf16>) {
  // expected-error @below {{mask has shape 128x8 but 128x8x64 is expected}}
  %m, %t = kvq.outlier_split %k axis per_channel group 128 fraction 0.01
      : tensor<128x8x64xf16> -> tensor<128x8xi1>, tensor<1x8x64xf32>
  return
}

// -----

func.func @outlier_threshold_shape(%k: tensor<128x8x64xf16>) {
  // expected-error @below {{threshold has shape 8x64 but 1x8x64 is expected}}
  %m, %t = kvq.outlier_split %k axis per_channel group 128 fraction 0.01
      : tensor<128x8x64xf16> -> tensor<128x8x64xi1>, tensor<8x64xf32>
  return
}

// -----

func.func @outlier_exclude_shape(%k: tensor<128x8x64xf16>, %s: tensor<128xi1>) {
  // expected-error @below {{exclude mask has shape 128 but 128x8x64 is expected}}
  %m, %t = kvq.outlier_split %k axis per_channel group 128 fraction 0.01 exclude(%s : tensor<128xi1>)
      : tensor<128x8x64xf16> -> tensor<128x8x64xi1>, tensor<1x8x64xf32>
  return
}

// -----

func.func @outlier_group_does_not_divide(%k: tensor<100x8x64xf16>) {
  // expected-error @below {{group size 128 does not divide dimension 0 of size 100}}
  %m, %t = kvq.outlier_split %k axis per_channel group 128 fraction 0.01
      : tensor<100x8x64xf16> -> tensor<100x8x64xi1>, tensor<1x8x64xf32>
  return
}

// -----

func.func @screen_rank(%k: tensor<64xf16>, %t: tensor<64xf32>) {
  // expected-error @below {{expects an input of rank >= 2 (tokens x channels), got rank 1}}
  %m = kvq.outlier_screen %k above %t : tensor<64xf16>, tensor<64xf32> -> tensor<64xi1>
  return
}

// -----

func.func @screen_threshold_shape(%k: tensor<1x8x64xf16>, %t: tensor<1x8x64xf32>) {
  // expected-error @below {{threshold has shape 1x8x64 but 8x64 is expected}}
  %m = kvq.outlier_screen %k above %t : tensor<1x8x64xf16>, tensor<1x8x64xf32> -> tensor<1x8x64xi1>
  return
}

// -----

func.func @screen_mask_shape(%k: tensor<1x8x64xf16>, %t: tensor<8x64xf32>) {
  // expected-error @below {{mask has shape 8x64 but 1x8x64 is expected}}
  %m = kvq.outlier_screen %k above %t : tensor<1x8x64xf16>, tensor<8x64xf32> -> tensor<8x64xi1>
  return
}

// -----

func.func @key_norm_rank(%k: tensor<128x64xf16>) {
  // expected-error @below {{expects keys of rank 3 (tokens x kv_heads x head_dim), got rank 2}}
  %n = kvq.key_norm %k : tensor<128x64xf16> -> tensor<128xf32>
  return
}

// -----

func.func @key_norm_shape(%k: tensor<128x8x64xf16>) {
  // expected-error @below {{norms has shape 64 but 128 is expected}}
  %n = kvq.key_norm %k : tensor<128x8x64xf16> -> tensor<64xf32>
  return
}

// -----

func.func @too_many_sinks(%n: tensor<3xf32>) {
  // expected-error @below {{sink count 5 exceeds the 3 tokens it selects from}}
  %p = kvq.sink_select %n count 5 : tensor<3xf32> -> tensor<5xi64>
  return
}

// -----

func.func @sink_positions_shape(%n: tensor<128xf32>) {
  // expected-error @below {{positions has shape 4 but 5 is expected}}
  %p = kvq.sink_select %n count 5 : tensor<128xf32> -> tensor<4xi64>
  return
}

// -----

!cache = !kvq.cache<layers = 2, kv_heads = 8, head_dim = 64, element_type = f16, config = <method = kivi, key_bits = 2, value_bits = 2>>

func.func @update_layer_out_of_range(%c: !cache, %k: tensor<1x8x64xf16>) {
  // expected-error @below {{layer 2 is out of range for a cache of 2 layers}}
  kvq.cache_update %c[2], %k, %k : !cache, tensor<1x8x64xf16>, tensor<1x8x64xf16>
  return
}

// -----

!cache = !kvq.cache<layers = 2, kv_heads = 8, head_dim = 64, element_type = f16, config = <method = kivi, key_bits = 2, value_bits = 2>>

func.func @update_keys_shape(%c: !cache, %k: tensor<4x8x32xf16>, %v: tensor<4x8x64xf16>) {
  // expected-error @below {{keys have shape 4x8x32 but the cache holds [tokens, 8, 64]}}
  kvq.cache_update %c[0], %k, %v : !cache, tensor<4x8x32xf16>, tensor<4x8x64xf16>
  return
}

// -----

!cache = !kvq.cache<layers = 2, kv_heads = 8, head_dim = 64, element_type = f16, config = <method = kivi, key_bits = 2, value_bits = 2>>

func.func @update_values_heads(%c: !cache, %k: tensor<4x8x64xf16>, %v: tensor<4x4x64xf16>) {
  // expected-error @below {{values have shape 4x4x64 but the cache holds [tokens, 8, 64]}}
  kvq.cache_update %c[0], %k, %v : !cache, tensor<4x8x64xf16>, tensor<4x4x64xf16>
  return
}

// -----

!cache = !kvq.cache<layers = 2, kv_heads = 8, head_dim = 64, element_type = f16, config = <method = kivi, key_bits = 2, value_bits = 2>>

func.func @update_element_type(%c: !cache, %k: tensor<4x8x64xf32>) {
  // expected-error @below {{keys element type 'f32' does not match the cache element type 'f16'}}
  kvq.cache_update %c[0], %k, %k : !cache, tensor<4x8x64xf32>, tensor<4x8x64xf32>
  return
}

// -----

!cache = !kvq.cache<layers = 2, kv_heads = 8, head_dim = 64, element_type = f16, config = <method = kivi, key_bits = 2, value_bits = 2>>

func.func @update_token_counts(%c: !cache, %k: tensor<4x8x64xf16>, %v: tensor<3x8x64xf16>) {
  // expected-error @below {{keys and values disagree on the token count}}
  kvq.cache_update %c[0], %k, %v : !cache, tensor<4x8x64xf16>, tensor<3x8x64xf16>
  return
}

// -----

!cache = !kvq.cache<layers = 2, kv_heads = 8, head_dim = 64, element_type = f16, config = <method = kivi, key_bits = 2, value_bits = 2>>

func.func @update_fetch_one(%c: !cache, %k: tensor<4x8x64xf16>) {
  // expected-error @below {{fetches either nothing or both K and V, got 1 results}}
  %a = kvq.cache_update %c[0], %k, %k : !cache, tensor<4x8x64xf16>, tensor<4x8x64xf16> -> tensor<?x8x64xf16>
  return
}

// -----

!cache = !kvq.cache<layers = 2, kv_heads = 8, head_dim = 64, element_type = f16, config = <method = kivi, key_bits = 2, value_bits = 2>>

func.func @update_fetch_type(%c: !cache, %k: tensor<4x8x64xf16>) {
  // expected-error @below {{fetched values element type 'f32' does not match the cache element type 'f16'}}
  %a, %b = kvq.cache_update %c[0], %k, %k : !cache, tensor<4x8x64xf16>, tensor<4x8x64xf16> -> tensor<?x8x64xf16>, tensor<?x8x64xf32>
  return
}

// -----

!cache = !kvq.cache<layers = 2, kv_heads = 8, head_dim = 64, element_type = f16, config = <method = kivi, key_bits = 2, value_bits = 2>>

func.func @update_fetch_shape(%c: !cache, %k: tensor<4x8x64xf16>) {
  // expected-error @below {{fetched keys have shape ?x4x64 but the cache holds [tokens, 8, 64]}}
  %a, %b = kvq.cache_update %c[0], %k, %k : !cache, tensor<4x8x64xf16>, tensor<4x8x64xf16> -> tensor<?x4x64xf16>, tensor<?x8x64xf16>
  return
}

// -----

!cache = !kvq.cache<layers = 2, kv_heads = 8, head_dim = 64, element_type = f16, config = <method = kivi, key_bits = 2, value_bits = 2>>

func.func @attend_layer(%c: !cache, %q: tensor<1x8x64xf32>) {
  // expected-error @below {{layer 7 is out of range for a cache of 2 layers}}
  %o = kvq.cache_attend %c[7], %q : !cache, tensor<1x8x64xf32> -> tensor<1x8x64xf32>
  return
}

// -----

!cache = !kvq.cache<layers = 2, kv_heads = 8, head_dim = 64, element_type = f16, config = <method = kivi, key_bits = 2, value_bits = 2>>

func.func @attend_rank(%c: !cache, %q: tensor<8x64xf32>) {
  // expected-error @below {{expects queries of rank 3 (steps x q_heads x head_dim), got rank 2}}
  %o = kvq.cache_attend %c[0], %q : !cache, tensor<8x64xf32> -> tensor<8x64xf32>
  return
}

// -----

!cache = !kvq.cache<layers = 2, kv_heads = 8, head_dim = 64, element_type = f16, config = <method = kivi, key_bits = 2, value_bits = 2>>

func.func @attend_head_dim(%c: !cache, %q: tensor<1x8x128xf32>) {
  // expected-error @below {{query head_dim 128 does not match the cache head_dim 64}}
  %o = kvq.cache_attend %c[0], %q : !cache, tensor<1x8x128xf32> -> tensor<1x8x128xf32>
  return
}

// -----

!cache = !kvq.cache<layers = 2, kv_heads = 8, head_dim = 64, element_type = f16, config = <method = kivi, key_bits = 2, value_bits = 2>>

func.func @attend_gqa(%c: !cache, %q: tensor<1x12x64xf32>) {
  // expected-error @below {{query heads 12 are not a multiple of the cache's 8 KV heads}}
  %o = kvq.cache_attend %c[0], %q : !cache, tensor<1x12x64xf32> -> tensor<1x12x64xf32>
  return
}

// -----

!cache = !kvq.cache<layers = 2, kv_heads = 8, head_dim = 64, element_type = f16, config = <method = kivi, key_bits = 2, value_bits = 2>>

func.func @attend_output(%c: !cache, %q: tensor<1x16x64xf32>) {
  // expected-error @below {{output has shape 1x8x64 but 1x16x64 is expected}}
  %o = kvq.cache_attend %c[0], %q : !cache, tensor<1x16x64xf32> -> tensor<1x8x64xf32>
  return
}

// -----

!cache = !kvq.cache<layers = 2, kv_heads = 8, head_dim = 64, element_type = f16, config = <method = kivi, key_bits = 2, value_bits = 2>>

func.func @stats_layer(%c: !cache) {
  // expected-error @below {{layer 2 is out of range for a cache of 2 layers}}
  %t, %b, %f, %e = kvq.cache_stats %c[2] : !cache
  return
}

// -----

func.func @mixed_tensor_and_memref(%k: memref<8x128xf16>) {
  // expected-error @below {{mixes tensors and memrefs; use all tensors or all memrefs}}
  %c, %s, %z = kvq.group_quant %k axis per_token group 32 bits 2
      : memref<8x128xf16> -> tensor<8x128xi8>, tensor<8x4xf16>, tensor<8x4xf16>
  return
}

// -----

// expected-error @below {{kvquant_group_size 64 has no effect in kvq (key levels are fit per channel over the prefill, value levels per token over head_dim); leave it at 32}}
// expected-error @below {{failed to parse Kvq_CacheType parameter 'config'}}
func.func @config_kvquant_group_not_default(%c: !kvq.cache<layers = 1, kv_heads = 1, head_dim = 64, element_type = f16, config = <method = kvquant, key_bits = 3, value_bits = 3, kvquant_group_size = 64>>)

// -----

// expected-error @below {{residual_mode block flushes residual_length (0) keys at a time, which must be a positive multiple of group_size (32)}}
// expected-error @below {{failed to parse Kvq_CacheType parameter 'config'}}
func.func @config_block_no_residual(%c: !kvq.cache<layers = 1, kv_heads = 1, head_dim = 64, element_type = f16, config = <method = kivi, key_bits = 2, value_bits = 2, residual_length = 0, residual_mode = block>>)

// -----

// Sizes the lowering passes as i32: 2^32 + 1 layers must not become 1.
// expected-error @below {{num_layers 4294967297 exceeds the limit of 1024}}
func.func @cache_layers_beyond_i32(%c: !kvq.cache<layers = 4294967297, kv_heads = 1, head_dim = 64, element_type = f16, config = <method = fp16, key_bits = 16, value_bits = 16>>)

// -----

// expected-error @below {{num_kv_heads 4294967298 exceeds the limit of 1024}}
func.func @cache_kv_heads_beyond_i32(%c: !kvq.cache<layers = 1, kv_heads = 4294967298, head_dim = 64, element_type = f16, config = <method = fp16, key_bits = 16, value_bits = 16>>)

// -----

// expected-error @below {{head_dim 4294967304 exceeds the limit of 65535}}
func.func @cache_head_dim_beyond_i32(%c: !kvq.cache<layers = 1, kv_heads = 1, head_dim = 4294967304, element_type = f16, config = <method = fp16, key_bits = 16, value_bits = 16>>)

// -----

// expected-error @below {{num_kv_heads x head_dim = 131072 exceeds the limit of 65535 channels per layer}}
func.func @cache_channels_beyond_limit(%c: !kvq.cache<layers = 1, kv_heads = 1024, head_dim = 128, element_type = f16, config = <method = fp16, key_bits = 16, value_bits = 16>>)

// -----

// expected-error @below {{group_size 4294967328 does not fit the int32 field of kvq_config}}
// expected-error @below {{failed to parse Kvq_CacheType parameter 'config'}}
func.func @config_group_beyond_i32(%c: !kvq.cache<layers = 1, kv_heads = 1, head_dim = 64, element_type = f16, config = <method = kivi, key_bits = 2, value_bits = 2, group_size = 4294967328>>)

// -----

// expected-error @below {{n_sink_tokens 4097 exceeds the limit of 4096}}
// expected-error @below {{failed to parse Kvq_CacheType parameter 'config'}}
func.func @config_sinks_beyond_limit(%c: !kvq.cache<layers = 1, kv_heads = 1, head_dim = 64, element_type = f16, config = <method = kivi_sink, key_bits = 2, value_bits = 2, n_sink_tokens = 4097>>)

// -----

// expected-error @below {{lloyd_iters 1001 exceeds the limit of 1000}}
// expected-error @below {{failed to parse Kvq_CacheType parameter 'config'}}
func.func @config_lloyd_beyond_limit(%c: !kvq.cache<layers = 1, kv_heads = 1, head_dim = 64, element_type = f16, config = <method = kvquant, key_bits = 3, value_bits = 3, lloyd_iters = 1001>>)

// -----

// expected-error @below {{refit_interval 1048577 exceeds the limit of 1048576}}
// expected-error @below {{failed to parse Kvq_CacheType parameter 'config'}}
func.func @config_refit_beyond_limit(%c: !kvq.cache<layers = 1, kv_heads = 1, head_dim = 64, element_type = f16, config = <method = kvquant, key_bits = 3, value_bits = 3, refit_interval = 1048577>>)

// -----

// A RoPE base must be in (1, 1e9]: the runtime's rule and message.
// expected-error @below {{rope theta must be in (1, 1e9], got 1}}
// expected-error @below {{failed to parse Kvq_CacheConfigAttr parameter 'rope'}}
// expected-error @below {{failed to parse Kvq_CacheType parameter 'config'}}
func.func @rope_theta_one(%c: !kvq.cache<layers = 1, kv_heads = 1, head_dim = 64, element_type = f16, config = <method = kivi, key_bits = 2, value_bits = 2, rope = <theta = 1.0, style = half>>>)

// -----

// RoPE rotates channel pairs: head_dim must be even.
// expected-error @below {{rope needs an even head_dim, got head_dim 5}}
func.func @rope_odd_head_dim(%c: !kvq.cache<layers = 1, kv_heads = 1, head_dim = 5, element_type = f16, config = <method = fp16, key_bits = 16, value_bits = 16, rope = <theta = 10000.0, style = interleaved>>>)

// -----

// expected-error @below {{expected ::mlir::kvq::RopeStyle to be one of: interleaved, half}}
// expected-error @below {{failed to parse Kvq_RopeAttr parameter 'style'}}
// expected-error @below {{failed to parse Kvq_CacheConfigAttr parameter 'rope'}}
// expected-error @below {{failed to parse Kvq_CacheType parameter 'config'}}
func.func @rope_style_unknown(%c: !kvq.cache<layers = 1, kv_heads = 1, head_dim = 64, element_type = f16, config = <method = kivi, key_bits = 2, value_bits = 2, rope = <theta = 10000.0, style = neox>>>)
