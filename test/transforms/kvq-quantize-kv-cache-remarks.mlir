// RUN: kvq-opt %s --split-input-file --verify-diagnostics --kvq-quantize-kv-cache \
// RUN:   | FileCheck %s --implicit-check-not=kvq.cache_update

// One graph per "not adopted" remark of kvq-quantize-kv-cache that no other
// test shows (kvq-quantize-kv-cache-remark-coverage.mlir checks that every
// remark has a test). Each is the small adoptable graph of
// kvq-quantize-kv-cache-refusals.mlir (context 16, 2 KV heads, head_dim 4,
// scale 0.5, one new token unless said) with one thing changed, or a bare
// cache write where the write alone is refused. The remark sits at the op
// that blocks; the CHECK lines verify that the function keeps its cache
// tensor arguments and that nothing is rewritten.

// An i8 cache tensor: the cache holds no float K/V to quantize.

// CHECK-LABEL: func.func @i8_cache(
// CHECK-SAME: %{{[a-z0-9]+}}: tensor<16x2x4xi8>

// expected-remark@below {{not adopted: the cache tensor's element type is i8; kvq adopts f32, f16 and bf16 caches}}
func.func @i8_cache(%k: tensor<1x2x4xi8>, %kc: tensor<16x2x4xi8>, %pos: index) -> tensor<16x2x4xi8> {
  %w = tensor.insert_slice %k into %kc[%pos, 0, 0] [1, 2, 4] [1, 1, 1] : tensor<1x2x4xi8> into tensor<16x2x4xi8>
  return %w : tensor<16x2x4xi8>
}

// -----

// The same cache value is written twice: two diverging states, not one
// chain.

// CHECK-LABEL: func.func @written_twice(
// CHECK-SAME: %{{[a-z0-9]+}}: tensor<16x2x4xf32>

func.func @written_twice(%k: tensor<1x2x4xf32>, %kc: tensor<16x2x4xf32>, %pos: index) -> (tensor<16x2x4xf32>, tensor<16x2x4xf32>) {
  // expected-remark@below {{not adopted: the cache tensor is written twice from one value}}
  %w1 = tensor.insert_slice %k into %kc[%pos, 0, 0] [1, 2, 4] [1, 1, 1] : tensor<1x2x4xf32> into tensor<16x2x4xf32>
  %w2 = tensor.insert_slice %k into %kc[%pos, 0, 0] [1, 2, 4] [1, 1, 1] : tensor<1x2x4xf32> into tensor<16x2x4xf32>
  return %w1, %w2 : tensor<16x2x4xf32>, tensor<16x2x4xf32>
}

// -----

// The first write is returned and also written again: two states out of one
// cache.

// CHECK-LABEL: func.func @returned_and_written_again(
// CHECK-SAME: %{{[a-z0-9]+}}: tensor<16x2x4xf32>

func.func @returned_and_written_again(%k: tensor<1x2x4xf32>, %kc: tensor<16x2x4xf32>, %pos: index, %pos2: index) -> (tensor<16x2x4xf32>, tensor<16x2x4xf32>) {
  %w1 = tensor.insert_slice %k into %kc[%pos, 0, 0] [1, 2, 4] [1, 1, 1] : tensor<1x2x4xf32> into tensor<16x2x4xf32>
  %w2 = tensor.insert_slice %k into %w1[%pos2, 0, 0] [1, 2, 4] [1, 1, 1] : tensor<1x2x4xf32> into tensor<16x2x4xf32>
  // expected-remark@below {{not adopted: a cache value is both returned and written again}}
  return %w1, %w2 : tensor<16x2x4xf32>, tensor<16x2x4xf32>
}

// -----

// The write skips every other position (stride 2).

// CHECK-LABEL: func.func @strided_write(
// CHECK-SAME: %{{[a-z0-9]+}}: tensor<16x2x4xf32>

func.func @strided_write(%k: tensor<1x2x4xf32>, %kc: tensor<16x2x4xf32>, %pos: index) -> tensor<16x2x4xf32> {
  // expected-remark@below {{not adopted: the cache write is strided}}
  %w = tensor.insert_slice %k into %kc[%pos, 0, 0] [1, 2, 4] [2, 1, 1] : tensor<1x2x4xf32> into tensor<16x2x4xf32>
  return %w : tensor<16x2x4xf32>
}

// -----

// The write covers 2 of 4 KV heads.

// CHECK-LABEL: func.func @writes_half_the_heads(
// CHECK-SAME: %{{[a-z0-9]+}}: tensor<16x4x4xf32>

func.func @writes_half_the_heads(%k: tensor<1x2x4xf32>, %kc: tensor<16x4x4xf32>, %pos: index) -> tensor<16x4x4xf32> {
  // expected-remark@below {{not adopted: the cache write covers 2 of the 4 entries of dimension 1; kvq adopts writes of whole KV heads and channels}}
  %w = tensor.insert_slice %k into %kc[%pos, 0, 0] [1, 2, 4] [1, 1, 1] : tensor<1x2x4xf32> into tensor<16x4x4xf32>
  return %w : tensor<16x4x4xf32>
}

// -----

// The write is at a runtime position and a runtime head.

// CHECK-LABEL: func.func @two_dynamic_offsets(
// CHECK-SAME: %{{[a-z0-9]+}}: tensor<16x2x4xf32>

func.func @two_dynamic_offsets(%k: tensor<1x1x4xf32>, %kc: tensor<16x2x4xf32>, %pos: index, %h: index) -> tensor<16x2x4xf32> {
  // expected-remark@below {{not adopted: the cache write has dynamic offsets in dimensions 0 and 1; kvq adopts caches written at one position dimension}}
  %w = tensor.insert_slice %k into %kc[%pos, %h, 0] [1, 1, 4] [1, 1, 1] : tensor<1x1x4xf32> into tensor<16x2x4xf32>
  return %w : tensor<16x2x4xf32>
}

// -----

// A cache of one scalar per position: no head_dim channels.

// CHECK-LABEL: func.func @no_channels(
// CHECK-SAME: %{{[a-z0-9]+}}: tensor<16x1xf32>

func.func @no_channels(%k: tensor<1x1xf32>, %kc: tensor<16x1xf32>, %pos: index) -> tensor<16x1xf32> {
  // expected-remark@below {{not adopted: the cache write covers no channel dimension}}
  %w = tensor.insert_slice %k into %kc[%pos, 0] [1, 1] [1, 1] : tensor<1x1xf32> into tensor<16x1xf32>
  return %w : tensor<16x1xf32>
}

// -----

// The position dimension has no static size.

// CHECK-LABEL: func.func @dynamic_capacity(
// CHECK-SAME: %{{[a-z0-9]+}}: tensor<?x2x4xf32>

func.func @dynamic_capacity(%k: tensor<1x2x4xf32>, %kc: tensor<?x2x4xf32>, %pos: index) -> tensor<?x2x4xf32> {
  // expected-remark@below {{not adopted: the cache's capacity (dimension 0) is dynamic}}
  %w = tensor.insert_slice %k into %kc[%pos, 0, 0] [1, 2, 4] [1, 1, 1] : tensor<1x2x4xf32> into tensor<?x2x4xf32>
  return %w : tensor<?x2x4xf32>
}

// -----

// The number of tokens written is a runtime value.

// CHECK-LABEL: func.func @dynamic_token_count(
// CHECK-SAME: %{{[a-z0-9]+}}: tensor<16x2x4xf32>

func.func @dynamic_token_count(%k: tensor<?x2x4xf32>, %kc: tensor<16x2x4xf32>, %pos: index, %n: index) -> tensor<16x2x4xf32> {
  // expected-remark@below {{not adopted: the number of tokens written is not static}}
  %w = tensor.insert_slice %k into %kc[%pos, 0, 0] [%n, 2, 4] [1, 1, 1] : tensor<?x2x4xf32> into tensor<16x2x4xf32>
  return %w : tensor<16x2x4xf32>
}

// -----

// The second write treats dimension 1 as the positions, the first dimension
// 0.

// CHECK-LABEL: func.func @writes_transposed(
// CHECK-SAME: %{{[a-z0-9]+}}: tensor<16x16x4xf32>

func.func @writes_transposed(%k: tensor<1x16x4xf32>, %k2: tensor<16x1x4xf32>, %kc: tensor<16x16x4xf32>, %pos: index) -> tensor<16x16x4xf32> {
  %w1 = tensor.insert_slice %k into %kc[%pos, 0, 0] [1, 16, 4] [1, 1, 1] : tensor<1x16x4xf32> into tensor<16x16x4xf32>
  // expected-remark@below {{not adopted: this write treats the cache's dimensions differently from its first write}}
  %w2 = tensor.insert_slice %k2 into %w1[0, %pos, 0] [16, 1, 4] [1, 1, 1] : tensor<16x1x4xf32> into tensor<16x16x4xf32>
  return %w2 : tensor<16x16x4xf32>
}

// -----

// The key read takes every other position.

// CHECK-LABEL: func.func @strided_read(
// CHECK-SAME: %{{[a-z0-9]+}}: tensor<1x16x2x4xf32>

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#red3 = affine_map<(d0, d1, d2) -> (d0, d1)>
#sq3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d3)>
#sk3 = affine_map<(d0, d1, d2, d3) -> (d2, d0, d3)>
#ss3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#wp3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
#wv3 = affine_map<(d0, d1, d2, d3) -> (d3, d0, d2)>
#wo3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d2)>

func.func @strided_read(%q: tensor<1x2x4xf32>, %k0: tensor<1x2x4xf32>, %v0: tensor<1x2x4xf32>, %kc: tensor<1x16x2x4xf32>, %vc: tensor<1x16x2x4xf32>, %pos: index)
    -> (tensor<1x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %c1 = arith.constant 1 : index
  %len = arith.addi %pos, %c1 : index
  %kw0 = tensor.insert_slice %k0 into %kc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<1x16x2x4xf32>
  // expected-remark@below {{not adopted: the cache read is strided}}
  %kr0 = tensor.extract_slice %kw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 2, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %vw0 = tensor.insert_slice %v0 into %vc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<1x16x2x4xf32>
  %vr0 = tensor.extract_slice %vw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %se0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sz0 = linalg.fill ins(%zero : f32) outs(%se0 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %s0 = linalg.generic {indexing_maps = [#sq3, #sk3, #ss3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %kr0 : tensor<1x2x4xf32>, tensor<?x2x4xf32>) outs(%sz0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<2x1x?xf32>
  %scale0 = arith.constant 0.5 : f32
  %sce0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sc0 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s0 : tensor<2x1x?xf32>) outs(%sce0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %out: f32):
      %m = arith.mulf %in, %scale0 : f32
      linalg.yield %m : f32
    } -> tensor<2x1x?xf32>
  %pe0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %pr0 = linalg.softmax dimension(2) ins(%sc0 : tensor<2x1x?xf32>) outs(%pe0 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %oe0 = tensor.empty() : tensor<1x2x4xf32>
  %oz0 = linalg.fill ins(%zero : f32) outs(%oe0 : tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  %o0 = linalg.generic {indexing_maps = [#wp3, #wv3, #wo3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%pr0, %vr0 : tensor<2x1x?xf32>, tensor<?x2x4xf32>) outs(%oz0 : tensor<1x2x4xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<1x2x4xf32>
  return %o0, %kw0, %vw0 : tensor<1x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>
}

// -----

// Stacked caches (2 layers) whose key read picks its layer at runtime.

// CHECK-LABEL: func.func @stacked_read_at_runtime_layer(
// CHECK-SAME: %{{[a-z0-9]+}}: tensor<2x16x2x4xf32>

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#red3 = affine_map<(d0, d1, d2) -> (d0, d1)>
#sq3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d3)>
#sk3 = affine_map<(d0, d1, d2, d3) -> (d2, d0, d3)>
#ss3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#wp3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
#wv3 = affine_map<(d0, d1, d2, d3) -> (d3, d0, d2)>
#wo3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d2)>

func.func @stacked_read_at_runtime_layer(%q: tensor<1x2x4xf32>, %k0: tensor<1x2x4xf32>, %v0: tensor<1x2x4xf32>, %kc: tensor<2x16x2x4xf32>, %vc: tensor<2x16x2x4xf32>, %pos: index, %layer: index)
    -> (tensor<1x2x4xf32>, tensor<2x16x2x4xf32>, tensor<2x16x2x4xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %c1 = arith.constant 1 : index
  %len = arith.addi %pos, %c1 : index
  %kw0 = tensor.insert_slice %k0 into %kc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<2x16x2x4xf32>
  // expected-remark@below {{not adopted: the layer of a stacked cache read is not a constant}}
  %kr0 = tensor.extract_slice %kw0[%layer, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<2x16x2x4xf32> to tensor<?x2x4xf32>
  %vw0 = tensor.insert_slice %v0 into %vc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<2x16x2x4xf32>
  %vr0 = tensor.extract_slice %vw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<2x16x2x4xf32> to tensor<?x2x4xf32>
  %se0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sz0 = linalg.fill ins(%zero : f32) outs(%se0 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %s0 = linalg.generic {indexing_maps = [#sq3, #sk3, #ss3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %kr0 : tensor<1x2x4xf32>, tensor<?x2x4xf32>) outs(%sz0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<2x1x?xf32>
  %scale0 = arith.constant 0.5 : f32
  %sce0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sc0 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s0 : tensor<2x1x?xf32>) outs(%sce0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %out: f32):
      %m = arith.mulf %in, %scale0 : f32
      linalg.yield %m : f32
    } -> tensor<2x1x?xf32>
  %pe0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %pr0 = linalg.softmax dimension(2) ins(%sc0 : tensor<2x1x?xf32>) outs(%pe0 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %oe0 = tensor.empty() : tensor<1x2x4xf32>
  %oz0 = linalg.fill ins(%zero : f32) outs(%oe0 : tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  %o0 = linalg.generic {indexing_maps = [#wp3, #wv3, #wo3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%pr0, %vr0 : tensor<2x1x?xf32>, tensor<?x2x4xf32>) outs(%oz0 : tensor<1x2x4xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<1x2x4xf32>
  return %o0, %kw0, %vw0 : tensor<1x2x4xf32>, tensor<2x16x2x4xf32>, tensor<2x16x2x4xf32>
}

// -----

// The key read takes channels 0..1 of 4 (and the queries 2 channels).

// CHECK-LABEL: func.func @reads_half_the_channels(
// CHECK-SAME: %{{[a-z0-9]+}}: tensor<1x16x2x4xf32>

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#red3 = affine_map<(d0, d1, d2) -> (d0, d1)>
#sq3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d3)>
#sk3 = affine_map<(d0, d1, d2, d3) -> (d2, d0, d3)>
#ss3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#wp3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
#wv3 = affine_map<(d0, d1, d2, d3) -> (d3, d0, d2)>
#wo3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d2)>

func.func @reads_half_the_channels(%q: tensor<1x2x2xf32>, %k0: tensor<1x2x4xf32>, %v0: tensor<1x2x4xf32>, %kc: tensor<1x16x2x4xf32>, %vc: tensor<1x16x2x4xf32>, %pos: index)
    -> (tensor<1x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %c1 = arith.constant 1 : index
  %len = arith.addi %pos, %c1 : index
  %kw0 = tensor.insert_slice %k0 into %kc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<1x16x2x4xf32>
  // expected-remark@below {{not adopted: the cache read does not cover every KV head and channel}}
  %kr0 = tensor.extract_slice %kw0[0, 0, 0, 0] [1, %len, 2, 2] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x2xf32>
  %vw0 = tensor.insert_slice %v0 into %vc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<1x16x2x4xf32>
  %vr0 = tensor.extract_slice %vw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %se0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sz0 = linalg.fill ins(%zero : f32) outs(%se0 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %s0 = linalg.generic {indexing_maps = [#sq3, #sk3, #ss3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %kr0 : tensor<1x2x2xf32>, tensor<?x2x2xf32>) outs(%sz0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<2x1x?xf32>
  %scale0 = arith.constant 0.5 : f32
  %sce0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sc0 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s0 : tensor<2x1x?xf32>) outs(%sce0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %out: f32):
      %m = arith.mulf %in, %scale0 : f32
      linalg.yield %m : f32
    } -> tensor<2x1x?xf32>
  %pe0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %pr0 = linalg.softmax dimension(2) ins(%sc0 : tensor<2x1x?xf32>) outs(%pe0 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %oe0 = tensor.empty() : tensor<1x2x4xf32>
  %oz0 = linalg.fill ins(%zero : f32) outs(%oe0 : tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  %o0 = linalg.generic {indexing_maps = [#wp3, #wv3, #wo3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%pr0, %vr0 : tensor<2x1x?xf32>, tensor<?x2x4xf32>) outs(%oz0 : tensor<1x2x4xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<1x2x4xf32>
  return %o0, %kw0, %vw0 : tensor<1x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>
}

// -----

// The keys are read from the cache argument, before this step writes its
// key.

// CHECK-LABEL: func.func @reads_before_write(
// CHECK-SAME: %{{[a-z0-9]+}}: tensor<1x16x2x4xf32>

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#red3 = affine_map<(d0, d1, d2) -> (d0, d1)>
#sq3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d3)>
#sk3 = affine_map<(d0, d1, d2, d3) -> (d2, d0, d3)>
#ss3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#wp3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
#wv3 = affine_map<(d0, d1, d2, d3) -> (d3, d0, d2)>
#wo3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d2)>

func.func @reads_before_write(%q: tensor<1x2x4xf32>, %k0: tensor<1x2x4xf32>, %v0: tensor<1x2x4xf32>, %kc: tensor<1x16x2x4xf32>, %vc: tensor<1x16x2x4xf32>, %pos: index)
    -> (tensor<1x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %c1 = arith.constant 1 : index
  %len = arith.addi %pos, %c1 : index
  %kw0 = tensor.insert_slice %k0 into %kc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<1x16x2x4xf32>
  // expected-remark@below {{not adopted: attention reads a cache layer before the step writes it}}
  %kr0 = tensor.extract_slice %kc[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %vw0 = tensor.insert_slice %v0 into %vc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<1x16x2x4xf32>
  %vr0 = tensor.extract_slice %vw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %se0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sz0 = linalg.fill ins(%zero : f32) outs(%se0 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %s0 = linalg.generic {indexing_maps = [#sq3, #sk3, #ss3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %kr0 : tensor<1x2x4xf32>, tensor<?x2x4xf32>) outs(%sz0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<2x1x?xf32>
  %scale0 = arith.constant 0.5 : f32
  %sce0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sc0 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s0 : tensor<2x1x?xf32>) outs(%sce0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %out: f32):
      %m = arith.mulf %in, %scale0 : f32
      linalg.yield %m : f32
    } -> tensor<2x1x?xf32>
  %pe0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %pr0 = linalg.softmax dimension(2) ins(%sc0 : tensor<2x1x?xf32>) outs(%pe0 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %oe0 = tensor.empty() : tensor<1x2x4xf32>
  %oz0 = linalg.fill ins(%zero : f32) outs(%oe0 : tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  %o0 = linalg.generic {indexing_maps = [#wp3, #wv3, #wo3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%pr0, %vr0 : tensor<2x1x?xf32>, tensor<?x2x4xf32>) outs(%oz0 : tensor<1x2x4xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<1x2x4xf32>
  return %o0, %kw0, %vw0 : tensor<1x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>
}

// -----

// The number of positions read is an argument, unrelated to the position.

// CHECK-LABEL: func.func @read_length_is_an_argument(
// CHECK-SAME: %{{[a-z0-9]+}}: tensor<1x16x2x4xf32>

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#red3 = affine_map<(d0, d1, d2) -> (d0, d1)>
#sq3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d3)>
#sk3 = affine_map<(d0, d1, d2, d3) -> (d2, d0, d3)>
#ss3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#wp3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
#wv3 = affine_map<(d0, d1, d2, d3) -> (d3, d0, d2)>
#wo3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d2)>

func.func @read_length_is_an_argument(%q: tensor<1x2x4xf32>, %k0: tensor<1x2x4xf32>, %v0: tensor<1x2x4xf32>, %kc: tensor<1x16x2x4xf32>, %vc: tensor<1x16x2x4xf32>, %pos: index, %n: index)
    -> (tensor<1x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %c1 = arith.constant 1 : index
  %len = arith.addi %pos, %c1 : index
  %kw0 = tensor.insert_slice %k0 into %kc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<1x16x2x4xf32>
  // expected-remark@below {{not adopted: the cache read's length cannot be evaluated from the step's position (kvq evaluates constants, pos, add/sub/mul/div, max/min and casts)}}
  %kr0 = tensor.extract_slice %kw0[0, 0, 0, 0] [1, %n, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %vw0 = tensor.insert_slice %v0 into %vc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<1x16x2x4xf32>
  %vr0 = tensor.extract_slice %vw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %se0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sz0 = linalg.fill ins(%zero : f32) outs(%se0 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %s0 = linalg.generic {indexing_maps = [#sq3, #sk3, #ss3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %kr0 : tensor<1x2x4xf32>, tensor<?x2x4xf32>) outs(%sz0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<2x1x?xf32>
  %scale0 = arith.constant 0.5 : f32
  %sce0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sc0 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s0 : tensor<2x1x?xf32>) outs(%sce0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %out: f32):
      %m = arith.mulf %in, %scale0 : f32
      linalg.yield %m : f32
    } -> tensor<2x1x?xf32>
  %pe0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %pr0 = linalg.softmax dimension(2) ins(%sc0 : tensor<2x1x?xf32>) outs(%pe0 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %oe0 = tensor.empty() : tensor<1x2x4xf32>
  %oz0 = linalg.fill ins(%zero : f32) outs(%oe0 : tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  %o0 = linalg.generic {indexing_maps = [#wp3, #wv3, #wo3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%pr0, %vr0 : tensor<2x1x?xf32>, tensor<?x2x4xf32>) outs(%oz0 : tensor<1x2x4xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<1x2x4xf32>
  return %o0, %kw0, %vw0 : tensor<1x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>
}

// -----

// The keys are read up to pos, without the token this step wrote.

// CHECK-LABEL: func.func @reads_without_new_token(
// CHECK-SAME: %{{[a-z0-9]+}}: tensor<1x16x2x4xf32>

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#red3 = affine_map<(d0, d1, d2) -> (d0, d1)>
#sq3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d3)>
#sk3 = affine_map<(d0, d1, d2, d3) -> (d2, d0, d3)>
#ss3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#wp3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
#wv3 = affine_map<(d0, d1, d2, d3) -> (d3, d0, d2)>
#wo3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d2)>

func.func @reads_without_new_token(%q: tensor<1x2x4xf32>, %k0: tensor<1x2x4xf32>, %v0: tensor<1x2x4xf32>, %kc: tensor<1x16x2x4xf32>, %vc: tensor<1x16x2x4xf32>, %pos: index)
    -> (tensor<1x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %c1 = arith.constant 1 : index
  %len = arith.addi %pos, %c1 : index
  %kw0 = tensor.insert_slice %k0 into %kc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<1x16x2x4xf32>
  // expected-remark@below {{not adopted: attention reads 0 positions at pos = 0, fewer than the written prefix pos + 1}}
  %kr0 = tensor.extract_slice %kw0[0, 0, 0, 0] [1, %pos, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %vw0 = tensor.insert_slice %v0 into %vc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<1x16x2x4xf32>
  %vr0 = tensor.extract_slice %vw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %se0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sz0 = linalg.fill ins(%zero : f32) outs(%se0 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %s0 = linalg.generic {indexing_maps = [#sq3, #sk3, #ss3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %kr0 : tensor<1x2x4xf32>, tensor<?x2x4xf32>) outs(%sz0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<2x1x?xf32>
  %scale0 = arith.constant 0.5 : f32
  %sce0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sc0 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s0 : tensor<2x1x?xf32>) outs(%sce0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %out: f32):
      %m = arith.mulf %in, %scale0 : f32
      linalg.yield %m : f32
    } -> tensor<2x1x?xf32>
  %pe0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %pr0 = linalg.softmax dimension(2) ins(%sc0 : tensor<2x1x?xf32>) outs(%pe0 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %oe0 = tensor.empty() : tensor<1x2x4xf32>
  %oz0 = linalg.fill ins(%zero : f32) outs(%oe0 : tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  %o0 = linalg.generic {indexing_maps = [#wp3, #wv3, #wo3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%pr0, %vr0 : tensor<2x1x?xf32>, tensor<?x2x4xf32>) outs(%oz0 : tensor<1x2x4xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<1x2x4xf32>
  return %o0, %kw0, %vw0 : tensor<1x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>
}

// -----

// A cache of 1 position written 2 tokens at a time (the queries are 2
// tokens).

// CHECK-LABEL: func.func @capacity_below_step(
// CHECK-SAME: %{{[a-z0-9]+}}: tensor<1x1x2x4xf32>

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#red3 = affine_map<(d0, d1, d2) -> (d0, d1)>
#sq3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d3)>
#sk3 = affine_map<(d0, d1, d2, d3) -> (d2, d0, d3)>
#ss3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#wp3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
#wv3 = affine_map<(d0, d1, d2, d3) -> (d3, d0, d2)>
#wo3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d2)>

func.func @capacity_below_step(%q: tensor<2x2x4xf32>, %k0: tensor<2x2x4xf32>, %v0: tensor<2x2x4xf32>, %kc: tensor<1x1x2x4xf32>, %vc: tensor<1x1x2x4xf32>, %pos: index)
    -> (tensor<2x2x4xf32>, tensor<1x1x2x4xf32>, tensor<1x1x2x4xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %c1 = arith.constant 2 : index
  %len = arith.addi %pos, %c1 : index
  %kw0 = tensor.insert_slice %k0 into %kc[0, %pos, 0, 0] [1, 2, 2, 4] [1, 1, 1, 1] : tensor<2x2x4xf32> into tensor<1x1x2x4xf32>
  // expected-remark@below {{not adopted: the cache holds fewer positions than one step writes}}
  %kr0 = tensor.extract_slice %kw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x1x2x4xf32> to tensor<?x2x4xf32>
  %vw0 = tensor.insert_slice %v0 into %vc[0, %pos, 0, 0] [1, 2, 2, 4] [1, 1, 1, 1] : tensor<2x2x4xf32> into tensor<1x1x2x4xf32>
  %vr0 = tensor.extract_slice %vw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x1x2x4xf32> to tensor<?x2x4xf32>
  %se0 = tensor.empty(%len) : tensor<2x2x?xf32>
  %sz0 = linalg.fill ins(%zero : f32) outs(%se0 : tensor<2x2x?xf32>) -> tensor<2x2x?xf32>
  %s0 = linalg.generic {indexing_maps = [#sq3, #sk3, #ss3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %kr0 : tensor<2x2x4xf32>, tensor<?x2x4xf32>) outs(%sz0 : tensor<2x2x?xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<2x2x?xf32>
  %scale0 = arith.constant 0.5 : f32
  %sce0 = tensor.empty(%len) : tensor<2x2x?xf32>
  %sc0 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s0 : tensor<2x2x?xf32>) outs(%sce0 : tensor<2x2x?xf32>) {
    ^bb0(%in: f32, %out: f32):
      %m = arith.mulf %in, %scale0 : f32
      linalg.yield %m : f32
    } -> tensor<2x2x?xf32>
  %pe0 = tensor.empty(%len) : tensor<2x2x?xf32>
  %pr0 = linalg.softmax dimension(2) ins(%sc0 : tensor<2x2x?xf32>) outs(%pe0 : tensor<2x2x?xf32>) -> tensor<2x2x?xf32>
  %oe0 = tensor.empty() : tensor<2x2x4xf32>
  %oz0 = linalg.fill ins(%zero : f32) outs(%oe0 : tensor<2x2x4xf32>) -> tensor<2x2x4xf32>
  %o0 = linalg.generic {indexing_maps = [#wp3, #wv3, #wo3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%pr0, %vr0 : tensor<2x2x?xf32>, tensor<?x2x4xf32>) outs(%oz0 : tensor<2x2x4xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<2x2x4xf32>
  return %o0, %kw0, %vw0 : tensor<2x2x4xf32>, tensor<1x1x2x4xf32>, tensor<1x1x2x4xf32>
}

// -----

// The softmax gets the squared scores, not the scores times a constant.

// CHECK-LABEL: func.func @squares_the_scores(
// CHECK-SAME: %{{[a-z0-9]+}}: tensor<1x16x2x4xf32>

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#red3 = affine_map<(d0, d1, d2) -> (d0, d1)>
#sq3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d3)>
#sk3 = affine_map<(d0, d1, d2, d3) -> (d2, d0, d3)>
#ss3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#wp3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
#wv3 = affine_map<(d0, d1, d2, d3) -> (d3, d0, d2)>
#wo3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d2)>

func.func @squares_the_scores(%q: tensor<1x2x4xf32>, %k0: tensor<1x2x4xf32>, %v0: tensor<1x2x4xf32>, %kc: tensor<1x16x2x4xf32>, %vc: tensor<1x16x2x4xf32>, %pos: index)
    -> (tensor<1x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %c1 = arith.constant 1 : index
  %len = arith.addi %pos, %c1 : index
  %kw0 = tensor.insert_slice %k0 into %kc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<1x16x2x4xf32>
  %kr0 = tensor.extract_slice %kw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %vw0 = tensor.insert_slice %v0 into %vc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<1x16x2x4xf32>
  %vr0 = tensor.extract_slice %vw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %se0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sz0 = linalg.fill ins(%zero : f32) outs(%se0 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %s0 = linalg.generic {indexing_maps = [#sq3, #sk3, #ss3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %kr0 : tensor<1x2x4xf32>, tensor<?x2x4xf32>) outs(%sz0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<2x1x?xf32>
  %scale0 = arith.constant 0.5 : f32
  %sce0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sc0 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s0 : tensor<2x1x?xf32>) outs(%sce0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %out: f32):
      %m = arith.mulf %in, %in : f32
      linalg.yield %m : f32
    } -> tensor<2x1x?xf32>
  %pe0 = tensor.empty(%len) : tensor<2x1x?xf32>
  // expected-remark@below {{not adopted: the softmax does not get the scores times one constant at the positions it sees}}
  %pr0 = linalg.softmax dimension(2) ins(%sc0 : tensor<2x1x?xf32>) outs(%pe0 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %oe0 = tensor.empty() : tensor<1x2x4xf32>
  %oz0 = linalg.fill ins(%zero : f32) outs(%oe0 : tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  %o0 = linalg.generic {indexing_maps = [#wp3, #wv3, #wo3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%pr0, %vr0 : tensor<2x1x?xf32>, tensor<?x2x4xf32>) outs(%oz0 : tensor<1x2x4xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<1x2x4xf32>
  return %o0, %kw0, %vw0 : tensor<1x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>
}

// -----

// The step writes 0 tokens: no query, so no position to check the scale and
// mask at.

// CHECK-LABEL: func.func @writes_no_token(
// CHECK-SAME: %{{[a-z0-9]+}}: tensor<1x16x2x4xf32>

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#red3 = affine_map<(d0, d1, d2) -> (d0, d1)>
#sq3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d3)>
#sk3 = affine_map<(d0, d1, d2, d3) -> (d2, d0, d3)>
#ss3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#wp3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
#wv3 = affine_map<(d0, d1, d2, d3) -> (d3, d0, d2)>
#wo3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d2)>

func.func @writes_no_token(%q: tensor<1x2x4xf32>, %k0: tensor<0x2x4xf32>, %v0: tensor<0x2x4xf32>, %kc: tensor<1x16x2x4xf32>, %vc: tensor<1x16x2x4xf32>, %pos: index)
    -> (tensor<1x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %c1 = arith.constant 0 : index
  %len = arith.addi %pos, %c1 : index
  %kw0 = tensor.insert_slice %k0 into %kc[0, %pos, 0, 0] [1, 0, 2, 4] [1, 1, 1, 1] : tensor<0x2x4xf32> into tensor<1x16x2x4xf32>
  %kr0 = tensor.extract_slice %kw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %vw0 = tensor.insert_slice %v0 into %vc[0, %pos, 0, 0] [1, 0, 2, 4] [1, 1, 1, 1] : tensor<0x2x4xf32> into tensor<1x16x2x4xf32>
  %vr0 = tensor.extract_slice %vw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %se0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sz0 = linalg.fill ins(%zero : f32) outs(%se0 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %s0 = linalg.generic {indexing_maps = [#sq3, #sk3, #ss3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %kr0 : tensor<1x2x4xf32>, tensor<?x2x4xf32>) outs(%sz0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<2x1x?xf32>
  %scale0 = arith.constant 0.5 : f32
  %sce0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sc0 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s0 : tensor<2x1x?xf32>) outs(%sce0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %out: f32):
      %m = arith.mulf %in, %scale0 : f32
      linalg.yield %m : f32
    } -> tensor<2x1x?xf32>
  %pe0 = tensor.empty(%len) : tensor<2x1x?xf32>
  // expected-remark@below {{not adopted: no position of the cache could be checked}}
  %pr0 = linalg.softmax dimension(2) ins(%sc0 : tensor<2x1x?xf32>) outs(%pe0 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %oe0 = tensor.empty() : tensor<1x2x4xf32>
  %oz0 = linalg.fill ins(%zero : f32) outs(%oe0 : tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  %o0 = linalg.generic {indexing_maps = [#wp3, #wv3, #wo3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%pr0, %vr0 : tensor<2x1x?xf32>, tensor<?x2x4xf32>) outs(%oz0 : tensor<1x2x4xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<1x2x4xf32>
  return %o0, %kw0, %vw0 : tensor<1x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>
}

// -----

// The scores contract the queries with the new key, not with a cache read.

// CHECK-LABEL: func.func @keys_not_from_cache(
// CHECK-SAME: %{{[a-z0-9]+}}: tensor<1x16x2x4xf32>

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#red3 = affine_map<(d0, d1, d2) -> (d0, d1)>
#sq3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d3)>
#sk3 = affine_map<(d0, d1, d2, d3) -> (d2, d0, d3)>
#ss3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#wp3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
#wv3 = affine_map<(d0, d1, d2, d3) -> (d3, d0, d2)>
#wo3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d2)>

func.func @keys_not_from_cache(%q: tensor<1x2x4xf32>, %k0: tensor<1x2x4xf32>, %v0: tensor<1x2x4xf32>, %kc: tensor<1x16x2x4xf32>, %vc: tensor<1x16x2x4xf32>, %pos: index)
    -> (tensor<1x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %c1 = arith.constant 1 : index
  %len = arith.addi %pos, %c1 : index
  %kw0 = tensor.insert_slice %k0 into %kc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<1x16x2x4xf32>
  %kr0 = tensor.extract_slice %kw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %vw0 = tensor.insert_slice %v0 into %vc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<1x16x2x4xf32>
  %vr0 = tensor.extract_slice %vw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %se0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sz0 = linalg.fill ins(%zero : f32) outs(%se0 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  // expected-remark@below {{not adopted: neither operand of the scores contraction is a cache read}}
  %s0 = linalg.generic {indexing_maps = [#sq3, #sk3, #ss3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %k0 : tensor<1x2x4xf32>, tensor<1x2x4xf32>) outs(%sz0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<2x1x?xf32>
  %scale0 = arith.constant 0.5 : f32
  %sce0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sc0 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s0 : tensor<2x1x?xf32>) outs(%sce0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %out: f32):
      %m = arith.mulf %in, %scale0 : f32
      linalg.yield %m : f32
    } -> tensor<2x1x?xf32>
  %pe0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %pr0 = linalg.softmax dimension(2) ins(%sc0 : tensor<2x1x?xf32>) outs(%pe0 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %oe0 = tensor.empty() : tensor<1x2x4xf32>
  %oz0 = linalg.fill ins(%zero : f32) outs(%oe0 : tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  %o0 = linalg.generic {indexing_maps = [#wp3, #wv3, #wo3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%pr0, %vr0 : tensor<2x1x?xf32>, tensor<?x2x4xf32>) outs(%oz0 : tensor<1x2x4xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<1x2x4xf32>
  return %o0, %kw0, %vw0 : tensor<1x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>
}

// -----

// The scores accumulate onto 1, not 0.

// CHECK-LABEL: func.func @scores_start_at_one(
// CHECK-SAME: %{{[a-z0-9]+}}: tensor<1x16x2x4xf32>

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#red3 = affine_map<(d0, d1, d2) -> (d0, d1)>
#sq3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d3)>
#sk3 = affine_map<(d0, d1, d2, d3) -> (d2, d0, d3)>
#ss3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#wp3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
#wv3 = affine_map<(d0, d1, d2, d3) -> (d3, d0, d2)>
#wo3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d2)>

func.func @scores_start_at_one(%q: tensor<1x2x4xf32>, %k0: tensor<1x2x4xf32>, %v0: tensor<1x2x4xf32>, %kc: tensor<1x16x2x4xf32>, %vc: tensor<1x16x2x4xf32>, %pos: index)
    -> (tensor<1x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %c1 = arith.constant 1 : index
  %len = arith.addi %pos, %c1 : index
  %kw0 = tensor.insert_slice %k0 into %kc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<1x16x2x4xf32>
  %kr0 = tensor.extract_slice %kw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %vw0 = tensor.insert_slice %v0 into %vc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<1x16x2x4xf32>
  %vr0 = tensor.extract_slice %vw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %se0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %one = arith.constant 1.0 : f32
  %sz0 = linalg.fill ins(%one : f32) outs(%se0 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  // expected-remark@below {{not adopted: the scores contraction does not start from zero}}
  %s0 = linalg.generic {indexing_maps = [#sq3, #sk3, #ss3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %kr0 : tensor<1x2x4xf32>, tensor<?x2x4xf32>) outs(%sz0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<2x1x?xf32>
  %scale0 = arith.constant 0.5 : f32
  %sce0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sc0 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s0 : tensor<2x1x?xf32>) outs(%sce0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %out: f32):
      %m = arith.mulf %in, %scale0 : f32
      linalg.yield %m : f32
    } -> tensor<2x1x?xf32>
  %pe0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %pr0 = linalg.softmax dimension(2) ins(%sc0 : tensor<2x1x?xf32>) outs(%pe0 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %oe0 = tensor.empty() : tensor<1x2x4xf32>
  %oz0 = linalg.fill ins(%zero : f32) outs(%oe0 : tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  %o0 = linalg.generic {indexing_maps = [#wp3, #wv3, #wo3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%pr0, %vr0 : tensor<2x1x?xf32>, tensor<?x2x4xf32>) outs(%oz0 : tensor<1x2x4xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<1x2x4xf32>
  return %o0, %kw0, %vw0 : tensor<1x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>
}

// -----

// The queries are indexed with a constant, not a loop, in their first
// dimension.

// CHECK-LABEL: func.func @queries_map_has_constant(
// CHECK-SAME: %{{[a-z0-9]+}}: tensor<1x16x2x4xf32>

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#red3 = affine_map<(d0, d1, d2) -> (d0, d1)>
#sq3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d3)>
#sk3 = affine_map<(d0, d1, d2, d3) -> (d2, d0, d3)>
#ss3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#wp3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
#wv3 = affine_map<(d0, d1, d2, d3) -> (d3, d0, d2)>
#wo3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d2)>

func.func @queries_map_has_constant(%q: tensor<1x2x4xf32>, %k0: tensor<1x2x4xf32>, %v0: tensor<1x2x4xf32>, %kc: tensor<1x16x2x4xf32>, %vc: tensor<1x16x2x4xf32>, %pos: index)
    -> (tensor<1x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %c1 = arith.constant 1 : index
  %len = arith.addi %pos, %c1 : index
  %kw0 = tensor.insert_slice %k0 into %kc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<1x16x2x4xf32>
  %kr0 = tensor.extract_slice %kw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %vw0 = tensor.insert_slice %v0 into %vc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<1x16x2x4xf32>
  %vr0 = tensor.extract_slice %vw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %se0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sz0 = linalg.fill ins(%zero : f32) outs(%se0 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  // expected-remark@below {{not adopted: the scores contraction's indexing maps are not permutations}}
  %s0 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (0, d0, d3)>, #sk3, #ss3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %kr0 : tensor<1x2x4xf32>, tensor<?x2x4xf32>) outs(%sz0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<2x1x?xf32>
  %scale0 = arith.constant 0.5 : f32
  %sce0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sc0 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s0 : tensor<2x1x?xf32>) outs(%sce0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %out: f32):
      %m = arith.mulf %in, %scale0 : f32
      linalg.yield %m : f32
    } -> tensor<2x1x?xf32>
  %pe0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %pr0 = linalg.softmax dimension(2) ins(%sc0 : tensor<2x1x?xf32>) outs(%pe0 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %oe0 = tensor.empty() : tensor<1x2x4xf32>
  %oz0 = linalg.fill ins(%zero : f32) outs(%oe0 : tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  %o0 = linalg.generic {indexing_maps = [#wp3, #wv3, #wo3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%pr0, %vr0 : tensor<2x1x?xf32>, tensor<?x2x4xf32>) outs(%oz0 : tensor<1x2x4xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<1x2x4xf32>
  return %o0, %kw0, %vw0 : tensor<1x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>
}

// -----

// The queries are indexed by the cached position loop.

// CHECK-LABEL: func.func @queries_index_positions(
// CHECK-SAME: %{{[a-z0-9]+}}: tensor<1x16x2x4xf32>

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#red3 = affine_map<(d0, d1, d2) -> (d0, d1)>
#sq3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d3)>
#sk3 = affine_map<(d0, d1, d2, d3) -> (d2, d0, d3)>
#ss3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#wp3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
#wv3 = affine_map<(d0, d1, d2, d3) -> (d3, d0, d2)>
#wo3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d2)>

func.func @queries_index_positions(%q: tensor<1x2x4xf32>, %k0: tensor<1x2x4xf32>, %v0: tensor<1x2x4xf32>, %kc: tensor<1x16x2x4xf32>, %vc: tensor<1x16x2x4xf32>, %pos: index)
    -> (tensor<1x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %c1 = arith.constant 1 : index
  %len = arith.addi %pos, %c1 : index
  %kw0 = tensor.insert_slice %k0 into %kc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<1x16x2x4xf32>
  %kr0 = tensor.extract_slice %kw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %vw0 = tensor.insert_slice %v0 into %vc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<1x16x2x4xf32>
  %vr0 = tensor.extract_slice %vw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %se0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sz0 = linalg.fill ins(%zero : f32) outs(%se0 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  // expected-remark@below {{not adopted: the queries index the cached positions}}
  %s0 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d2, d0, d3)>, #sk3, #ss3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %kr0 : tensor<1x2x4xf32>, tensor<?x2x4xf32>) outs(%sz0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<2x1x?xf32>
  %scale0 = arith.constant 0.5 : f32
  %sce0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sc0 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s0 : tensor<2x1x?xf32>) outs(%sce0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %out: f32):
      %m = arith.mulf %in, %scale0 : f32
      linalg.yield %m : f32
    } -> tensor<2x1x?xf32>
  %pe0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %pr0 = linalg.softmax dimension(2) ins(%sc0 : tensor<2x1x?xf32>) outs(%pe0 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %oe0 = tensor.empty() : tensor<1x2x4xf32>
  %oz0 = linalg.fill ins(%zero : f32) outs(%oe0 : tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  %o0 = linalg.generic {indexing_maps = [#wp3, #wv3, #wo3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%pr0, %vr0 : tensor<2x1x?xf32>, tensor<?x2x4xf32>) outs(%oz0 : tensor<1x2x4xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<1x2x4xf32>
  return %o0, %kw0, %vw0 : tensor<1x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>
}

// -----

// 3 queries for the 1 token the step writes.

// CHECK-LABEL: func.func @three_queries_one_token(
// CHECK-SAME: %{{[a-z0-9]+}}: tensor<1x16x2x4xf32>

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#red3 = affine_map<(d0, d1, d2) -> (d0, d1)>
#sq3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d3)>
#sk3 = affine_map<(d0, d1, d2, d3) -> (d2, d0, d3)>
#ss3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#wp3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
#wv3 = affine_map<(d0, d1, d2, d3) -> (d3, d0, d2)>
#wo3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d2)>

func.func @three_queries_one_token(%q: tensor<3x2x4xf32>, %k0: tensor<1x2x4xf32>, %v0: tensor<1x2x4xf32>, %kc: tensor<1x16x2x4xf32>, %vc: tensor<1x16x2x4xf32>, %pos: index)
    -> (tensor<3x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %c1 = arith.constant 1 : index
  %len = arith.addi %pos, %c1 : index
  %kw0 = tensor.insert_slice %k0 into %kc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<1x16x2x4xf32>
  %kr0 = tensor.extract_slice %kw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %vw0 = tensor.insert_slice %v0 into %vc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<1x16x2x4xf32>
  %vr0 = tensor.extract_slice %vw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %se0 = tensor.empty(%len) : tensor<2x3x?xf32>
  %sz0 = linalg.fill ins(%zero : f32) outs(%se0 : tensor<2x3x?xf32>) -> tensor<2x3x?xf32>
  // expected-remark@below {{not adopted: 3 queries for 1 written tokens}}
  %s0 = linalg.generic {indexing_maps = [#sq3, #sk3, #ss3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %kr0 : tensor<3x2x4xf32>, tensor<?x2x4xf32>) outs(%sz0 : tensor<2x3x?xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<2x3x?xf32>
  %scale0 = arith.constant 0.5 : f32
  %sce0 = tensor.empty(%len) : tensor<2x3x?xf32>
  %sc0 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s0 : tensor<2x3x?xf32>) outs(%sce0 : tensor<2x3x?xf32>) {
    ^bb0(%in: f32, %out: f32):
      %m = arith.mulf %in, %scale0 : f32
      linalg.yield %m : f32
    } -> tensor<2x3x?xf32>
  %pe0 = tensor.empty(%len) : tensor<2x3x?xf32>
  %pr0 = linalg.softmax dimension(2) ins(%sc0 : tensor<2x3x?xf32>) outs(%pe0 : tensor<2x3x?xf32>) -> tensor<2x3x?xf32>
  %oe0 = tensor.empty() : tensor<3x2x4xf32>
  %oz0 = linalg.fill ins(%zero : f32) outs(%oe0 : tensor<3x2x4xf32>) -> tensor<3x2x4xf32>
  %o0 = linalg.generic {indexing_maps = [#wp3, #wv3, #wo3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%pr0, %vr0 : tensor<2x3x?xf32>, tensor<?x2x4xf32>) outs(%oz0 : tensor<3x2x4xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<3x2x4xf32>
  return %o0, %kw0, %vw0 : tensor<3x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>
}

// -----

// The scores contraction reduces over the heads and keeps head_dim.

// CHECK-LABEL: func.func @scores_reduce_heads(
// CHECK-SAME: %{{[a-z0-9]+}}: tensor<1x16x2x4xf32>

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#red3 = affine_map<(d0, d1, d2) -> (d0, d1)>
#sq3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d3)>
#sk3 = affine_map<(d0, d1, d2, d3) -> (d2, d0, d3)>
#ss3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#wp3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
#wv3 = affine_map<(d0, d1, d2, d3) -> (d3, d0, d2)>
#wo3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d2)>

func.func @scores_reduce_heads(%q: tensor<1x2x4xf32>, %k0: tensor<1x2x4xf32>, %v0: tensor<1x2x4xf32>, %kc: tensor<1x16x2x4xf32>, %vc: tensor<1x16x2x4xf32>, %pos: index)
    -> (tensor<1x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %c1 = arith.constant 1 : index
  %len = arith.addi %pos, %c1 : index
  %kw0 = tensor.insert_slice %k0 into %kc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<1x16x2x4xf32>
  %kr0 = tensor.extract_slice %kw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %vw0 = tensor.insert_slice %v0 into %vc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<1x16x2x4xf32>
  %vr0 = tensor.extract_slice %vw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %se0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sz0 = linalg.fill ins(%zero : f32) outs(%se0 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  // expected-remark@below {{not adopted: the scores contraction reduces over another dimension than head_dim}}
  %s0 = linalg.generic {indexing_maps = [#sq3, #sk3, #ss3], iterator_types = ["reduction", "parallel", "parallel", "parallel"]} ins(%q, %kr0 : tensor<1x2x4xf32>, tensor<?x2x4xf32>) outs(%sz0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<2x1x?xf32>
  %scale0 = arith.constant 0.5 : f32
  %sce0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sc0 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s0 : tensor<2x1x?xf32>) outs(%sce0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %out: f32):
      %m = arith.mulf %in, %scale0 : f32
      linalg.yield %m : f32
    } -> tensor<2x1x?xf32>
  %pe0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %pr0 = linalg.softmax dimension(2) ins(%sc0 : tensor<2x1x?xf32>) outs(%pe0 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %oe0 = tensor.empty() : tensor<1x2x4xf32>
  %oz0 = linalg.fill ins(%zero : f32) outs(%oe0 : tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  %o0 = linalg.generic {indexing_maps = [#wp3, #wv3, #wo3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%pr0, %vr0 : tensor<2x1x?xf32>, tensor<?x2x4xf32>) outs(%oz0 : tensor<1x2x4xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<1x2x4xf32>
  return %o0, %kw0, %vw0 : tensor<1x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>
}

// -----

// The scores contraction reduces over the (unit) query dimension and keeps
// head_dim.

// CHECK-LABEL: func.func @scores_keep_head_dim(
// CHECK-SAME: %{{[a-z0-9]+}}: tensor<1x16x2x4xf32>

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#red3 = affine_map<(d0, d1, d2) -> (d0, d1)>
#sq3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d3)>
#sk3 = affine_map<(d0, d1, d2, d3) -> (d2, d0, d3)>
#ss3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#wp3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
#wv3 = affine_map<(d0, d1, d2, d3) -> (d3, d0, d2)>
#wo3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d2)>

func.func @scores_keep_head_dim(%q: tensor<1x2x4xf32>, %k0: tensor<1x2x4xf32>, %v0: tensor<1x2x4xf32>, %kc: tensor<1x16x2x4xf32>, %vc: tensor<1x16x2x4xf32>, %pos: index)
    -> (tensor<1x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %c1 = arith.constant 1 : index
  %len = arith.addi %pos, %c1 : index
  %kw0 = tensor.insert_slice %k0 into %kc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<1x16x2x4xf32>
  %kr0 = tensor.extract_slice %kw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %vw0 = tensor.insert_slice %v0 into %vc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<1x16x2x4xf32>
  %vr0 = tensor.extract_slice %vw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %se0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sz0 = linalg.fill ins(%zero : f32) outs(%se0 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  // expected-remark@below {{not adopted: the scores contraction does not reduce over head_dim}}
  %s0 = linalg.generic {indexing_maps = [#sq3, #sk3, #ss3], iterator_types = ["parallel", "reduction", "parallel", "parallel"]} ins(%q, %kr0 : tensor<1x2x4xf32>, tensor<?x2x4xf32>) outs(%sz0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<2x1x?xf32>
  %scale0 = arith.constant 0.5 : f32
  %sce0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sc0 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s0 : tensor<2x1x?xf32>) outs(%sce0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %out: f32):
      %m = arith.mulf %in, %scale0 : f32
      linalg.yield %m : f32
    } -> tensor<2x1x?xf32>
  %pe0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %pr0 = linalg.softmax dimension(2) ins(%sc0 : tensor<2x1x?xf32>) outs(%pe0 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %oe0 = tensor.empty() : tensor<1x2x4xf32>
  %oz0 = linalg.fill ins(%zero : f32) outs(%oe0 : tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  %o0 = linalg.generic {indexing_maps = [#wp3, #wv3, #wo3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%pr0, %vr0 : tensor<2x1x?xf32>, tensor<?x2x4xf32>) outs(%oz0 : tensor<1x2x4xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<1x2x4xf32>
  return %o0, %kw0, %vw0 : tensor<1x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>
}

// -----

// The step writes 2 tokens but has 1 query.

// CHECK-LABEL: func.func @one_query_two_tokens(
// CHECK-SAME: %{{[a-z0-9]+}}: tensor<1x16x2x4xf32>

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#red3 = affine_map<(d0, d1, d2) -> (d0, d1)>
#sq3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d3)>
#sk3 = affine_map<(d0, d1, d2, d3) -> (d2, d0, d3)>
#ss3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#wp3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
#wv3 = affine_map<(d0, d1, d2, d3) -> (d3, d0, d2)>
#wo3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d2)>

func.func @one_query_two_tokens(%q: tensor<1x2x4xf32>, %k0: tensor<2x2x4xf32>, %v0: tensor<2x2x4xf32>, %kc: tensor<1x16x2x4xf32>, %vc: tensor<1x16x2x4xf32>, %pos: index)
    -> (tensor<1x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %c1 = arith.constant 2 : index
  %len = arith.addi %pos, %c1 : index
  %kw0 = tensor.insert_slice %k0 into %kc[0, %pos, 0, 0] [1, 2, 2, 4] [1, 1, 1, 1] : tensor<2x2x4xf32> into tensor<1x16x2x4xf32>
  %kr0 = tensor.extract_slice %kw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %vw0 = tensor.insert_slice %v0 into %vc[0, %pos, 0, 0] [1, 2, 2, 4] [1, 1, 1, 1] : tensor<2x2x4xf32> into tensor<1x16x2x4xf32>
  %vr0 = tensor.extract_slice %vw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %se0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sz0 = linalg.fill ins(%zero : f32) outs(%se0 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  // expected-remark@below {{not adopted: 1 query for 2 written tokens}}
  %s0 = linalg.generic {indexing_maps = [#sq3, #sk3, #ss3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %kr0 : tensor<1x2x4xf32>, tensor<?x2x4xf32>) outs(%sz0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<2x1x?xf32>
  %scale0 = arith.constant 0.5 : f32
  %sce0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sc0 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s0 : tensor<2x1x?xf32>) outs(%sce0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %out: f32):
      %m = arith.mulf %in, %scale0 : f32
      linalg.yield %m : f32
    } -> tensor<2x1x?xf32>
  %pe0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %pr0 = linalg.softmax dimension(2) ins(%sc0 : tensor<2x1x?xf32>) outs(%pe0 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %oe0 = tensor.empty() : tensor<1x2x4xf32>
  %oz0 = linalg.fill ins(%zero : f32) outs(%oe0 : tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  %o0 = linalg.generic {indexing_maps = [#wp3, #wv3, #wo3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%pr0, %vr0 : tensor<2x1x?xf32>, tensor<?x2x4xf32>) outs(%oz0 : tensor<1x2x4xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<1x2x4xf32>
  return %o0, %kw0, %vw0 : tensor<1x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>
}

// -----

// The queries are f8E4M3FN, extended to f32 in the contraction.

// CHECK-LABEL: func.func @f8_queries(
// CHECK-SAME: %{{[a-z0-9]+}}: tensor<1x16x2x4xf32>

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#red3 = affine_map<(d0, d1, d2) -> (d0, d1)>
#sq3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d3)>
#sk3 = affine_map<(d0, d1, d2, d3) -> (d2, d0, d3)>
#ss3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#wp3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
#wv3 = affine_map<(d0, d1, d2, d3) -> (d3, d0, d2)>
#wo3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d2)>

func.func @f8_queries(%q: tensor<1x2x4xf8E4M3FN>, %k0: tensor<1x2x4xf32>, %v0: tensor<1x2x4xf32>, %kc: tensor<1x16x2x4xf32>, %vc: tensor<1x16x2x4xf32>, %pos: index)
    -> (tensor<1x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %c1 = arith.constant 1 : index
  %len = arith.addi %pos, %c1 : index
  %kw0 = tensor.insert_slice %k0 into %kc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<1x16x2x4xf32>
  %kr0 = tensor.extract_slice %kw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %vw0 = tensor.insert_slice %v0 into %vc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<1x16x2x4xf32>
  %vr0 = tensor.extract_slice %vw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %se0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sz0 = linalg.fill ins(%zero : f32) outs(%se0 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  // expected-remark@below {{not adopted: queries are not f32, f16 or bf16}}
  %s0 = linalg.generic {indexing_maps = [#sq3, #sk3, #ss3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %kr0 : tensor<1x2x4xf8E4M3FN>, tensor<?x2x4xf32>) outs(%sz0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f8E4M3FN, %in_1: f32, %out: f32):
      %qe = arith.extf %in : f8E4M3FN to f32
      %m = arith.mulf %qe, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<2x1x?xf32>
  %scale0 = arith.constant 0.5 : f32
  %sce0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sc0 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s0 : tensor<2x1x?xf32>) outs(%sce0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %out: f32):
      %m = arith.mulf %in, %scale0 : f32
      linalg.yield %m : f32
    } -> tensor<2x1x?xf32>
  %pe0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %pr0 = linalg.softmax dimension(2) ins(%sc0 : tensor<2x1x?xf32>) outs(%pe0 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %oe0 = tensor.empty() : tensor<1x2x4xf32>
  %oz0 = linalg.fill ins(%zero : f32) outs(%oe0 : tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  %o0 = linalg.generic {indexing_maps = [#wp3, #wv3, #wo3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%pr0, %vr0 : tensor<2x1x?xf32>, tensor<?x2x4xf32>) outs(%oz0 : tensor<1x2x4xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<1x2x4xf32>
  return %o0, %kw0, %vw0 : tensor<1x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>
}

// -----

// The op adding a (zero) bias to the scores also transposes them.

// CHECK-LABEL: func.func @transposes_while_masking(
// CHECK-SAME: %{{[a-z0-9]+}}: tensor<1x16x2x4xf32>

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#red3 = affine_map<(d0, d1, d2) -> (d0, d1)>
#sq3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d3)>
#sk3 = affine_map<(d0, d1, d2, d3) -> (d2, d0, d3)>
#ss3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#wp3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
#wv3 = affine_map<(d0, d1, d2, d3) -> (d3, d0, d2)>
#wo3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d2)>

func.func @transposes_while_masking(%q: tensor<1x2x4xf32>, %k0: tensor<1x2x4xf32>, %v0: tensor<1x2x4xf32>, %kc: tensor<1x16x2x4xf32>, %vc: tensor<1x16x2x4xf32>, %pos: index)
    -> (tensor<1x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %c1 = arith.constant 1 : index
  %len = arith.addi %pos, %c1 : index
  %kw0 = tensor.insert_slice %k0 into %kc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<1x16x2x4xf32>
  %kr0 = tensor.extract_slice %kw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %vw0 = tensor.insert_slice %v0 into %vc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<1x16x2x4xf32>
  %vr0 = tensor.extract_slice %vw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %se0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sz0 = linalg.fill ins(%zero : f32) outs(%se0 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %s0 = linalg.generic {indexing_maps = [#sq3, #sk3, #ss3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %kr0 : tensor<1x2x4xf32>, tensor<?x2x4xf32>) outs(%sz0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<2x1x?xf32>
  %scale0 = arith.constant 0.5 : f32
  %sce0 = tensor.empty(%len) : tensor<1x2x?xf32>
  %bias = arith.constant dense<0.0> : tensor<f32>
  // expected-remark@below {{not adopted: an op between the scores and the softmax changes their layout}}
  %sc0 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d1, d0, d2)>, affine_map<(d0, d1, d2) -> ()>, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s0, %bias : tensor<2x1x?xf32>, tensor<f32>) outs(%sce0 : tensor<1x2x?xf32>) {
    ^bb0(%in: f32, %b: f32, %out: f32):
      %s = arith.mulf %in, %scale0 : f32
      %m = arith.addf %s, %b : f32
      linalg.yield %m : f32
    } -> tensor<1x2x?xf32>
  %pe0 = tensor.empty(%len) : tensor<1x2x?xf32>
  %pr0 = linalg.softmax dimension(2) ins(%sc0 : tensor<1x2x?xf32>) outs(%pe0 : tensor<1x2x?xf32>) -> tensor<1x2x?xf32>
  %oe0 = tensor.empty() : tensor<1x2x4xf32>
  %oz0 = linalg.fill ins(%zero : f32) outs(%oe0 : tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  %o0 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d1, d0, d3)>, #wv3, #wo3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%pr0, %vr0 : tensor<1x2x?xf32>, tensor<?x2x4xf32>) outs(%oz0 : tensor<1x2x4xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<1x2x4xf32>
  return %o0, %kw0, %vw0 : tensor<1x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>
}

// -----

// A generic both transposes and squares the scores: not data movement kvq
// can follow.

// CHECK-LABEL: func.func @squares_while_transposing(
// CHECK-SAME: %{{[a-z0-9]+}}: tensor<1x16x2x4xf32>

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#red3 = affine_map<(d0, d1, d2) -> (d0, d1)>
#sq3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d3)>
#sk3 = affine_map<(d0, d1, d2, d3) -> (d2, d0, d3)>
#ss3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#wp3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
#wv3 = affine_map<(d0, d1, d2, d3) -> (d3, d0, d2)>
#wo3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d2)>

func.func @squares_while_transposing(%q: tensor<1x2x4xf32>, %k0: tensor<1x2x4xf32>, %v0: tensor<1x2x4xf32>, %kc: tensor<1x16x2x4xf32>, %vc: tensor<1x16x2x4xf32>, %pos: index)
    -> (tensor<1x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %c1 = arith.constant 1 : index
  %len = arith.addi %pos, %c1 : index
  %kw0 = tensor.insert_slice %k0 into %kc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<1x16x2x4xf32>
  %kr0 = tensor.extract_slice %kw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %vw0 = tensor.insert_slice %v0 into %vc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<1x16x2x4xf32>
  %vr0 = tensor.extract_slice %vw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %se0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sz0 = linalg.fill ins(%zero : f32) outs(%se0 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %s0 = linalg.generic {indexing_maps = [#sq3, #sk3, #ss3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %kr0 : tensor<1x2x4xf32>, tensor<?x2x4xf32>) outs(%sz0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<2x1x?xf32>
  %scale0 = arith.constant 0.5 : f32
  %sce0 = tensor.empty(%len) : tensor<1x2x?xf32>
  // expected-remark@below {{not adopted: 'linalg.generic' changes the layout in a way kvq does not follow}}
  %sc0 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d1, d0, d2)>, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s0 : tensor<2x1x?xf32>) outs(%sce0 : tensor<1x2x?xf32>) {
    ^bb0(%in: f32, %out: f32):
      %m = arith.mulf %in, %in : f32
      linalg.yield %m : f32
    } -> tensor<1x2x?xf32>
  %pe0 = tensor.empty(%len) : tensor<1x2x?xf32>
  %pr0 = linalg.softmax dimension(2) ins(%sc0 : tensor<1x2x?xf32>) outs(%pe0 : tensor<1x2x?xf32>) -> tensor<1x2x?xf32>
  %oe0 = tensor.empty() : tensor<1x2x4xf32>
  %oz0 = linalg.fill ins(%zero : f32) outs(%oe0 : tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  %o0 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d1, d0, d3)>, #wv3, #wo3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%pr0, %vr0 : tensor<1x2x?xf32>, tensor<?x2x4xf32>) outs(%oz0 : tensor<1x2x4xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<1x2x4xf32>
  return %o0, %kw0, %vw0 : tensor<1x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>
}

// -----

// The scores of all heads and positions are flattened into one softmax.

// CHECK-LABEL: func.func @merges_heads_and_positions(
// CHECK-SAME: %{{[a-z0-9]+}}: tensor<1x16x2x4xf32>

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#red3 = affine_map<(d0, d1, d2) -> (d0, d1)>
#sq3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d3)>
#sk3 = affine_map<(d0, d1, d2, d3) -> (d2, d0, d3)>
#ss3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#wp3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
#wv3 = affine_map<(d0, d1, d2, d3) -> (d3, d0, d2)>
#wo3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d2)>

func.func @merges_heads_and_positions(%q: tensor<1x2x4xf32>, %k0: tensor<1x2x4xf32>, %v0: tensor<1x2x4xf32>, %kc: tensor<1x16x2x4xf32>, %vc: tensor<1x16x2x4xf32>, %pos: index)
    -> (tensor<1x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %c1 = arith.constant 1 : index
  %len = arith.addi %pos, %c1 : index
  %kw0 = tensor.insert_slice %k0 into %kc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<1x16x2x4xf32>
  %kr0 = tensor.extract_slice %kw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %vw0 = tensor.insert_slice %v0 into %vc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<1x16x2x4xf32>
  %vr0 = tensor.extract_slice %vw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %se0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sz0 = linalg.fill ins(%zero : f32) outs(%se0 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %s0 = linalg.generic {indexing_maps = [#sq3, #sk3, #ss3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %kr0 : tensor<1x2x4xf32>, tensor<?x2x4xf32>) outs(%sz0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<2x1x?xf32>
  %scale0 = arith.constant 0.5 : f32
  %sce0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sc0 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s0 : tensor<2x1x?xf32>) outs(%sce0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %out: f32):
      %m = arith.mulf %in, %scale0 : f32
      linalg.yield %m : f32
    } -> tensor<2x1x?xf32>
  %pe0 = tensor.empty(%len) : tensor<2x1x?xf32>
  // expected-remark@below {{not adopted: 'tensor.collapse_shape' merges the KV head and position dimensions}}
  %flat = tensor.collapse_shape %sc0 [[0, 1, 2]] : tensor<2x1x?xf32> into tensor<?xf32>
  %fe = tensor.empty(%len) : tensor<?xf32>
  %fp = linalg.softmax dimension(0) ins(%flat : tensor<?xf32>) outs(%fe : tensor<?xf32>) -> tensor<?xf32>
  %pr0 = tensor.expand_shape %fp [[0, 1, 2]] output_shape [2, 1, %len] : tensor<?xf32> into tensor<2x1x?xf32>
  %oe0 = tensor.empty() : tensor<1x2x4xf32>
  %oz0 = linalg.fill ins(%zero : f32) outs(%oe0 : tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  %o0 = linalg.generic {indexing_maps = [#wp3, #wv3, #wo3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%pr0, %vr0 : tensor<2x1x?xf32>, tensor<?x2x4xf32>) outs(%oz0 : tensor<1x2x4xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<1x2x4xf32>
  return %o0, %kw0, %vw0 : tensor<1x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>
}

// -----

// The softmax normalises over the KV heads instead of the positions.

// CHECK-LABEL: func.func @softmax_over_heads(
// CHECK-SAME: %{{[a-z0-9]+}}: tensor<1x16x2x4xf32>

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#red3 = affine_map<(d0, d1, d2) -> (d0, d1)>
#sq3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d3)>
#sk3 = affine_map<(d0, d1, d2, d3) -> (d2, d0, d3)>
#ss3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#wp3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
#wv3 = affine_map<(d0, d1, d2, d3) -> (d3, d0, d2)>
#wo3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d2)>

func.func @softmax_over_heads(%q: tensor<1x2x4xf32>, %k0: tensor<1x2x4xf32>, %v0: tensor<1x2x4xf32>, %kc: tensor<1x16x2x4xf32>, %vc: tensor<1x16x2x4xf32>, %pos: index)
    -> (tensor<1x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %c1 = arith.constant 1 : index
  %len = arith.addi %pos, %c1 : index
  %kw0 = tensor.insert_slice %k0 into %kc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<1x16x2x4xf32>
  %kr0 = tensor.extract_slice %kw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %vw0 = tensor.insert_slice %v0 into %vc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<1x16x2x4xf32>
  %vr0 = tensor.extract_slice %vw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %se0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sz0 = linalg.fill ins(%zero : f32) outs(%se0 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %s0 = linalg.generic {indexing_maps = [#sq3, #sk3, #ss3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %kr0 : tensor<1x2x4xf32>, tensor<?x2x4xf32>) outs(%sz0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<2x1x?xf32>
  %scale0 = arith.constant 0.5 : f32
  %sce0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sc0 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s0 : tensor<2x1x?xf32>) outs(%sce0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %out: f32):
      %m = arith.mulf %in, %scale0 : f32
      linalg.yield %m : f32
    } -> tensor<2x1x?xf32>
  %pe0 = tensor.empty(%len) : tensor<2x1x?xf32>
  // expected-remark@below {{not adopted: the softmax is not over the cached positions}}
  %pr0 = linalg.softmax dimension(0) ins(%sc0 : tensor<2x1x?xf32>) outs(%pe0 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %oe0 = tensor.empty() : tensor<1x2x4xf32>
  %oz0 = linalg.fill ins(%zero : f32) outs(%oe0 : tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  %o0 = linalg.generic {indexing_maps = [#wp3, #wv3, #wo3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%pr0, %vr0 : tensor<2x1x?xf32>, tensor<?x2x4xf32>) outs(%oz0 : tensor<1x2x4xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<1x2x4xf32>
  return %o0, %kw0, %vw0 : tensor<1x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>
}

// -----

// The probabilities are summed with an argument, not with a read of the V
// cache.

// CHECK-LABEL: func.func @values_not_from_cache(
// CHECK-SAME: %{{[a-z0-9]+}}: tensor<1x16x2x4xf32>

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#red3 = affine_map<(d0, d1, d2) -> (d0, d1)>
#sq3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d3)>
#sk3 = affine_map<(d0, d1, d2, d3) -> (d2, d0, d3)>
#ss3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#wp3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
#wv3 = affine_map<(d0, d1, d2, d3) -> (d3, d0, d2)>
#wo3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d2)>

func.func @values_not_from_cache(%q: tensor<1x2x4xf32>, %k0: tensor<1x2x4xf32>, %v0: tensor<1x2x4xf32>, %kc: tensor<1x16x2x4xf32>, %vc: tensor<1x16x2x4xf32>, %pos: index, %vx: tensor<?x2x4xf32>)
    -> (tensor<1x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %c1 = arith.constant 1 : index
  %len = arith.addi %pos, %c1 : index
  %kw0 = tensor.insert_slice %k0 into %kc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<1x16x2x4xf32>
  %kr0 = tensor.extract_slice %kw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %vw0 = tensor.insert_slice %v0 into %vc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<1x16x2x4xf32>
  %vr0 = tensor.extract_slice %vw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %se0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sz0 = linalg.fill ins(%zero : f32) outs(%se0 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %s0 = linalg.generic {indexing_maps = [#sq3, #sk3, #ss3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %kr0 : tensor<1x2x4xf32>, tensor<?x2x4xf32>) outs(%sz0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<2x1x?xf32>
  %scale0 = arith.constant 0.5 : f32
  %sce0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sc0 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s0 : tensor<2x1x?xf32>) outs(%sce0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %out: f32):
      %m = arith.mulf %in, %scale0 : f32
      linalg.yield %m : f32
    } -> tensor<2x1x?xf32>
  %pe0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %pr0 = linalg.softmax dimension(2) ins(%sc0 : tensor<2x1x?xf32>) outs(%pe0 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %oe0 = tensor.empty() : tensor<1x2x4xf32>
  %oz0 = linalg.fill ins(%zero : f32) outs(%oe0 : tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  // expected-remark@below {{not adopted: the values are not a cache read}}
  %o0 = linalg.generic {indexing_maps = [#wp3, #wv3, #wo3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%pr0, %vx : tensor<2x1x?xf32>, tensor<?x2x4xf32>) outs(%oz0 : tensor<1x2x4xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<1x2x4xf32>
  return %o0, %kw0, %vw0 : tensor<1x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>
}

// -----

// The values read are doubled before the weighted sum.

// CHECK-LABEL: func.func @values_doubled(
// CHECK-SAME: %{{[a-z0-9]+}}: tensor<1x16x2x4xf32>

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#red3 = affine_map<(d0, d1, d2) -> (d0, d1)>
#sq3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d3)>
#sk3 = affine_map<(d0, d1, d2, d3) -> (d2, d0, d3)>
#ss3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#wp3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
#wv3 = affine_map<(d0, d1, d2, d3) -> (d3, d0, d2)>
#wo3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d2)>

func.func @values_doubled(%q: tensor<1x2x4xf32>, %k0: tensor<1x2x4xf32>, %v0: tensor<1x2x4xf32>, %kc: tensor<1x16x2x4xf32>, %vc: tensor<1x16x2x4xf32>, %pos: index)
    -> (tensor<1x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %c1 = arith.constant 1 : index
  %len = arith.addi %pos, %c1 : index
  %kw0 = tensor.insert_slice %k0 into %kc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<1x16x2x4xf32>
  %kr0 = tensor.extract_slice %kw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %vw0 = tensor.insert_slice %v0 into %vc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<1x16x2x4xf32>
  %vr0 = tensor.extract_slice %vw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %se0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sz0 = linalg.fill ins(%zero : f32) outs(%se0 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %s0 = linalg.generic {indexing_maps = [#sq3, #sk3, #ss3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %kr0 : tensor<1x2x4xf32>, tensor<?x2x4xf32>) outs(%sz0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<2x1x?xf32>
  %scale0 = arith.constant 0.5 : f32
  %sce0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sc0 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s0 : tensor<2x1x?xf32>) outs(%sce0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %out: f32):
      %m = arith.mulf %in, %scale0 : f32
      linalg.yield %m : f32
    } -> tensor<2x1x?xf32>
  %pe0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %pr0 = linalg.softmax dimension(2) ins(%sc0 : tensor<2x1x?xf32>) outs(%pe0 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %two = arith.constant 2.0 : f32
  %vde = tensor.empty(%len) : tensor<?x2x4xf32>
  %vd0 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%vr0 : tensor<?x2x4xf32>) outs(%vde : tensor<?x2x4xf32>) {
    ^bb0(%in: f32, %out: f32):
      %m = arith.mulf %in, %two : f32
      linalg.yield %m : f32
    } -> tensor<?x2x4xf32>
  %oe0 = tensor.empty() : tensor<1x2x4xf32>
  %oz0 = linalg.fill ins(%zero : f32) outs(%oe0 : tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  // expected-remark@below {{not adopted: the values are scaled before the weighted sum}}
  %o0 = linalg.generic {indexing_maps = [#wp3, #wv3, #wo3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%pr0, %vd0 : tensor<2x1x?xf32>, tensor<?x2x4xf32>) outs(%oz0 : tensor<1x2x4xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<1x2x4xf32>
  return %o0, %kw0, %vw0 : tensor<1x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>
}

// -----

// The weighted sum accumulates onto 1, not 0.

// CHECK-LABEL: func.func @sum_starts_at_one(
// CHECK-SAME: %{{[a-z0-9]+}}: tensor<1x16x2x4xf32>

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#red3 = affine_map<(d0, d1, d2) -> (d0, d1)>
#sq3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d3)>
#sk3 = affine_map<(d0, d1, d2, d3) -> (d2, d0, d3)>
#ss3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#wp3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
#wv3 = affine_map<(d0, d1, d2, d3) -> (d3, d0, d2)>
#wo3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d2)>

func.func @sum_starts_at_one(%q: tensor<1x2x4xf32>, %k0: tensor<1x2x4xf32>, %v0: tensor<1x2x4xf32>, %kc: tensor<1x16x2x4xf32>, %vc: tensor<1x16x2x4xf32>, %pos: index)
    -> (tensor<1x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %c1 = arith.constant 1 : index
  %len = arith.addi %pos, %c1 : index
  %kw0 = tensor.insert_slice %k0 into %kc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<1x16x2x4xf32>
  %kr0 = tensor.extract_slice %kw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %vw0 = tensor.insert_slice %v0 into %vc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<1x16x2x4xf32>
  %vr0 = tensor.extract_slice %vw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %se0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sz0 = linalg.fill ins(%zero : f32) outs(%se0 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %s0 = linalg.generic {indexing_maps = [#sq3, #sk3, #ss3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %kr0 : tensor<1x2x4xf32>, tensor<?x2x4xf32>) outs(%sz0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<2x1x?xf32>
  %scale0 = arith.constant 0.5 : f32
  %sce0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sc0 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s0 : tensor<2x1x?xf32>) outs(%sce0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %out: f32):
      %m = arith.mulf %in, %scale0 : f32
      linalg.yield %m : f32
    } -> tensor<2x1x?xf32>
  %pe0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %pr0 = linalg.softmax dimension(2) ins(%sc0 : tensor<2x1x?xf32>) outs(%pe0 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %oe0 = tensor.empty() : tensor<1x2x4xf32>
  %one = arith.constant 1.0 : f32
  %oz0 = linalg.fill ins(%one : f32) outs(%oe0 : tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  // expected-remark@below {{not adopted: the weighted sum does not start from zero}}
  %o0 = linalg.generic {indexing_maps = [#wp3, #wv3, #wo3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%pr0, %vr0 : tensor<2x1x?xf32>, tensor<?x2x4xf32>) outs(%oz0 : tensor<1x2x4xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<1x2x4xf32>
  return %o0, %kw0, %vw0 : tensor<1x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>
}

// -----

// The values are read at KV head 0 (a constant in their indexing map).

// CHECK-LABEL: func.func @values_map_has_constant(
// CHECK-SAME: %{{[a-z0-9]+}}: tensor<1x16x2x4xf32>

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#red3 = affine_map<(d0, d1, d2) -> (d0, d1)>
#sq3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d3)>
#sk3 = affine_map<(d0, d1, d2, d3) -> (d2, d0, d3)>
#ss3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#wp3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
#wv3 = affine_map<(d0, d1, d2, d3) -> (d3, d0, d2)>
#wo3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d2)>

func.func @values_map_has_constant(%q: tensor<1x2x4xf32>, %k0: tensor<1x2x4xf32>, %v0: tensor<1x2x4xf32>, %kc: tensor<1x16x2x4xf32>, %vc: tensor<1x16x2x4xf32>, %pos: index)
    -> (tensor<1x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %c1 = arith.constant 1 : index
  %len = arith.addi %pos, %c1 : index
  %kw0 = tensor.insert_slice %k0 into %kc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<1x16x2x4xf32>
  %kr0 = tensor.extract_slice %kw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %vw0 = tensor.insert_slice %v0 into %vc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<1x16x2x4xf32>
  %vr0 = tensor.extract_slice %vw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %se0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sz0 = linalg.fill ins(%zero : f32) outs(%se0 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %s0 = linalg.generic {indexing_maps = [#sq3, #sk3, #ss3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %kr0 : tensor<1x2x4xf32>, tensor<?x2x4xf32>) outs(%sz0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<2x1x?xf32>
  %scale0 = arith.constant 0.5 : f32
  %sce0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sc0 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s0 : tensor<2x1x?xf32>) outs(%sce0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %out: f32):
      %m = arith.mulf %in, %scale0 : f32
      linalg.yield %m : f32
    } -> tensor<2x1x?xf32>
  %pe0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %pr0 = linalg.softmax dimension(2) ins(%sc0 : tensor<2x1x?xf32>) outs(%pe0 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %oe0 = tensor.empty() : tensor<1x2x4xf32>
  %oz0 = linalg.fill ins(%zero : f32) outs(%oe0 : tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  // expected-remark@below {{not adopted: the weighted sum's indexing maps are not permutations}}
  %o0 = linalg.generic {indexing_maps = [#wp3, affine_map<(d0, d1, d2, d3) -> (d3, 0, d2)>, #wo3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%pr0, %vr0 : tensor<2x1x?xf32>, tensor<?x2x4xf32>) outs(%oz0 : tensor<1x2x4xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<1x2x4xf32>
  return %o0, %kw0, %vw0 : tensor<1x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>
}

// -----

// The values' position is indexed by the head loop and their head by the
// position loop.

// CHECK-LABEL: func.func @values_position_by_head(
// CHECK-SAME: %{{[a-z0-9]+}}: tensor<1x16x2x4xf32>

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#red3 = affine_map<(d0, d1, d2) -> (d0, d1)>
#sq3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d3)>
#sk3 = affine_map<(d0, d1, d2, d3) -> (d2, d0, d3)>
#ss3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#wp3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
#wv3 = affine_map<(d0, d1, d2, d3) -> (d3, d0, d2)>
#wo3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d2)>

func.func @values_position_by_head(%q: tensor<1x2x4xf32>, %k0: tensor<1x2x4xf32>, %v0: tensor<1x2x4xf32>, %kc: tensor<1x16x2x4xf32>, %vc: tensor<1x16x2x4xf32>, %pos: index)
    -> (tensor<1x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %c1 = arith.constant 1 : index
  %len = arith.addi %pos, %c1 : index
  %kw0 = tensor.insert_slice %k0 into %kc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<1x16x2x4xf32>
  %kr0 = tensor.extract_slice %kw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %vw0 = tensor.insert_slice %v0 into %vc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<1x16x2x4xf32>
  %vr0 = tensor.extract_slice %vw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %se0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sz0 = linalg.fill ins(%zero : f32) outs(%se0 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %s0 = linalg.generic {indexing_maps = [#sq3, #sk3, #ss3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %kr0 : tensor<1x2x4xf32>, tensor<?x2x4xf32>) outs(%sz0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<2x1x?xf32>
  %scale0 = arith.constant 0.5 : f32
  %sce0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sc0 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s0 : tensor<2x1x?xf32>) outs(%sce0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %out: f32):
      %m = arith.mulf %in, %scale0 : f32
      linalg.yield %m : f32
    } -> tensor<2x1x?xf32>
  %pe0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %pr0 = linalg.softmax dimension(2) ins(%sc0 : tensor<2x1x?xf32>) outs(%pe0 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %oe0 = tensor.empty() : tensor<1x2x4xf32>
  %oz0 = linalg.fill ins(%zero : f32) outs(%oe0 : tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  // expected-remark@below {{not adopted: the weighted sum does not reduce the probabilities against the values of the same heads}}
  %o0 = linalg.generic {indexing_maps = [#wp3, affine_map<(d0, d1, d2, d3) -> (d0, d3, d2)>, #wo3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%pr0, %vr0 : tensor<2x1x?xf32>, tensor<?x2x4xf32>) outs(%oz0 : tensor<1x2x4xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<1x2x4xf32>
  return %o0, %kw0, %vw0 : tensor<1x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>
}

// -----

// The output has a third loop of size 3 that no input reads.

// CHECK-LABEL: func.func @output_has_extra_loop(
// CHECK-SAME: %{{[a-z0-9]+}}: tensor<1x16x2x4xf32>

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#red3 = affine_map<(d0, d1, d2) -> (d0, d1)>
#sq3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d3)>
#sk3 = affine_map<(d0, d1, d2, d3) -> (d2, d0, d3)>
#ss3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#wp3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
#wv3 = affine_map<(d0, d1, d2, d3) -> (d3, d0, d2)>
#wo3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d2)>

func.func @output_has_extra_loop(%q: tensor<1x2x4xf32>, %k0: tensor<1x2x4xf32>, %v0: tensor<1x2x4xf32>, %kc: tensor<1x16x2x4xf32>, %vc: tensor<1x16x2x4xf32>, %pos: index)
    -> (tensor<1x2x4x3xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %c1 = arith.constant 1 : index
  %len = arith.addi %pos, %c1 : index
  %kw0 = tensor.insert_slice %k0 into %kc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<1x16x2x4xf32>
  %kr0 = tensor.extract_slice %kw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %vw0 = tensor.insert_slice %v0 into %vc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<1x16x2x4xf32>
  %vr0 = tensor.extract_slice %vw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %se0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sz0 = linalg.fill ins(%zero : f32) outs(%se0 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %s0 = linalg.generic {indexing_maps = [#sq3, #sk3, #ss3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %kr0 : tensor<1x2x4xf32>, tensor<?x2x4xf32>) outs(%sz0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<2x1x?xf32>
  %scale0 = arith.constant 0.5 : f32
  %sce0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sc0 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s0 : tensor<2x1x?xf32>) outs(%sce0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %out: f32):
      %m = arith.mulf %in, %scale0 : f32
      linalg.yield %m : f32
    } -> tensor<2x1x?xf32>
  %pe0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %pr0 = linalg.softmax dimension(2) ins(%sc0 : tensor<2x1x?xf32>) outs(%pe0 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %oe0 = tensor.empty() : tensor<1x2x4x3xf32>
  %oz0 = linalg.fill ins(%zero : f32) outs(%oe0 : tensor<1x2x4x3xf32>) -> tensor<1x2x4x3xf32>
  // expected-remark@below {{not adopted: the weighted sum has a loop that neither the probabilities nor the values index}}
  %o0 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3, d4) -> (d3, d0, d2)>, affine_map<(d0, d1, d2, d3, d4) -> (d1, d0, d2, d4)>], iterator_types = ["parallel", "parallel", "parallel", "reduction", "parallel"]} ins(%pr0, %vr0 : tensor<2x1x?xf32>, tensor<?x2x4xf32>) outs(%oz0 : tensor<1x2x4x3xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<1x2x4x3xf32>
  return %o0, %kw0, %vw0 : tensor<1x2x4x3xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>
}

// -----

// The output does not keep head_dim (its loop is neither reduced nor
// stored).

// CHECK-LABEL: func.func @output_without_channels(
// CHECK-SAME: %{{[a-z0-9]+}}: tensor<1x16x2x4xf32>

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#red3 = affine_map<(d0, d1, d2) -> (d0, d1)>
#sq3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d3)>
#sk3 = affine_map<(d0, d1, d2, d3) -> (d2, d0, d3)>
#ss3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#wp3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
#wv3 = affine_map<(d0, d1, d2, d3) -> (d3, d0, d2)>
#wo3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d2)>

func.func @output_without_channels(%q: tensor<1x2x4xf32>, %k0: tensor<1x2x4xf32>, %v0: tensor<1x2x4xf32>, %kc: tensor<1x16x2x4xf32>, %vc: tensor<1x16x2x4xf32>, %pos: index)
    -> (tensor<1x2xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %c1 = arith.constant 1 : index
  %len = arith.addi %pos, %c1 : index
  %kw0 = tensor.insert_slice %k0 into %kc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<1x16x2x4xf32>
  %kr0 = tensor.extract_slice %kw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %vw0 = tensor.insert_slice %v0 into %vc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<1x16x2x4xf32>
  %vr0 = tensor.extract_slice %vw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %se0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sz0 = linalg.fill ins(%zero : f32) outs(%se0 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %s0 = linalg.generic {indexing_maps = [#sq3, #sk3, #ss3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %kr0 : tensor<1x2x4xf32>, tensor<?x2x4xf32>) outs(%sz0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<2x1x?xf32>
  %scale0 = arith.constant 0.5 : f32
  %sce0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sc0 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s0 : tensor<2x1x?xf32>) outs(%sce0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %out: f32):
      %m = arith.mulf %in, %scale0 : f32
      linalg.yield %m : f32
    } -> tensor<2x1x?xf32>
  %pe0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %pr0 = linalg.softmax dimension(2) ins(%sc0 : tensor<2x1x?xf32>) outs(%pe0 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %oe0 = tensor.empty() : tensor<1x2xf32>
  %oz0 = linalg.fill ins(%zero : f32) outs(%oe0 : tensor<1x2xf32>) -> tensor<1x2xf32>
  // expected-remark@below {{not adopted: unexpected attention output layout}}
  %o0 = linalg.generic {indexing_maps = [#wp3, #wv3, affine_map<(d0, d1, d2, d3) -> (d1, d0)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%pr0, %vr0 : tensor<2x1x?xf32>, tensor<?x2x4xf32>) outs(%oz0 : tensor<1x2xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<1x2xf32>
  return %o0, %kw0, %vw0 : tensor<1x2xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>
}

// -----

// The keys are read whole (16 positions, the causal mask hides the rest),
// the values up to pos + 1.

// CHECK-LABEL: func.func @keys_whole_values_prefix(
// CHECK-SAME: %{{[a-z0-9]+}}: tensor<1x16x2x4xf32>

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#red3 = affine_map<(d0, d1, d2) -> (d0, d1)>
#sq3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d3)>
#sk3 = affine_map<(d0, d1, d2, d3) -> (d2, d0, d3)>
#ss3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#wp3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
#wv3 = affine_map<(d0, d1, d2, d3) -> (d3, d0, d2)>
#wo3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d2)>

func.func @keys_whole_values_prefix(%q: tensor<1x2x4xf32>, %k0: tensor<1x2x4xf32>, %v0: tensor<1x2x4xf32>, %kc: tensor<1x16x2x4xf32>, %vc: tensor<1x16x2x4xf32>, %pos: index)
    -> (tensor<1x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %c1 = arith.constant 1 : index
  %len = arith.addi %pos, %c1 : index
  %kw0 = tensor.insert_slice %k0 into %kc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<1x16x2x4xf32>
  %kr0 = tensor.extract_slice %kw0[0, 0, 0, 0] [1, 16, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<16x2x4xf32>
  %vw0 = tensor.insert_slice %v0 into %vc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<1x16x2x4xf32>
  %vr0 = tensor.extract_slice %vw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %se0 = tensor.empty() : tensor<2x1x16xf32>
  %sz0 = linalg.fill ins(%zero : f32) outs(%se0 : tensor<2x1x16xf32>) -> tensor<2x1x16xf32>
  %s0 = linalg.generic {indexing_maps = [#sq3, #sk3, #ss3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %kr0 : tensor<1x2x4xf32>, tensor<16x2x4xf32>) outs(%sz0 : tensor<2x1x16xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<2x1x16xf32>
  %scale0 = arith.constant 0.5 : f32
  %sce0 = tensor.empty() : tensor<2x1x16xf32>
  %sc0 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s0 : tensor<2x1x16xf32>) outs(%sce0 : tensor<2x1x16xf32>) {
    ^bb0(%in: f32, %out: f32):
      %m = arith.mulf %in, %scale0 : f32
      linalg.yield %m : f32
    } -> tensor<2x1x16xf32>
  %ninf = arith.constant 0xFF800000 : f32
  %mke0 = tensor.empty() : tensor<2x1x16xf32>
  %mk0 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%sc0 : tensor<2x1x16xf32>) outs(%mke0 : tensor<2x1x16xf32>) {
    ^bb0(%in: f32, %out: f32):
      %i = linalg.index 1 : index
      %j = linalg.index 2 : index
      %p = arith.addi %pos, %i : index
      %c = arith.cmpi ugt, %j, %p : index
      %s = arith.select %c, %ninf, %in : f32
      linalg.yield %s : f32
    } -> tensor<2x1x16xf32>
  %pe0 = tensor.empty() : tensor<2x1x16xf32>
  %pr0 = linalg.softmax dimension(2) ins(%mk0 : tensor<2x1x16xf32>) outs(%pe0 : tensor<2x1x16xf32>) -> tensor<2x1x16xf32>
  %oe0 = tensor.empty() : tensor<1x2x4xf32>
  %oz0 = linalg.fill ins(%zero : f32) outs(%oe0 : tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  // expected-remark@below {{not adopted: keys and values are read over different lengths}}
  %o0 = linalg.generic {indexing_maps = [#wp3, #wv3, #wo3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%pr0, %vr0 : tensor<2x1x16xf32>, tensor<?x2x4xf32>) outs(%oz0 : tensor<1x2x4xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<1x2x4xf32>
  return %o0, %kw0, %vw0 : tensor<1x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>
}

// -----

// The keys are repeated for 2 query heads per KV head; the values are not
// (their heads have a loop of their own).

// CHECK-LABEL: func.func @only_keys_repeated(
// CHECK-SAME: %{{[a-z0-9]+}}: tensor<1x16x2x4xf32>

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#red3 = affine_map<(d0, d1, d2) -> (d0, d1)>
#sq3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d3)>
#sk3 = affine_map<(d0, d1, d2, d3) -> (d2, d0, d3)>
#ss3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#wp3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
#wv3 = affine_map<(d0, d1, d2, d3) -> (d3, d0, d2)>
#wo3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d2)>

func.func @only_keys_repeated(%q: tensor<1x4x4xf32>, %k0: tensor<1x2x4xf32>, %v0: tensor<1x2x4xf32>, %kc: tensor<1x16x2x4xf32>, %vc: tensor<1x16x2x4xf32>, %pos: index)
    -> (tensor<1x4x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %c1 = arith.constant 1 : index
  %len = arith.addi %pos, %c1 : index
  %kw0 = tensor.insert_slice %k0 into %kc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<1x16x2x4xf32>
  %kr0 = tensor.extract_slice %kw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %vw0 = tensor.insert_slice %v0 into %vc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<1x16x2x4xf32>
  %vr0 = tensor.extract_slice %vw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %kbe0 = tensor.empty(%len) : tensor<?x2x2x4xf32>
  %kb0 = linalg.broadcast ins(%kr0 : tensor<?x2x4xf32>) outs(%kbe0 : tensor<?x2x2x4xf32>) dimensions = [2]
  %kg0 = tensor.collapse_shape %kb0 [[0], [1, 2], [3]] : tensor<?x2x2x4xf32> into tensor<?x4x4xf32>
  %se0 = tensor.empty(%len) : tensor<4x1x?xf32>
  %sz0 = linalg.fill ins(%zero : f32) outs(%se0 : tensor<4x1x?xf32>) -> tensor<4x1x?xf32>
  %s0 = linalg.generic {indexing_maps = [#sq3, #sk3, #ss3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %kg0 : tensor<1x4x4xf32>, tensor<?x4x4xf32>) outs(%sz0 : tensor<4x1x?xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<4x1x?xf32>
  %scale0 = arith.constant 0.5 : f32
  %sce0 = tensor.empty(%len) : tensor<4x1x?xf32>
  %sc0 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s0 : tensor<4x1x?xf32>) outs(%sce0 : tensor<4x1x?xf32>) {
    ^bb0(%in: f32, %out: f32):
      %m = arith.mulf %in, %scale0 : f32
      linalg.yield %m : f32
    } -> tensor<4x1x?xf32>
  %pe0 = tensor.empty(%len) : tensor<4x1x?xf32>
  %pr0 = linalg.softmax dimension(2) ins(%sc0 : tensor<4x1x?xf32>) outs(%pe0 : tensor<4x1x?xf32>) -> tensor<4x1x?xf32>
  %oe0 = tensor.empty() : tensor<1x4x4xf32>
  %oz0 = linalg.fill ins(%zero : f32) outs(%oe0 : tensor<1x4x4xf32>) -> tensor<1x4x4xf32>
  // expected-remark@below {{not adopted: keys and values are grouped differently}}
  %o0 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3, d4) -> (d3, d4, d2)>, affine_map<(d0, d1, d2, d3, d4) -> (d1, d0, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction", "parallel"]} ins(%pr0, %vr0 : tensor<4x1x?xf32>, tensor<?x2x4xf32>) outs(%oz0 : tensor<1x4x4xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<1x4x4xf32>
  return %o0, %kw0, %vw0 : tensor<1x4x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>
}

// -----

// The K cache is f32 and the V cache f16.

// CHECK-LABEL: func.func @f16_values_f32_keys(
// CHECK-SAME: %{{[a-z0-9]+}}: tensor<1x16x2x4xf32>

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#red3 = affine_map<(d0, d1, d2) -> (d0, d1)>
#sq3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d3)>
#sk3 = affine_map<(d0, d1, d2, d3) -> (d2, d0, d3)>
#ss3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#wp3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
#wv3 = affine_map<(d0, d1, d2, d3) -> (d3, d0, d2)>
#wo3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d2)>

// expected-remark@below {{not adopted: cache tensors of different shapes or types}}
func.func @f16_values_f32_keys(%q: tensor<1x2x4xf32>, %k0: tensor<1x2x4xf32>, %v0: tensor<1x2x4xf16>, %kc: tensor<1x16x2x4xf32>, %vc: tensor<1x16x2x4xf16>, %pos: index)
    -> (tensor<1x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf16>) {
  %zero = arith.constant 0.000000e+00 : f32
  %c1 = arith.constant 1 : index
  %len = arith.addi %pos, %c1 : index
  %kw0 = tensor.insert_slice %k0 into %kc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<1x16x2x4xf32>
  %kr0 = tensor.extract_slice %kw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %vw0 = tensor.insert_slice %v0 into %vc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf16> into tensor<1x16x2x4xf16>
  %vr0 = tensor.extract_slice %vw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf16> to tensor<?x2x4xf16>
  %se0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sz0 = linalg.fill ins(%zero : f32) outs(%se0 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %s0 = linalg.generic {indexing_maps = [#sq3, #sk3, #ss3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %kr0 : tensor<1x2x4xf32>, tensor<?x2x4xf32>) outs(%sz0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<2x1x?xf32>
  %scale0 = arith.constant 0.5 : f32
  %sce0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sc0 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s0 : tensor<2x1x?xf32>) outs(%sce0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %out: f32):
      %m = arith.mulf %in, %scale0 : f32
      linalg.yield %m : f32
    } -> tensor<2x1x?xf32>
  %pe0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %pr0 = linalg.softmax dimension(2) ins(%sc0 : tensor<2x1x?xf32>) outs(%pe0 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %oe0 = tensor.empty() : tensor<1x2x4xf32>
  %oz0 = linalg.fill ins(%zero : f32) outs(%oe0 : tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  %o0 = linalg.generic {indexing_maps = [#wp3, #wv3, #wo3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%pr0, %vr0 : tensor<2x1x?xf32>, tensor<?x2x4xf16>) outs(%oz0 : tensor<1x2x4xf32>) {
    ^bb0(%in: f32, %in_1: f16, %out: f32):
      %ve = arith.extf %in_1 : f16 to f32
      %m = arith.mulf %in, %ve : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<1x2x4xf32>
  return %o0, %kw0, %vw0 : tensor<1x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf16>
}

// -----

// The K cache is stacked over 2 layers, the V cache is one layer.

// CHECK-LABEL: func.func @stacked_keys_per_layer_values(
// CHECK-SAME: %{{[a-z0-9]+}}: tensor<1x16x2x4xf32>

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#red3 = affine_map<(d0, d1, d2) -> (d0, d1)>
#sq3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d3)>
#sk3 = affine_map<(d0, d1, d2, d3) -> (d2, d0, d3)>
#ss3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#wp3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
#wv3 = affine_map<(d0, d1, d2, d3) -> (d3, d0, d2)>
#wo3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d2)>

// expected-remark@below {{not adopted: stacked and per-layer cache tensors mixed}}
func.func @stacked_keys_per_layer_values(%q: tensor<1x2x4xf32>, %k0: tensor<1x2x4xf32>, %v0: tensor<1x2x4xf32>, %kc: tensor<2x16x2x4xf32>, %vc: tensor<1x16x2x4xf32>, %pos: index)
    -> (tensor<1x2x4xf32>, tensor<2x16x2x4xf32>, tensor<1x16x2x4xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %c1 = arith.constant 1 : index
  %len = arith.addi %pos, %c1 : index
  %kw0 = tensor.insert_slice %k0 into %kc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<2x16x2x4xf32>
  %kr0 = tensor.extract_slice %kw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<2x16x2x4xf32> to tensor<?x2x4xf32>
  %vw0 = tensor.insert_slice %v0 into %vc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<1x16x2x4xf32>
  %vr0 = tensor.extract_slice %vw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %se0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sz0 = linalg.fill ins(%zero : f32) outs(%se0 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %s0 = linalg.generic {indexing_maps = [#sq3, #sk3, #ss3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %kr0 : tensor<1x2x4xf32>, tensor<?x2x4xf32>) outs(%sz0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<2x1x?xf32>
  %scale0 = arith.constant 0.5 : f32
  %sce0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sc0 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s0 : tensor<2x1x?xf32>) outs(%sce0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %out: f32):
      %m = arith.mulf %in, %scale0 : f32
      linalg.yield %m : f32
    } -> tensor<2x1x?xf32>
  %pe0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %pr0 = linalg.softmax dimension(2) ins(%sc0 : tensor<2x1x?xf32>) outs(%pe0 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %oe0 = tensor.empty() : tensor<1x2x4xf32>
  %oz0 = linalg.fill ins(%zero : f32) outs(%oe0 : tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  %o0 = linalg.generic {indexing_maps = [#wp3, #wv3, #wo3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%pr0, %vr0 : tensor<2x1x?xf32>, tensor<?x2x4xf32>) outs(%oz0 : tensor<1x2x4xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<1x2x4xf32>
  return %o0, %kw0, %vw0 : tensor<1x2x4xf32>, tensor<2x16x2x4xf32>, tensor<1x16x2x4xf32>
}

// -----

// Two attentions, each with its own pair of stacked caches (both at layer
// 0): 4 stacked tensors.

// CHECK-LABEL: func.func @two_stacked_pairs(
// CHECK-SAME: %{{[a-z0-9]+}}: tensor<2x16x2x4xf32>

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#red3 = affine_map<(d0, d1, d2) -> (d0, d1)>
#sq3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d3)>
#sk3 = affine_map<(d0, d1, d2, d3) -> (d2, d0, d3)>
#ss3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#wp3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
#wv3 = affine_map<(d0, d1, d2, d3) -> (d3, d0, d2)>
#wo3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d2)>

// expected-remark@below {{not adopted: expected one stacked K and one stacked V cache tensor, found 4}}
func.func @two_stacked_pairs(%q: tensor<1x2x4xf32>, %k0: tensor<1x2x4xf32>, %v0: tensor<1x2x4xf32>, %kc: tensor<2x16x2x4xf32>, %vc: tensor<2x16x2x4xf32>, %pos: index, %k1: tensor<1x2x4xf32>, %v1: tensor<1x2x4xf32>, %kc2: tensor<2x16x2x4xf32>, %vc2: tensor<2x16x2x4xf32>)
    -> (tensor<1x2x4xf32>, tensor<2x16x2x4xf32>, tensor<2x16x2x4xf32>, tensor<1x2x4xf32>, tensor<2x16x2x4xf32>, tensor<2x16x2x4xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %c1 = arith.constant 1 : index
  %len = arith.addi %pos, %c1 : index
  %kw0 = tensor.insert_slice %k0 into %kc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<2x16x2x4xf32>
  %kr0 = tensor.extract_slice %kw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<2x16x2x4xf32> to tensor<?x2x4xf32>
  %vw0 = tensor.insert_slice %v0 into %vc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<2x16x2x4xf32>
  %vr0 = tensor.extract_slice %vw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<2x16x2x4xf32> to tensor<?x2x4xf32>
  %se0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sz0 = linalg.fill ins(%zero : f32) outs(%se0 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %s0 = linalg.generic {indexing_maps = [#sq3, #sk3, #ss3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %kr0 : tensor<1x2x4xf32>, tensor<?x2x4xf32>) outs(%sz0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<2x1x?xf32>
  %scale0 = arith.constant 0.5 : f32
  %sce0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sc0 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s0 : tensor<2x1x?xf32>) outs(%sce0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %out: f32):
      %m = arith.mulf %in, %scale0 : f32
      linalg.yield %m : f32
    } -> tensor<2x1x?xf32>
  %pe0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %pr0 = linalg.softmax dimension(2) ins(%sc0 : tensor<2x1x?xf32>) outs(%pe0 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %oe0 = tensor.empty() : tensor<1x2x4xf32>
  %oz0 = linalg.fill ins(%zero : f32) outs(%oe0 : tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  %o0 = linalg.generic {indexing_maps = [#wp3, #wv3, #wo3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%pr0, %vr0 : tensor<2x1x?xf32>, tensor<?x2x4xf32>) outs(%oz0 : tensor<1x2x4xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<1x2x4xf32>
  %kw1 = tensor.insert_slice %k1 into %kc2[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<2x16x2x4xf32>
  %kr1 = tensor.extract_slice %kw1[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<2x16x2x4xf32> to tensor<?x2x4xf32>
  %vw1 = tensor.insert_slice %v1 into %vc2[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<2x16x2x4xf32>
  %vr1 = tensor.extract_slice %vw1[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<2x16x2x4xf32> to tensor<?x2x4xf32>
  %se1 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sz1 = linalg.fill ins(%zero : f32) outs(%se1 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %s1 = linalg.generic {indexing_maps = [#sq3, #sk3, #ss3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %kr1 : tensor<1x2x4xf32>, tensor<?x2x4xf32>) outs(%sz1 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<2x1x?xf32>
  %scale1 = arith.constant 0.5 : f32
  %sce1 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sc1 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s1 : tensor<2x1x?xf32>) outs(%sce1 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %out: f32):
      %m = arith.mulf %in, %scale1 : f32
      linalg.yield %m : f32
    } -> tensor<2x1x?xf32>
  %pe1 = tensor.empty(%len) : tensor<2x1x?xf32>
  %pr1 = linalg.softmax dimension(2) ins(%sc1 : tensor<2x1x?xf32>) outs(%pe1 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %oe1 = tensor.empty() : tensor<1x2x4xf32>
  %oz1 = linalg.fill ins(%zero : f32) outs(%oe1 : tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  %o1 = linalg.generic {indexing_maps = [#wp3, #wv3, #wo3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%pr1, %vr1 : tensor<2x1x?xf32>, tensor<?x2x4xf32>) outs(%oz1 : tensor<1x2x4xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<1x2x4xf32>
  return %o0, %kw0, %vw0, %o1, %kw1, %vw1 : tensor<1x2x4xf32>, tensor<2x16x2x4xf32>, tensor<2x16x2x4xf32>, tensor<1x2x4xf32>, tensor<2x16x2x4xf32>, tensor<2x16x2x4xf32>
}

// -----

// The keys of KV head 0 are broadcast to both heads.

// CHECK-LABEL: func.func @keys_of_head_0(
// CHECK-SAME: %{{[a-z0-9]+}}: tensor<1x16x2x4xf32>

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#red3 = affine_map<(d0, d1, d2) -> (d0, d1)>
#sq3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d3)>
#sk3 = affine_map<(d0, d1, d2, d3) -> (d2, d0, d3)>
#ss3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#wp3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
#wv3 = affine_map<(d0, d1, d2, d3) -> (d3, d0, d2)>
#wo3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d2)>

func.func @keys_of_head_0(%q: tensor<1x2x4xf32>, %k0: tensor<1x2x4xf32>, %v0: tensor<1x2x4xf32>, %kc: tensor<1x16x2x4xf32>, %vc: tensor<1x16x2x4xf32>, %pos: index)
    -> (tensor<1x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %c1 = arith.constant 1 : index
  %len = arith.addi %pos, %c1 : index
  %kw0 = tensor.insert_slice %k0 into %kc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<1x16x2x4xf32>
  %kr0 = tensor.extract_slice %kw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %vw0 = tensor.insert_slice %v0 into %vc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<1x16x2x4xf32>
  %vr0 = tensor.extract_slice %vw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %kme0 = tensor.empty(%len) : tensor<?x2x4xf32>
  // expected-remark@below {{not adopted: a broadcast drops the KV head dimension}}
  %km0 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, 0, d2)>, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%kr0 : tensor<?x2x4xf32>) outs(%kme0 : tensor<?x2x4xf32>) {
    ^bb0(%in: f32, %out: f32):
      linalg.yield %in : f32
    } -> tensor<?x2x4xf32>
  %se0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sz0 = linalg.fill ins(%zero : f32) outs(%se0 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %s0 = linalg.generic {indexing_maps = [#sq3, #sk3, #ss3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %km0 : tensor<1x2x4xf32>, tensor<?x2x4xf32>) outs(%sz0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<2x1x?xf32>
  %scale0 = arith.constant 0.5 : f32
  %sce0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sc0 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s0 : tensor<2x1x?xf32>) outs(%sce0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %out: f32):
      %m = arith.mulf %in, %scale0 : f32
      linalg.yield %m : f32
    } -> tensor<2x1x?xf32>
  %pe0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %pr0 = linalg.softmax dimension(2) ins(%sc0 : tensor<2x1x?xf32>) outs(%pe0 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %oe0 = tensor.empty() : tensor<1x2x4xf32>
  %oz0 = linalg.fill ins(%zero : f32) outs(%oe0 : tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  %o0 = linalg.generic {indexing_maps = [#wp3, #wv3, #wo3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%pr0, %vr0 : tensor<2x1x?xf32>, tensor<?x2x4xf32>) outs(%oz0 : tensor<1x2x4xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<1x2x4xf32>
  return %o0, %kw0, %vw0 : tensor<1x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>
}

// -----

// The keys are broadcast over two new dimensions (2 x 2 copies per KV head).

// CHECK-LABEL: func.func @keys_repeated_twice(
// CHECK-SAME: %{{[a-z0-9]+}}: tensor<1x16x2x4xf32>

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#red3 = affine_map<(d0, d1, d2) -> (d0, d1)>
#sq3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d3)>
#sk3 = affine_map<(d0, d1, d2, d3) -> (d2, d0, d3)>
#ss3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#wp3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
#wv3 = affine_map<(d0, d1, d2, d3) -> (d3, d0, d2)>
#wo3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d2)>

func.func @keys_repeated_twice(%q: tensor<1x8x4xf32>, %k0: tensor<1x2x4xf32>, %v0: tensor<1x2x4xf32>, %kc: tensor<1x16x2x4xf32>, %vc: tensor<1x16x2x4xf32>, %pos: index)
    -> (tensor<1x8x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %c1 = arith.constant 1 : index
  %len = arith.addi %pos, %c1 : index
  %kw0 = tensor.insert_slice %k0 into %kc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<1x16x2x4xf32>
  %kr0 = tensor.extract_slice %kw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %vw0 = tensor.insert_slice %v0 into %vc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<1x16x2x4xf32>
  %vr0 = tensor.extract_slice %vw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %kbe0 = tensor.empty(%len) : tensor<?x2x2x2x4xf32>
  // expected-remark@below {{not adopted: the keys or values are repeated over more than one dimension}}
  %kb0 = linalg.broadcast ins(%kr0 : tensor<?x2x4xf32>) outs(%kbe0 : tensor<?x2x2x2x4xf32>) dimensions = [2, 3]
  %kg0 = tensor.collapse_shape %kb0 [[0], [1, 2, 3], [4]] : tensor<?x2x2x2x4xf32> into tensor<?x8x4xf32>
  %se0 = tensor.empty(%len) : tensor<8x1x?xf32>
  %sz0 = linalg.fill ins(%zero : f32) outs(%se0 : tensor<8x1x?xf32>) -> tensor<8x1x?xf32>
  %s0 = linalg.generic {indexing_maps = [#sq3, #sk3, #ss3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %kg0 : tensor<1x8x4xf32>, tensor<?x8x4xf32>) outs(%sz0 : tensor<8x1x?xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<8x1x?xf32>
  %scale0 = arith.constant 0.5 : f32
  %sce0 = tensor.empty(%len) : tensor<8x1x?xf32>
  %sc0 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s0 : tensor<8x1x?xf32>) outs(%sce0 : tensor<8x1x?xf32>) {
    ^bb0(%in: f32, %out: f32):
      %m = arith.mulf %in, %scale0 : f32
      linalg.yield %m : f32
    } -> tensor<8x1x?xf32>
  %pe0 = tensor.empty(%len) : tensor<8x1x?xf32>
  %pr0 = linalg.softmax dimension(2) ins(%sc0 : tensor<8x1x?xf32>) outs(%pe0 : tensor<8x1x?xf32>) -> tensor<8x1x?xf32>
  %oe0 = tensor.empty() : tensor<1x8x4xf32>
  %oz0 = linalg.fill ins(%zero : f32) outs(%oe0 : tensor<1x8x4xf32>) -> tensor<1x8x4xf32>
  %o0 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3, d4) -> (d3, d4, d2)>, affine_map<(d0, d1, d2, d3, d4) -> (d1, d0, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction", "parallel"]} ins(%pr0, %vr0 : tensor<8x1x?xf32>, tensor<?x2x4xf32>) outs(%oz0 : tensor<1x8x4xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<1x8x4xf32>
  return %o0, %kw0, %vw0 : tensor<1x8x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>
}

// -----

// The key channels are split into 2 x 2 (and merged back).

// CHECK-LABEL: func.func @channels_split(
// CHECK-SAME: %{{[a-z0-9]+}}: tensor<1x16x2x4xf32>

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#red3 = affine_map<(d0, d1, d2) -> (d0, d1)>
#sq3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d3)>
#sk3 = affine_map<(d0, d1, d2, d3) -> (d2, d0, d3)>
#ss3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#wp3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
#wv3 = affine_map<(d0, d1, d2, d3) -> (d3, d0, d2)>
#wo3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d2)>

func.func @channels_split(%q: tensor<1x2x4xf32>, %k0: tensor<1x2x4xf32>, %v0: tensor<1x2x4xf32>, %kc: tensor<1x16x2x4xf32>, %vc: tensor<1x16x2x4xf32>, %pos: index)
    -> (tensor<1x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %c1 = arith.constant 1 : index
  %len = arith.addi %pos, %c1 : index
  %kw0 = tensor.insert_slice %k0 into %kc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<1x16x2x4xf32>
  %kr0 = tensor.extract_slice %kw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %vw0 = tensor.insert_slice %v0 into %vc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<1x16x2x4xf32>
  %vr0 = tensor.extract_slice %vw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  // expected-remark@below {{not adopted: 'tensor.expand_shape' splits the channel dimension into several; kvq follows one dimension per position, KV head and channel}}
  %kx0 = tensor.expand_shape %kr0 [[0], [1], [2, 3]] output_shape [%len, 2, 2, 2] : tensor<?x2x4xf32> into tensor<?x2x2x2xf32>
  %km0 = tensor.collapse_shape %kx0 [[0], [1], [2, 3]] : tensor<?x2x2x2xf32> into tensor<?x2x4xf32>
  %se0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sz0 = linalg.fill ins(%zero : f32) outs(%se0 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %s0 = linalg.generic {indexing_maps = [#sq3, #sk3, #ss3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %km0 : tensor<1x2x4xf32>, tensor<?x2x4xf32>) outs(%sz0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<2x1x?xf32>
  %scale0 = arith.constant 0.5 : f32
  %sce0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sc0 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s0 : tensor<2x1x?xf32>) outs(%sce0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %out: f32):
      %m = arith.mulf %in, %scale0 : f32
      linalg.yield %m : f32
    } -> tensor<2x1x?xf32>
  %pe0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %pr0 = linalg.softmax dimension(2) ins(%sc0 : tensor<2x1x?xf32>) outs(%pe0 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %oe0 = tensor.empty() : tensor<1x2x4xf32>
  %oz0 = linalg.fill ins(%zero : f32) outs(%oe0 : tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  %o0 = linalg.generic {indexing_maps = [#wp3, #wv3, #wo3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%pr0, %vr0 : tensor<2x1x?xf32>, tensor<?x2x4xf32>) outs(%oz0 : tensor<1x2x4xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<1x2x4xf32>
  return %o0, %kw0, %vw0 : tensor<1x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>
}

// -----

// The key heads and channels are merged into one dimension (and split back).

// CHECK-LABEL: func.func @heads_and_channels_merged(
// CHECK-SAME: %{{[a-z0-9]+}}: tensor<1x16x2x4xf32>

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#red3 = affine_map<(d0, d1, d2) -> (d0, d1)>
#sq3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d3)>
#sk3 = affine_map<(d0, d1, d2, d3) -> (d2, d0, d3)>
#ss3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#wp3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
#wv3 = affine_map<(d0, d1, d2, d3) -> (d3, d0, d2)>
#wo3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d2)>

func.func @heads_and_channels_merged(%q: tensor<1x2x4xf32>, %k0: tensor<1x2x4xf32>, %v0: tensor<1x2x4xf32>, %kc: tensor<1x16x2x4xf32>, %vc: tensor<1x16x2x4xf32>, %pos: index)
    -> (tensor<1x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %c1 = arith.constant 1 : index
  %len = arith.addi %pos, %c1 : index
  %kw0 = tensor.insert_slice %k0 into %kc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<1x16x2x4xf32>
  %kr0 = tensor.extract_slice %kw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %vw0 = tensor.insert_slice %v0 into %vc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<1x16x2x4xf32>
  %vr0 = tensor.extract_slice %vw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  // expected-remark@below {{not adopted: 'tensor.collapse_shape' merges the KV head and channel dimensions}}
  %kx0 = tensor.collapse_shape %kr0 [[0], [1, 2]] : tensor<?x2x4xf32> into tensor<?x8xf32>
  %km0 = tensor.expand_shape %kx0 [[0], [1, 2]] output_shape [%len, 2, 4] : tensor<?x8xf32> into tensor<?x2x4xf32>
  %se0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sz0 = linalg.fill ins(%zero : f32) outs(%se0 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %s0 = linalg.generic {indexing_maps = [#sq3, #sk3, #ss3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %km0 : tensor<1x2x4xf32>, tensor<?x2x4xf32>) outs(%sz0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<2x1x?xf32>
  %scale0 = arith.constant 0.5 : f32
  %sce0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sc0 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s0 : tensor<2x1x?xf32>) outs(%sce0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %out: f32):
      %m = arith.mulf %in, %scale0 : f32
      linalg.yield %m : f32
    } -> tensor<2x1x?xf32>
  %pe0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %pr0 = linalg.softmax dimension(2) ins(%sc0 : tensor<2x1x?xf32>) outs(%pe0 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %oe0 = tensor.empty() : tensor<1x2x4xf32>
  %oz0 = linalg.fill ins(%zero : f32) outs(%oe0 : tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  %o0 = linalg.generic {indexing_maps = [#wp3, #wv3, #wo3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%pr0, %vr0 : tensor<2x1x?xf32>, tensor<?x2x4xf32>) outs(%oz0 : tensor<1x2x4xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<1x2x4xf32>
  return %o0, %kw0, %vw0 : tensor<1x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>
}

// -----

// The running max starts at 0, not -inf.

// CHECK-LABEL: func.func @max_starts_at_zero(
// CHECK-SAME: %{{[a-z0-9]+}}: tensor<1x16x2x4xf32>

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#red3 = affine_map<(d0, d1, d2) -> (d0, d1)>
#sq3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d3)>
#sk3 = affine_map<(d0, d1, d2, d3) -> (d2, d0, d3)>
#ss3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#wp3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
#wv3 = affine_map<(d0, d1, d2, d3) -> (d3, d0, d2)>
#wo3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d2)>

func.func @max_starts_at_zero(%q: tensor<1x2x4xf32>, %k0: tensor<1x2x4xf32>, %v0: tensor<1x2x4xf32>, %kc: tensor<1x16x2x4xf32>, %vc: tensor<1x16x2x4xf32>, %pos: index)
    -> (tensor<1x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %c1 = arith.constant 1 : index
  %len = arith.addi %pos, %c1 : index
  // Layer 0
  %kw0 = tensor.insert_slice %k0 into %kc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<1x16x2x4xf32>
  %kr0 = tensor.extract_slice %kw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %vw0 = tensor.insert_slice %v0 into %vc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<1x16x2x4xf32>
  %vr0 = tensor.extract_slice %vw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %se0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sz0 = linalg.fill ins(%zero : f32) outs(%se0 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %s0 = linalg.generic {indexing_maps = [#sq3, #sk3, #ss3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %kr0 : tensor<1x2x4xf32>, tensor<?x2x4xf32>) outs(%sz0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<2x1x?xf32>
  %scale0 = arith.constant 0.5 : f32
  %sce0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sc0 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s0 : tensor<2x1x?xf32>) outs(%sce0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %out: f32):
      %m = arith.mulf %in, %scale0 : f32
      linalg.yield %m : f32
    } -> tensor<2x1x?xf32>
  %mxe0 = tensor.empty() : tensor<2x1xf32>
  %mxi0 = linalg.fill ins(%zero : f32) outs(%mxe0 : tensor<2x1xf32>) -> tensor<2x1xf32>
  // expected-remark@below {{not adopted: this is not a softmax: the running max does not start at -inf}}
  %mx0 = linalg.generic {indexing_maps = [#id3, #red3], iterator_types = ["parallel", "parallel", "reduction"]} ins(%sc0 : tensor<2x1x?xf32>) outs(%mxi0 : tensor<2x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %m = arith.maximumf %in, %out : f32
      linalg.yield %m : f32
    } -> tensor<2x1xf32>
  %exe0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %ex0 = linalg.generic {indexing_maps = [#id3, #red3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%sc0, %mx0 : tensor<2x1x?xf32>, tensor<2x1xf32>) outs(%exe0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %d = arith.subf %in, %in_1 : f32
      %e = math.exp %d : f32
      linalg.yield %e : f32
    } -> tensor<2x1x?xf32>
  %sme0 = tensor.empty() : tensor<2x1xf32>
  %smi0 = linalg.fill ins(%zero : f32) outs(%sme0 : tensor<2x1xf32>) -> tensor<2x1xf32>
  %sm0 = linalg.generic {indexing_maps = [#id3, #red3], iterator_types = ["parallel", "parallel", "reduction"]} ins(%ex0 : tensor<2x1x?xf32>) outs(%smi0 : tensor<2x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %a = arith.addf %in, %out : f32
      linalg.yield %a : f32
    } -> tensor<2x1xf32>
  %pe0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %pr0 = linalg.generic {indexing_maps = [#id3, #red3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%ex0, %sm0 : tensor<2x1x?xf32>, tensor<2x1xf32>) outs(%pe0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %d = arith.divf %in, %in_1 : f32
      linalg.yield %d : f32
    } -> tensor<2x1x?xf32>
  %oe0 = tensor.empty() : tensor<1x2x4xf32>
  %oz0 = linalg.fill ins(%zero : f32) outs(%oe0 : tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  %o0 = linalg.generic {indexing_maps = [#wp3, #wv3, #wo3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%pr0, %vr0 : tensor<2x1x?xf32>, tensor<?x2x4xf32>) outs(%oz0 : tensor<1x2x4xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<1x2x4xf32>
  return %o0, %kw0, %vw0 : tensor<1x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>
}

// -----

// exp(x + max) instead of exp(x - max).

// CHECK-LABEL: func.func @adds_the_max(
// CHECK-SAME: %{{[a-z0-9]+}}: tensor<1x16x2x4xf32>

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#red3 = affine_map<(d0, d1, d2) -> (d0, d1)>
#sq3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d3)>
#sk3 = affine_map<(d0, d1, d2, d3) -> (d2, d0, d3)>
#ss3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#wp3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
#wv3 = affine_map<(d0, d1, d2, d3) -> (d3, d0, d2)>
#wo3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d2)>

func.func @adds_the_max(%q: tensor<1x2x4xf32>, %k0: tensor<1x2x4xf32>, %v0: tensor<1x2x4xf32>, %kc: tensor<1x16x2x4xf32>, %vc: tensor<1x16x2x4xf32>, %pos: index)
    -> (tensor<1x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %c1 = arith.constant 1 : index
  %len = arith.addi %pos, %c1 : index
  // Layer 0
  %kw0 = tensor.insert_slice %k0 into %kc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<1x16x2x4xf32>
  %kr0 = tensor.extract_slice %kw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %vw0 = tensor.insert_slice %v0 into %vc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<1x16x2x4xf32>
  %vr0 = tensor.extract_slice %vw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %se0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sz0 = linalg.fill ins(%zero : f32) outs(%se0 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %s0 = linalg.generic {indexing_maps = [#sq3, #sk3, #ss3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %kr0 : tensor<1x2x4xf32>, tensor<?x2x4xf32>) outs(%sz0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<2x1x?xf32>
  %scale0 = arith.constant 0.5 : f32
  %sce0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sc0 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s0 : tensor<2x1x?xf32>) outs(%sce0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %out: f32):
      %m = arith.mulf %in, %scale0 : f32
      linalg.yield %m : f32
    } -> tensor<2x1x?xf32>
  %mxe0 = tensor.empty() : tensor<2x1xf32>
  %mxi0 = linalg.fill ins(%ninf : f32) outs(%mxe0 : tensor<2x1xf32>) -> tensor<2x1xf32>
  %mx0 = linalg.generic {indexing_maps = [#id3, #red3], iterator_types = ["parallel", "parallel", "reduction"]} ins(%sc0 : tensor<2x1x?xf32>) outs(%mxi0 : tensor<2x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %m = arith.maximumf %in, %out : f32
      linalg.yield %m : f32
    } -> tensor<2x1xf32>
  %exe0 = tensor.empty(%len) : tensor<2x1x?xf32>
  // expected-remark@below {{not adopted: this is not a softmax: the max is not subtracted before exp}}
  %ex0 = linalg.generic {indexing_maps = [#id3, #red3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%sc0, %mx0 : tensor<2x1x?xf32>, tensor<2x1xf32>) outs(%exe0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %d = arith.addf %in, %in_1 : f32
      %e = math.exp %d : f32
      linalg.yield %e : f32
    } -> tensor<2x1x?xf32>
  %sme0 = tensor.empty() : tensor<2x1xf32>
  %smi0 = linalg.fill ins(%zero : f32) outs(%sme0 : tensor<2x1xf32>) -> tensor<2x1xf32>
  %sm0 = linalg.generic {indexing_maps = [#id3, #red3], iterator_types = ["parallel", "parallel", "reduction"]} ins(%ex0 : tensor<2x1x?xf32>) outs(%smi0 : tensor<2x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %a = arith.addf %in, %out : f32
      linalg.yield %a : f32
    } -> tensor<2x1xf32>
  %pe0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %pr0 = linalg.generic {indexing_maps = [#id3, #red3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%ex0, %sm0 : tensor<2x1x?xf32>, tensor<2x1xf32>) outs(%pe0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %d = arith.divf %in, %in_1 : f32
      linalg.yield %d : f32
    } -> tensor<2x1x?xf32>
  %oe0 = tensor.empty() : tensor<1x2x4xf32>
  %oz0 = linalg.fill ins(%zero : f32) outs(%oe0 : tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  %o0 = linalg.generic {indexing_maps = [#wp3, #wv3, #wo3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%pr0, %vr0 : tensor<2x1x?xf32>, tensor<?x2x4xf32>) outs(%oz0 : tensor<1x2x4xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<1x2x4xf32>
  return %o0, %kw0, %vw0 : tensor<1x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>
}

// -----

// The sum of the exps starts at 1, not 0.

// CHECK-LABEL: func.func @sum_starts_at_one_in_softmax(
// CHECK-SAME: %{{[a-z0-9]+}}: tensor<1x16x2x4xf32>

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#red3 = affine_map<(d0, d1, d2) -> (d0, d1)>
#sq3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d3)>
#sk3 = affine_map<(d0, d1, d2, d3) -> (d2, d0, d3)>
#ss3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#wp3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
#wv3 = affine_map<(d0, d1, d2, d3) -> (d3, d0, d2)>
#wo3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d2)>

func.func @sum_starts_at_one_in_softmax(%q: tensor<1x2x4xf32>, %k0: tensor<1x2x4xf32>, %v0: tensor<1x2x4xf32>, %kc: tensor<1x16x2x4xf32>, %vc: tensor<1x16x2x4xf32>, %pos: index)
    -> (tensor<1x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %c1 = arith.constant 1 : index
  %len = arith.addi %pos, %c1 : index
  // Layer 0
  %kw0 = tensor.insert_slice %k0 into %kc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<1x16x2x4xf32>
  %kr0 = tensor.extract_slice %kw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %vw0 = tensor.insert_slice %v0 into %vc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<1x16x2x4xf32>
  %vr0 = tensor.extract_slice %vw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %se0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sz0 = linalg.fill ins(%zero : f32) outs(%se0 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %s0 = linalg.generic {indexing_maps = [#sq3, #sk3, #ss3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %kr0 : tensor<1x2x4xf32>, tensor<?x2x4xf32>) outs(%sz0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<2x1x?xf32>
  %scale0 = arith.constant 0.5 : f32
  %sce0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sc0 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s0 : tensor<2x1x?xf32>) outs(%sce0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %out: f32):
      %m = arith.mulf %in, %scale0 : f32
      linalg.yield %m : f32
    } -> tensor<2x1x?xf32>
  %mxe0 = tensor.empty() : tensor<2x1xf32>
  %mxi0 = linalg.fill ins(%ninf : f32) outs(%mxe0 : tensor<2x1xf32>) -> tensor<2x1xf32>
  %mx0 = linalg.generic {indexing_maps = [#id3, #red3], iterator_types = ["parallel", "parallel", "reduction"]} ins(%sc0 : tensor<2x1x?xf32>) outs(%mxi0 : tensor<2x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %m = arith.maximumf %in, %out : f32
      linalg.yield %m : f32
    } -> tensor<2x1xf32>
  %exe0 = tensor.empty(%len) : tensor<2x1x?xf32>
  // expected-remark@below {{not adopted: this is not a softmax: the exps are not summed from zero}}
  %ex0 = linalg.generic {indexing_maps = [#id3, #red3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%sc0, %mx0 : tensor<2x1x?xf32>, tensor<2x1xf32>) outs(%exe0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %d = arith.subf %in, %in_1 : f32
      %e = math.exp %d : f32
      linalg.yield %e : f32
    } -> tensor<2x1x?xf32>
  %sme0 = tensor.empty() : tensor<2x1xf32>
  %one = arith.constant 1.0 : f32
  %smi0 = linalg.fill ins(%one : f32) outs(%sme0 : tensor<2x1xf32>) -> tensor<2x1xf32>
  %sm0 = linalg.generic {indexing_maps = [#id3, #red3], iterator_types = ["parallel", "parallel", "reduction"]} ins(%ex0 : tensor<2x1x?xf32>) outs(%smi0 : tensor<2x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %a = arith.addf %in, %out : f32
      linalg.yield %a : f32
    } -> tensor<2x1xf32>
  %pe0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %pr0 = linalg.generic {indexing_maps = [#id3, #red3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%ex0, %sm0 : tensor<2x1x?xf32>, tensor<2x1xf32>) outs(%pe0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %d = arith.divf %in, %in_1 : f32
      linalg.yield %d : f32
    } -> tensor<2x1x?xf32>
  %oe0 = tensor.empty() : tensor<1x2x4xf32>
  %oz0 = linalg.fill ins(%zero : f32) outs(%oe0 : tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  %o0 = linalg.generic {indexing_maps = [#wp3, #wv3, #wo3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%pr0, %vr0 : tensor<2x1x?xf32>, tensor<?x2x4xf32>) outs(%oz0 : tensor<1x2x4xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<1x2x4xf32>
  return %o0, %kw0, %vw0 : tensor<1x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>
}

// -----

// The max also computes its argmax, which the function returns.

// CHECK-LABEL: func.func @max_index_returned(
// CHECK-SAME: %{{[a-z0-9]+}}: tensor<1x16x2x4xf32>

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#red3 = affine_map<(d0, d1, d2) -> (d0, d1)>
#sq3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d3)>
#sk3 = affine_map<(d0, d1, d2, d3) -> (d2, d0, d3)>
#ss3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#wp3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
#wv3 = affine_map<(d0, d1, d2, d3) -> (d3, d0, d2)>
#wo3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d2)>

func.func @max_index_returned(%q: tensor<1x2x4xf32>, %k0: tensor<1x2x4xf32>, %v0: tensor<1x2x4xf32>, %kc: tensor<1x16x2x4xf32>, %vc: tensor<1x16x2x4xf32>, %pos: index)
    -> (tensor<1x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>, tensor<2x1xi64>) {
  %zero = arith.constant 0.000000e+00 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %c1 = arith.constant 1 : index
  %len = arith.addi %pos, %c1 : index
  // Layer 0
  %kw0 = tensor.insert_slice %k0 into %kc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<1x16x2x4xf32>
  %kr0 = tensor.extract_slice %kw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %vw0 = tensor.insert_slice %v0 into %vc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<1x16x2x4xf32>
  %vr0 = tensor.extract_slice %vw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %se0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sz0 = linalg.fill ins(%zero : f32) outs(%se0 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %s0 = linalg.generic {indexing_maps = [#sq3, #sk3, #ss3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %kr0 : tensor<1x2x4xf32>, tensor<?x2x4xf32>) outs(%sz0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<2x1x?xf32>
  %scale0 = arith.constant 0.5 : f32
  %sce0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sc0 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s0 : tensor<2x1x?xf32>) outs(%sce0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %out: f32):
      %m = arith.mulf %in, %scale0 : f32
      linalg.yield %m : f32
    } -> tensor<2x1x?xf32>
  %mxe0 = tensor.empty() : tensor<2x1xf32>
  %mxi0 = linalg.fill ins(%ninf : f32) outs(%mxe0 : tensor<2x1xf32>) -> tensor<2x1xf32>
  %c0i = arith.constant 0 : i64
  %mie0 = tensor.empty() : tensor<2x1xi64>
  %mii0 = linalg.fill ins(%c0i : i64) outs(%mie0 : tensor<2x1xi64>) -> tensor<2x1xi64>
  // expected-remark@below {{not adopted: this is not a softmax: the max's index is read}}
  %mx0:2 = linalg.generic {indexing_maps = [#id3, #red3, #red3], iterator_types = ["parallel", "parallel", "reduction"]} ins(%sc0 : tensor<2x1x?xf32>) outs(%mxi0, %mii0 : tensor<2x1xf32>, tensor<2x1xi64>) {
    ^bb0(%in: f32, %out: f32, %oldi: i64):
      %t = linalg.index 2 : index
      %ti = arith.index_cast %t : index to i64
      %gt = arith.cmpf ogt, %in, %out : f32
      %m = arith.maximumf %in, %out : f32
      %ni = arith.select %gt, %ti, %oldi : i64
      linalg.yield %m, %ni : f32, i64
    } -> (tensor<2x1xf32>, tensor<2x1xi64>)
  %exe0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %ex0 = linalg.generic {indexing_maps = [#id3, #red3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%sc0, %mx0#0 : tensor<2x1x?xf32>, tensor<2x1xf32>) outs(%exe0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %d = arith.subf %in, %in_1 : f32
      %e = math.exp %d : f32
      linalg.yield %e : f32
    } -> tensor<2x1x?xf32>
  %sme0 = tensor.empty() : tensor<2x1xf32>
  %smi0 = linalg.fill ins(%zero : f32) outs(%sme0 : tensor<2x1xf32>) -> tensor<2x1xf32>
  %sm0 = linalg.generic {indexing_maps = [#id3, #red3], iterator_types = ["parallel", "parallel", "reduction"]} ins(%ex0 : tensor<2x1x?xf32>) outs(%smi0 : tensor<2x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %a = arith.addf %in, %out : f32
      linalg.yield %a : f32
    } -> tensor<2x1xf32>
  %pe0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %pr0 = linalg.generic {indexing_maps = [#id3, #red3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%ex0, %sm0 : tensor<2x1x?xf32>, tensor<2x1xf32>) outs(%pe0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %d = arith.divf %in, %in_1 : f32
      linalg.yield %d : f32
    } -> tensor<2x1x?xf32>
  %oe0 = tensor.empty() : tensor<1x2x4xf32>
  %oz0 = linalg.fill ins(%zero : f32) outs(%oe0 : tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  %o0 = linalg.generic {indexing_maps = [#wp3, #wv3, #wo3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%pr0, %vr0 : tensor<2x1x?xf32>, tensor<?x2x4xf32>) outs(%oz0 : tensor<1x2x4xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<1x2x4xf32>
  return %o0, %kw0, %vw0, %mx0#1 : tensor<1x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>, tensor<2x1xi64>
}

// -----

// The queries are [tokens, group, KV heads, head_dim]: the query group comes
// before the KV head.

// CHECK-LABEL: func.func @query_group_before_head(
// CHECK-SAME: %{{[a-z0-9]+}}: tensor<1x16x2x4xf32>

#id4 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#gq = affine_map<(d0, d1, d2, d3, d4) -> (d1, d4, d0, d3)>
#gk = affine_map<(d0, d1, d2, d3, d4) -> (d2, d0, d3)>
#gs = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d4, d2)>
#gp = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d4, d3)>
#gv = affine_map<(d0, d1, d2, d3, d4) -> (d3, d0, d2)>
#go = affine_map<(d0, d1, d2, d3, d4) -> (d1, d4, d0, d2)>

func.func @query_group_before_head(%q: tensor<2x3x2x4xf32>, %k0: tensor<1x2x4xf32>, %v0: tensor<1x2x4xf32>, %kc: tensor<1x16x2x4xf32>, %vc: tensor<1x16x2x4xf32>, %pos: index)
    -> (tensor<2x3x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %c1 = arith.constant 1 : index
  %len = arith.addi %pos, %c1 : index
  %kw0 = tensor.insert_slice %k0 into %kc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<1x16x2x4xf32>
  %kr0 = tensor.extract_slice %kw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %vw0 = tensor.insert_slice %v0 into %vc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<1x16x2x4xf32>
  %vr0 = tensor.extract_slice %vw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %se0 = tensor.empty(%len) : tensor<2x2x3x?xf32>
  %sz0 = linalg.fill ins(%zero : f32) outs(%se0 : tensor<2x2x3x?xf32>) -> tensor<2x2x3x?xf32>
  // expected-remark@below {{not adopted: the queries are not [tokens, heads, head_dim]}}
  %s0 = linalg.generic {indexing_maps = [#gq, #gk, #gs], iterator_types = ["parallel", "parallel", "parallel", "reduction", "parallel"]} ins(%q, %kr0 : tensor<2x3x2x4xf32>, tensor<?x2x4xf32>) outs(%sz0 : tensor<2x2x3x?xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<2x2x3x?xf32>
  %scale0 = arith.constant 0.5 : f32
  %sce0 = tensor.empty(%len) : tensor<2x2x3x?xf32>
  %sc0 = linalg.generic {indexing_maps = [#id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s0 : tensor<2x2x3x?xf32>) outs(%sce0 : tensor<2x2x3x?xf32>) {
    ^bb0(%in: f32, %out: f32):
      %m = arith.mulf %in, %scale0 : f32
      linalg.yield %m : f32
    } -> tensor<2x2x3x?xf32>
  %pe0 = tensor.empty(%len) : tensor<2x2x3x?xf32>
  %pr0 = linalg.softmax dimension(3) ins(%sc0 : tensor<2x2x3x?xf32>) outs(%pe0 : tensor<2x2x3x?xf32>) -> tensor<2x2x3x?xf32>
  %oe0 = tensor.empty() : tensor<2x3x2x4xf32>
  %oz0 = linalg.fill ins(%zero : f32) outs(%oe0 : tensor<2x3x2x4xf32>) -> tensor<2x3x2x4xf32>
  %o0 = linalg.generic {indexing_maps = [#gp, #gv, #go], iterator_types = ["parallel", "parallel", "parallel", "reduction", "parallel"]} ins(%pr0, %vr0 : tensor<2x2x3x?xf32>, tensor<?x2x4xf32>) outs(%oz0 : tensor<2x3x2x4xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<2x3x2x4xf32>
  return %o0, %kw0, %vw0 : tensor<2x3x2x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>
}
