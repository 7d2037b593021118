// RUN: kvq-opt %s --split-input-file --verify-diagnostics --kvq-quantize-kv-cache \
// RUN:   | FileCheck %s --implicit-check-not=kvq.cache_update --implicit-check-not=kvq.cache

// Cache-like arguments in the forms frontends emit that kvq-quantize-kv-cache
// does not adopt yet. None may be left without a remark, and each remark must
// name what is really there (the function stays as it was: the CHECK lines
// and implicit-check-not). Attention is left out where the refusal comes
// from the cache's writes alone.

// Hugging Face's DynamicCache, as torch-mlir lowers torch.cat: the cache
// grows by concatenation along the sequence ([batch, heads, seq, head_dim]).
// CHECK-LABEL: func.func @concat_growth(
// CHECK: tensor.concat
func.func @concat_growth(%k: tensor<1x2x1x4xf32>, %kc: tensor<1x2x?x4xf32>) -> tensor<1x2x?x4xf32> {
  // expected-remark@below {{not adopted: the cache grows by tensor.concat and has no capacity; set the pass option max-context=N}}
  %g = tensor.concat dim(2) %kc, %k : (tensor<1x2x?x4xf32>, tensor<1x2x1x4xf32>) -> tensor<1x2x?x4xf32>
  return %g : tensor<1x2x?x4xf32>
}

// -----

// Two tokens scattered at runtime indices (index_put of a prefill): the
// indices need not be consecutive, so no insert_slice at pos says the same.
// One index is adopted (kvq-quantize-kv-cache-scatter-writes.mlir).
// CHECK-LABEL: func.func @scatter_write(
// CHECK: tensor.scatter
func.func @scatter_write(%k: tensor<2x1x2x4xf32>, %kc: tensor<16x2x4xf32>, %idx: tensor<2x1xindex>) -> tensor<16x2x4xf32> {
  // expected-remark@below {{not adopted: the cache is written through 'tensor.scatter' at runtime indices}}
  %w = tensor.scatter %k into %kc[%idx] scatter_dims([0]) unique : (tensor<2x1x2x4xf32>, tensor<16x2x4xf32>, tensor<2x1xindex>) -> tensor<16x2x4xf32>
  return %w : tensor<16x2x4xf32>
}

// -----

// Hugging Face's [batch, heads, seq, head_dim] layout, written at dimension
// 2 (adopted with an attention: kvq-quantize-kv-cache-frontend-forms.mlir)
// but read by none here: the remark names the write, not its layout.
// CHECK-LABEL: func.func @hf_layout(
// CHECK: tensor.insert_slice
func.func @hf_layout(%k: tensor<1x2x1x4xf32>, %kc: tensor<1x2x16x4xf32>, %pos: index) -> tensor<1x2x16x4xf32> {
  // expected-remark@below {{not adopted: this cache write is not read by a recognised attention}}
  %w = tensor.insert_slice %k into %kc[0, 0, %pos, 0] [1, 2, 1, 4] [1, 1, 1, 1] : tensor<1x2x1x4xf32> into tensor<1x2x16x4xf32>
  return %w : tensor<1x2x16x4xf32>
}

// -----

// Two sequences in one [batch, seq, heads, head_dim] cache, both written.
// CHECK-LABEL: func.func @batch_two(
// CHECK: tensor.insert_slice
func.func @batch_two(%k: tensor<2x1x2x4xf32>, %kc: tensor<2x16x2x4xf32>, %pos: index) -> tensor<2x16x2x4xf32> {
  // expected-remark@below {{not adopted: the write covers all 2 entries of dimension 0 besides KV heads and channels: the graph holds a batch of 2 sequences; a kvq cache holds one sequence}}
  %w = tensor.insert_slice %k into %kc[0, %pos, 0, 0] [2, 1, 2, 4] [1, 1, 1, 1] : tensor<2x1x2x4xf32> into tensor<2x16x2x4xf32>
  return %w : tensor<2x16x2x4xf32>
}

// -----

// A rank-5 cache (K and V stacked over layers: [2, layers, seq, heads,
// head_dim], as vLLM-style exports hold them) of which only the keys are
// written: not a K/V pair (the pair with an attention is adopted,
// kvq-quantize-kv-cache-frontend-forms.mlir @kv_pair_layers).
// CHECK-LABEL: func.func @rank5(
// CHECK: tensor.insert_slice
func.func @rank5(%k: tensor<1x2x4xf32>, %kv: tensor<2x3x16x2x4xf32>, %pos: index) -> tensor<2x3x16x2x4xf32> {
  // expected-remark@below {{not adopted: the cache write picks one entry of dimensions 0 and 1 (keys and values stacked in one tensor with the layers?); kvq adopts K and V as two tensors, or as the two entries of one dimension of size 2 when both are written and read}}
  %w = tensor.insert_slice %k into %kv[0, 1, %pos, 0, 0] [1, 1, 1, 2, 4] [1, 1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<2x3x16x2x4xf32>
  return %w : tensor<2x3x16x2x4xf32>
}

// -----

// A generic that overwrites every slot from a position held in a tensor on
// (t >= pos): more than one token's slot, so not a write at pos. The
// one-slot form (t == pos) is adopted
// (kvq-quantize-kv-cache-scatter-writes.mlir).
// CHECK-LABEL: func.func @scatter_like_generic(
// CHECK: linalg.generic
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
func.func @scatter_like_generic(%k: tensor<1x2x4xf32>, %kc: tensor<16x2x4xf32>, %pos: tensor<index>) -> tensor<16x2x4xf32> {
  // expected-remark@below {{not adopted: the cache is written by a linalg.generic that extracts its indices at runtime (a scatter)}}
  %w = linalg.generic {indexing_maps = [#id3], iterator_types = ["parallel", "parallel", "parallel"]} outs(%kc : tensor<16x2x4xf32>) {
  ^bb0(%out: f32):
    %t = linalg.index 0 : index
    %h = linalg.index 1 : index
    %c = linalg.index 2 : index
    %p = tensor.extract %pos[] : tensor<index>
    %eq = arith.cmpi uge, %t, %p : index
    %c0 = arith.constant 0 : index
    %new = tensor.extract %k[%c0, %h, %c] : tensor<1x2x4xf32>
    %r = arith.select %eq, %new, %out : f32
    linalg.yield %r : f32
  } -> tensor<16x2x4xf32>
  return %w : tensor<16x2x4xf32>
}

// -----

// A paged cache: this step's key written into its page, the sequence's
// pages gathered through a page table. (A gathered argument that is not
// state, such as an embedding table, is not a cache and gets no remark.)
// CHECK-LABEL: func.func @paged_gather(
// CHECK: tensor.gather
func.func @paged_gather(%k: tensor<1x2x4xf32>, %pages: tensor<8x4x2x4xf32>, %page: index, %slot: index, %table: tensor<2x1xindex>, %emb: tensor<10x4xf32>, %ids: tensor<1x1xindex>) -> (tensor<2x1x4x2x4xf32>, tensor<1x1x4xf32>, tensor<8x4x2x4xf32>) {
  %w = tensor.insert_slice %k into %pages[%page, %slot, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<8x4x2x4xf32>
  // expected-remark@below {{not adopted: the cache is read through 'tensor.gather' at runtime indices (a page table); kvq does not adopt paged caches}}
  %g = tensor.gather %pages[%table] gather_dims([0]) : (tensor<8x4x2x4xf32>, tensor<2x1xindex>) -> tensor<2x1x4x2x4xf32>
  %e = tensor.gather %emb[%ids] gather_dims([0]) : (tensor<10x4xf32>, tensor<1x1xindex>) -> tensor<1x1x4xf32>
  return %g, %e, %w : tensor<2x1x4x2x4xf32>, tensor<1x1x4xf32>, tensor<8x4x2x4xf32>
}

// -----

// A loop over layers whose count is a runtime value: it cannot be
// unrolled, and the caches it carries are not adopted (a constant count is,
// kvq-quantize-kv-cache-frontend-forms.mlir @layer_loop).
// CHECK-LABEL: func.func @dynamic_layer_loop(
// CHECK: scf.for

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#sq3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d3)>
#sk3 = affine_map<(d0, d1, d2, d3) -> (d2, d0, d3)>
#ss3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#wp3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
#wv3 = affine_map<(d0, d1, d2, d3) -> (d3, d0, d2)>
#wo3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d2)>


func.func @dynamic_layer_loop(%q: tensor<1x2x4xf32>, %k: tensor<1x2x4xf32>, %v: tensor<1x2x4xf32>, %kc: tensor<2x16x2x4xf32>, %vc: tensor<2x16x2x4xf32>, %pos: index, %n: i32)
    -> (tensor<1x2x4xf32>, tensor<2x16x2x4xf32>, tensor<2x16x2x4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.index_cast %n : i32 to index
  %zero = arith.constant 0.000000e+00 : f32
  %len = arith.addi %pos, %c1 : index
  // expected-remark@below {{not adopted: the cache is carried by a loop whose trip count is not a constant of at most 256}}
  %r:3 = scf.for %l = %c0 to %c2 step %c1 iter_args(%x = %q, %kcl = %kc, %vcl = %vc) -> (tensor<1x2x4xf32>, tensor<2x16x2x4xf32>, tensor<2x16x2x4xf32>) {
    %kw = tensor.insert_slice %x into %kcl[%l, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<2x16x2x4xf32>
    %vw = tensor.insert_slice %v into %vcl[%l, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<2x16x2x4xf32>
    %kr = tensor.extract_slice %kw[%l, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<2x16x2x4xf32> to tensor<?x2x4xf32>
    %vr = tensor.extract_slice %vw[%l, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<2x16x2x4xf32> to tensor<?x2x4xf32>
    %se = tensor.empty(%len) : tensor<2x1x?xf32>
    %sz = linalg.fill ins(%zero : f32) outs(%se : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
    %s = linalg.generic {indexing_maps = [#sq3, #sk3, #ss3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%x, %kr : tensor<1x2x4xf32>, tensor<?x2x4xf32>) outs(%sz : tensor<2x1x?xf32>) {
      ^bb0(%in: f32, %in_1: f32, %out: f32):
        %m = arith.mulf %in, %in_1 : f32
        %a = arith.addf %out, %m : f32
        linalg.yield %a : f32
      } -> tensor<2x1x?xf32>
    %pe = tensor.empty(%len) : tensor<2x1x?xf32>
    %p = linalg.softmax dimension(2) ins(%s : tensor<2x1x?xf32>) outs(%pe : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
    %oe = tensor.empty() : tensor<1x2x4xf32>
    %oz = linalg.fill ins(%zero : f32) outs(%oe : tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
    %o = linalg.generic {indexing_maps = [#wp3, #wv3, #wo3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%p, %vr : tensor<2x1x?xf32>, tensor<?x2x4xf32>) outs(%oz : tensor<1x2x4xf32>) {
      ^bb0(%in: f32, %in_1: f32, %out: f32):
        %m = arith.mulf %in, %in_1 : f32
        %a = arith.addf %out, %m : f32
        linalg.yield %a : f32
      } -> tensor<1x2x4xf32>
    scf.yield %o, %kw, %vw : tensor<1x2x4xf32>, tensor<2x16x2x4xf32>, tensor<2x16x2x4xf32>
  }
  return %r#0, %r#1, %r#2 : tensor<1x2x4xf32>, tensor<2x16x2x4xf32>, tensor<2x16x2x4xf32>
}

// -----

// A cache held as a memref and updated in place (a bufferized model, or a
// hand-written one on buffers): the new key copied into a subview at pos,
// the prefix read back. The pass reads the buffers as tensors (adopted
// forms: kvq-quantize-kv-cache-memref-state.mlir); here the prefix is only
// summed, which is no attention, and the function keeps its buffers.
// CHECK-LABEL: func.func @memref_state(
// CHECK: memref.copy
func.func @memref_state(%k: memref<1x2x4xf32>, %kc: memref<16x2x4xf32>, %out: memref<2x4xf32>, %pos: index) {
  %slot = memref.subview %kc[%pos, 0, 0] [1, 2, 4] [1, 1, 1] : memref<16x2x4xf32> to memref<1x2x4xf32, strided<[8, 4, 1], offset: ?>>
  memref.copy %k, %slot : memref<1x2x4xf32> to memref<1x2x4xf32, strided<[8, 4, 1], offset: ?>>
  %c1 = arith.constant 1 : index
  %len = arith.addi %pos, %c1 : index
  %read = memref.subview %kc[0, 0, 0] [%len, 2, 4] [1, 1, 1] : memref<16x2x4xf32> to memref<?x2x4xf32, strided<[8, 4, 1]>>
  // expected-remark@below {{not adopted: this cache read does not feed a recognised attention}}
  linalg.generic {indexing_maps = [affine_map<(t, h, c) -> (t, h, c)>, affine_map<(t, h, c) -> (h, c)>], iterator_types = ["reduction", "parallel", "parallel"]} ins(%read : memref<?x2x4xf32, strided<[8, 4, 1]>>) outs(%out : memref<2x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %a, %o : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// The cache buffer handed to another function (a logging or a kernel
// call): what the callee does with it is not in the graph.
// CHECK-LABEL: func.func @memref_state_call(
// CHECK: call @inspect
func.func private @inspect(memref<16x2x4xf32>)
func.func @memref_state_call(%k: memref<1x2x4xf32>, %kc: memref<16x2x4xf32>, %out: memref<1x2x4xf32>, %pos: index) {
  %slot = memref.subview %kc[%pos, 0, 0] [1, 2, 4] [1, 1, 1] : memref<16x2x4xf32> to memref<1x2x4xf32, strided<[8, 4, 1], offset: ?>>
  memref.copy %k, %slot : memref<1x2x4xf32> to memref<1x2x4xf32, strided<[8, 4, 1], offset: ?>>
  // expected-remark@below {{not adopted: argument #1 is a buffer (memref) written and read back in place, and it is passed to a call, where kvq cannot follow it (the buffer escapes the function)}}
  call @inspect(%kc) : (memref<16x2x4xf32>) -> ()
  memref.copy %slot, %out : memref<1x2x4xf32, strided<[8, 4, 1], offset: ?>> to memref<1x2x4xf32>
  return
}

// -----

// llama2.c's forward() walks the layers in a loop, the layer's cache found
// at an offset (loff = l * seq_len * kv_dim); on buffers, the loop body
// writes and reads subviews of the cache at the loop's index. The loop is
// read (an attention in it is adopted: kvq-quantize-kv-cache-memref-state
// @llama2c_layer_loop); here the row written is only copied out.
// CHECK-LABEL: func.func @memref_state_layer_loop(
// CHECK: scf.for
func.func @memref_state_layer_loop(%k: memref<1x2x4xf32>, %kc: memref<2x16x2x4xf32>, %out: memref<1x2x4xf32>, %pos: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  scf.for %l = %c0 to %c2 step %c1 {
    %slot = memref.subview %kc[%l, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : memref<2x16x2x4xf32> to memref<1x2x4xf32, strided<[8, 4, 1], offset: ?>>
    // expected-remark@below {{not adopted: this cache write is not read by a recognised attention}}
    memref.copy %k, %slot : memref<1x2x4xf32> to memref<1x2x4xf32, strided<[8, 4, 1], offset: ?>>
    memref.copy %slot, %out : memref<1x2x4xf32, strided<[8, 4, 1], offset: ?>> to memref<1x2x4xf32>
  }
  return
}

// -----

// Buffer state written under a condition (a model that clears its cache
// when pos is 0): what the buffer holds after the scf.if depends on a
// runtime branch, which kvq does not follow.
// CHECK-LABEL: func.func @memref_state_conditional(
// CHECK: scf.if
func.func @memref_state_conditional(%k: memref<1x2x4xf32>, %kc: memref<16x2x4xf32>, %out: memref<1x2x4xf32>, %pos: index) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %first = arith.cmpi eq, %pos, %c0 : index
  // expected-remark@below {{not adopted: argument #1 is a buffer (memref) written and read back in place, and it is used inside 'scf.if'; kvq follows buffer state in the function's block and in scf.for bodies only}}
  scf.if %first {
    linalg.fill ins(%zero : f32) outs(%kc : memref<16x2x4xf32>)
  }
  %slot = memref.subview %kc[%pos, 0, 0] [1, 2, 4] [1, 1, 1] : memref<16x2x4xf32> to memref<1x2x4xf32, strided<[8, 4, 1], offset: ?>>
  memref.copy %k, %slot : memref<1x2x4xf32> to memref<1x2x4xf32, strided<[8, 4, 1], offset: ?>>
  memref.copy %slot, %out : memref<1x2x4xf32, strided<[8, 4, 1], offset: ?>> to memref<1x2x4xf32>
  return
}

// -----

// The cache addressed through memref.reinterpret_cast (pointer arithmetic
// in a C-like model, as llama2.c's key_cache + loff + pos * kv_dim): the
// view is not one kvq can compose into a slice.
// CHECK-LABEL: func.func @memref_state_reinterpret(
// CHECK: memref.reinterpret_cast
func.func @memref_state_reinterpret(%k: memref<8xf32>, %kc: memref<16x2x4xf32>, %out: memref<8xf32>, %pos: index) {
  %c8 = arith.constant 8 : index
  %off = arith.muli %pos, %c8 : index
  // expected-remark@below {{not adopted: argument #1 is a buffer (memref) written and read back in place, and it is used by 'memref.reinterpret_cast', which kvq does not read as a tensor}}
  %row = memref.reinterpret_cast %kc to offset: [%off], sizes: [8], strides: [1] : memref<16x2x4xf32> to memref<8xf32, strided<[1], offset: ?>>
  memref.copy %k, %row : memref<8xf32> to memref<8xf32, strided<[1], offset: ?>>
  memref.copy %row, %out : memref<8xf32, strided<[1], offset: ?>> to memref<8xf32>
  return
}

// -----

// Buffer state across blocks (a branch on the position, as a model that
// resets its cache at position 0 writes it): reads and writes are not in
// one program order.
// CHECK-LABEL: func.func @memref_state_blocks(
// CHECK: cf.cond_br
// expected-remark@below {{not adopted: the function keeps state in memref arguments across several blocks; kvq follows buffer state in one block}}
func.func @memref_state_blocks(%k: memref<1x2x4xf32>, %kc: memref<16x2x4xf32>, %out: memref<1x2x4xf32>, %pos: index) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %first = arith.cmpi eq, %pos, %c0 : index
  cf.cond_br %first, ^reset, ^step
^reset:
  linalg.fill ins(%zero : f32) outs(%kc : memref<16x2x4xf32>)
  cf.br ^step
^step:
  %slot = memref.subview %kc[%pos, 0, 0] [1, 2, 4] [1, 1, 1] : memref<16x2x4xf32> to memref<1x2x4xf32, strided<[8, 4, 1], offset: ?>>
  memref.copy %k, %slot : memref<1x2x4xf32> to memref<1x2x4xf32, strided<[8, 4, 1], offset: ?>>
  memref.copy %slot, %out : memref<1x2x4xf32, strided<[8, 4, 1], offset: ?>> to memref<1x2x4xf32>
  return
}

// -----

// A scratch buffer the step allocates handed to a kernel call next to its
// cache state: the call may keep or write it.
// CHECK-LABEL: func.func @memref_state_scratch_call(
// CHECK: call @kernel
func.func private @kernel(memref<2x4xf32>)
func.func @memref_state_scratch_call(%k: memref<1x2x4xf32>, %kc: memref<16x2x4xf32>, %out: memref<1x2x4xf32>, %pos: index) {
  %slot = memref.subview %kc[%pos, 0, 0] [1, 2, 4] [1, 1, 1] : memref<16x2x4xf32> to memref<1x2x4xf32, strided<[8, 4, 1], offset: ?>>
  memref.copy %k, %slot : memref<1x2x4xf32> to memref<1x2x4xf32, strided<[8, 4, 1], offset: ?>>
  %tmp = memref.alloc() : memref<2x4xf32>
  // expected-remark@below {{not adopted: the function keeps state in memref arguments, and a buffer it allocates is passed to a call, where kvq cannot follow it}}
  call @kernel(%tmp) : (memref<2x4xf32>) -> ()
  memref.copy %slot, %out : memref<1x2x4xf32, strided<[8, 4, 1], offset: ?>> to memref<1x2x4xf32>
  return
}

// -----

// Next to its cache arguments, the step writes a memref.global (a second
// cache kept in module state, as a C model's static arrays lower).
// CHECK-LABEL: func.func @memref_state_global(
// CHECK: memref.get_global
memref.global "private" @vcache : memref<16x2x4xf32> = uninitialized
func.func @memref_state_global(%k: memref<1x2x4xf32>, %kc: memref<16x2x4xf32>, %out: memref<1x2x4xf32>, %pos: index) {
  %slot = memref.subview %kc[%pos, 0, 0] [1, 2, 4] [1, 1, 1] : memref<16x2x4xf32> to memref<1x2x4xf32, strided<[8, 4, 1], offset: ?>>
  memref.copy %k, %slot : memref<1x2x4xf32> to memref<1x2x4xf32, strided<[8, 4, 1], offset: ?>>
  %vc = memref.get_global @vcache : memref<16x2x4xf32>
  %vslot = memref.subview %vc[%pos, 0, 0] [1, 2, 4] [1, 1, 1] : memref<16x2x4xf32> to memref<1x2x4xf32, strided<[8, 4, 1], offset: ?>>
  // expected-remark@below {{not adopted: the function writes a memref.get_global buffer (module state); kvq adopts caches passed in as arguments}}
  memref.copy %k, %vslot : memref<1x2x4xf32> to memref<1x2x4xf32, strided<[8, 4, 1], offset: ?>>
  memref.copy %slot, %out : memref<1x2x4xf32, strided<[8, 4, 1], offset: ?>> to memref<1x2x4xf32>
  return
}

// -----

// tosa.scatter with one index per head read from a tensor argument: nothing
// shows the heads' indices are one position (the TOSA form that is adopted,
// indices broadcast from one position: kvq-quantize-kv-cache-tosa.mlir).
// CHECK-LABEL: func.func @tosa_scatter_rows(
// CHECK: tosa.scatter
func.func @tosa_scatter_rows(%k: tensor<2x1x4xf32>, %kc: tensor<2x16x4xf32>, %idx: tensor<2x1xi32>) -> tensor<2x16x4xf32> {
  // expected-remark@below {{not adopted: the cache is written by a scatter (rows written at indices read from a tensor) that has indices not shown to be one position for every row}}
  %w = tosa.scatter %kc, %idx, %k : (tensor<2x16x4xf32>, tensor<2x1xi32>, tensor<2x1x4xf32>) -> tensor<2x16x4xf32>
  return %w : tensor<2x16x4xf32>
}

// -----

// tosa.scatter of two tokens per head (a chunk of a prefill). The same
// remark holds for torch-mlir's TOSA index_put (convertScatterNdOp in
// lib/Conversion/TorchToTosa/TosaLegalizeCommon.cpp), which flattens the
// cache to [1, K, C] and writes every head as one row at a linearized
// index.
// CHECK-LABEL: func.func @tosa_scatter_chunk(
// CHECK: tosa.scatter
func.func @tosa_scatter_chunk(%k: tensor<2x2x4xf32>, %kc: tensor<2x16x4xf32>, %idx: tensor<2x2xi32>) -> tensor<2x16x4xf32> {
  // expected-remark@below {{not adopted: the cache is written by a scatter (rows written at indices read from a tensor) that writes several slots per row (a chunk of tokens)}}
  %w = tosa.scatter %kc, %idx, %k : (tensor<2x16x4xf32>, tensor<2x2xi32>, tensor<2x2x4xf32>) -> tensor<2x16x4xf32>
  return %w : tensor<2x16x4xf32>
}

// -----

// The heads flattened into the index, as torch-mlir's index_put writes them
// ([1, H * S, D], one slot per head), but at indices passed in: nothing
// shows they are head * 16 + one position, so the scatter stays.
// CHECK-LABEL: func.func @tosa_scatter_flat_free(
// CHECK: tosa.scatter
func.func @tosa_scatter_flat_free(%k: tensor<1x2x4xf32>, %kc: tensor<1x32x4xf32>, %idx: tensor<1x2xi32>) -> tensor<1x32x4xf32> {
  // expected-remark@below {{not adopted: the cache is written by a scatter (rows written at indices read from a tensor) that writes several slots per row, at indices not shown to be head * capacity + position (for token j of a chunk, position j of the step's positions)}}
  %w = tosa.scatter %kc, %idx, %k : (tensor<1x32x4xf32>, tensor<1x2xi32>, tensor<1x2x4xf32>) -> tensor<1x32x4xf32>
  return %w : tensor<1x32x4xf32>
}

// -----

// The cache kept in a tosa.variable (TOSA's stateful form) rather than
// passed in and returned.
// CHECK-LABEL: func.func @tosa_variable(
// CHECK: tosa.variable_write
tosa.variable @kcache : tensor<2x16x4xf32>
func.func @tosa_variable(%k: tensor<2x1x4xf32>, %idx: tensor<2x1xi32>) {
  %kc = tosa.variable_read @kcache : tensor<2x16x4xf32>
  %w = tosa.scatter %kc, %idx, %k : (tensor<2x16x4xf32>, tensor<2x1xi32>, tensor<2x1x4xf32>) -> tensor<2x16x4xf32>
  // expected-remark@below {{not adopted: the cache-like state is module state the function writes (tosa.variable @kcache); kvq adopts caches passed in as tensor arguments and returned}}
  tosa.variable_write @kcache, %w : tensor<2x16x4xf32>
  return
}

// -----

// The cache kept in a mutable ml_program.global (torch-mlir's and IREE's
// module state).
// CHECK-LABEL: func.func @ml_program_global(
// CHECK: ml_program.global_store
ml_program.global private mutable @vcache(dense<0.0> : tensor<16x2x4xf32>) : tensor<16x2x4xf32>
func.func @ml_program_global(%v: tensor<1x2x4xf32>, %pos: index) {
  %vc = ml_program.global_load @vcache : tensor<16x2x4xf32>
  %w = tensor.insert_slice %v into %vc[%pos, 0, 0] [1, 2, 4] [1, 1, 1] : tensor<1x2x4xf32> into tensor<16x2x4xf32>
  // expected-remark@below {{not adopted: the cache-like state is module state the function writes (ml_program.global @vcache)}}
  ml_program.global_store @vcache = %w : tensor<16x2x4xf32>
  return
}

// -----

// TOSA that upstream's conversions cannot bring to linalg: the remark
// carries their error, at the op.
// CHECK-LABEL: func.func @tosa_unconverted(
// CHECK: tosa.custom
func.func @tosa_unconverted(%k: tensor<2x1x4xf32>, %kc: tensor<2x16x4xf32>, %idx: tensor<2x1xi32>) -> tensor<2x16x4xf32> {
  // expected-remark@below {{not adopted: its TOSA does not convert to linalg (upstream tosa-to-linalg: failed to legalize operation 'tosa.custom')}}
  %c = tosa.custom %k {domain_name = "x", implementation_attrs = "", operator_name = "y"} : (tensor<2x1x4xf32>) -> tensor<2x1x4xf32>
  %w = tosa.scatter %kc, %idx, %c : (tensor<2x16x4xf32>, tensor<2x1xi32>, tensor<2x1x4xf32>) -> tensor<2x16x4xf32>
  return %w : tensor<2x16x4xf32>
}

// -----

// Mistral's rotating cache (a sliding window of 8 positions): written at
// pos mod 8 and read whole under the caller's validity mask. Adopting it
// would attend a cache that never drops a position, so it is refused,
// naming the wrap-around.
// CHECK-LABEL: func.func @sliding_window(
// CHECK: arith.remui
func.func @sliding_window(%q: tensor<1x2x4xf32>, %k: tensor<1x2x4xf32>, %v: tensor<1x2x4xf32>, %kc: tensor<8x2x4xf32>, %vc: tensor<8x2x4xf32>, %pos: index, %mask: tensor<2x1x8xf32>) -> (tensor<1x2x4xf32>, tensor<8x2x4xf32>, tensor<8x2x4xf32>) {
  %c8 = arith.constant 8 : index
  %slot = arith.remui %pos, %c8 : index
  // expected-remark@below {{not adopted: the cache is written at a position taken modulo a capacity (a ring buffer, as a sliding window keeps it), so old positions are overwritten}}
  %kc1 = tensor.insert_slice %k into %kc[%slot, 0, 0] [1, 2, 4] [1, 1, 1] : tensor<1x2x4xf32> into tensor<8x2x4xf32>
  %vc1 = tensor.insert_slice %v into %vc[%slot, 0, 0] [1, 2, 4] [1, 1, 1] : tensor<1x2x4xf32> into tensor<8x2x4xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x1x8xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<2x1x8xf32>) -> tensor<2x1x8xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(h, n, t, d) -> (n, h, d)>, affine_map<(h, n, t, d) -> (t, h, d)>, affine_map<(h, n, t, d) -> (h, n, t)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %kc1 : tensor<1x2x4xf32>, tensor<8x2x4xf32>) outs(%f : tensor<2x1x8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %o, %m : f32
    linalg.yield %r : f32
  } -> tensor<2x1x8xf32>
  %half = arith.constant 0.5 : f32
  %e2 = tensor.empty() : tensor<2x1x8xf32>
  %sc = linalg.generic {indexing_maps = [affine_map<(h, n, t) -> (h, n, t)>, affine_map<(h, n, t) -> (h, n, t)>, affine_map<(h, n, t) -> (h, n, t)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s, %mask : tensor<2x1x8xf32>, tensor<2x1x8xf32>) outs(%e2 : tensor<2x1x8xf32>) {
  ^bb0(%a: f32, %mm: f32, %o: f32):
    %x = arith.mulf %a, %half : f32
    %y = arith.addf %x, %mm : f32
    linalg.yield %y : f32
  } -> tensor<2x1x8xf32>
  %e3 = tensor.empty() : tensor<2x1x8xf32>
  %p = linalg.softmax dimension(2) ins(%sc : tensor<2x1x8xf32>) outs(%e3 : tensor<2x1x8xf32>) -> tensor<2x1x8xf32>
  %e4 = tensor.empty() : tensor<1x2x4xf32>
  %f4 = linalg.fill ins(%zero : f32) outs(%e4 : tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  %o = linalg.generic {indexing_maps = [affine_map<(h, n, d, t) -> (h, n, t)>, affine_map<(h, n, d, t) -> (t, h, d)>, affine_map<(h, n, d, t) -> (n, h, d)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%p, %vc1 : tensor<2x1x8xf32>, tensor<8x2x4xf32>) outs(%f4 : tensor<1x2x4xf32>) {
  ^bb0(%a: f32, %b: f32, %oo: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %oo, %m : f32
    linalg.yield %r : f32
  } -> tensor<1x2x4xf32>
  return %o, %kc1, %vc1 : tensor<1x2x4xf32>, tensor<8x2x4xf32>, tensor<8x2x4xf32>
}

// -----

// Attention written as explicit loops over heads, positions and channels,
// reading the cache with tensor.extract.
// CHECK-LABEL: func.func @loop_attention(
// CHECK: scf.for
func.func @loop_attention(%q: tensor<2x4xf32>, %k: tensor<1x2x4xf32>, %v: tensor<1x2x4xf32>, %kc: tensor<16x2x4xf32>, %vc: tensor<16x2x4xf32>, %pos: index) -> (tensor<2x4xf32>, tensor<16x2x4xf32>, tensor<16x2x4xf32>) {
  %kc1 = tensor.insert_slice %k into %kc[%pos, 0, 0] [1, 2, 4] [1, 1, 1] : tensor<1x2x4xf32> into tensor<16x2x4xf32>
  %vc1 = tensor.insert_slice %v into %vc[%pos, 0, 0] [1, 2, 4] [1, 1, 1] : tensor<1x2x4xf32> into tensor<16x2x4xf32>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  %len = arith.addi %pos, %c1 : index
  %zero = arith.constant 0.0 : f32
  %half = arith.constant 0.5 : f32
  %init = tensor.empty() : tensor<2x4xf32>
  %out = scf.for %h = %c0 to %c2 step %c1 iter_args(%o = %init) -> (tensor<2x4xf32>) {
    // One pass: exp(score) weights without the max.
    %r:2 = scf.for %t = %c0 to %len step %c1 iter_args(%sum = %zero, %acc = %o) -> (f32, tensor<2x4xf32>) {
      %dot = scf.for %d = %c0 to %c4 step %c1 iter_args(%s = %zero) -> (f32) {
        %a = tensor.extract %q[%h, %d] : tensor<2x4xf32>
        // expected-remark@below {{not adopted: the cache is read element by element inside a loop (attention written as explicit loops)}}
        %b = tensor.extract %kc1[%t, %h, %d] : tensor<16x2x4xf32>
        %m = arith.mulf %a, %b : f32
        %n = arith.addf %s, %m : f32
        scf.yield %n : f32
      }
      %sc = arith.mulf %dot, %half : f32
      %w = math.exp %sc : f32
      %sum1 = arith.addf %sum, %w : f32
      %acc1 = scf.for %d = %c0 to %c4 step %c1 iter_args(%x = %acc) -> (tensor<2x4xf32>) {
        %vv = tensor.extract %vc1[%t, %h, %d] : tensor<16x2x4xf32>
        %old = tensor.extract %x[%h, %d] : tensor<2x4xf32>
        %wv = arith.mulf %w, %vv : f32
        %isfirst = arith.cmpi eq, %t, %c0 : index
        %base = arith.select %isfirst, %zero, %old : f32
        %nv = arith.addf %base, %wv : f32
        %x1 = tensor.insert %nv into %x[%h, %d] : tensor<2x4xf32>
        scf.yield %x1 : tensor<2x4xf32>
      }
      scf.yield %sum1, %acc1 : f32, tensor<2x4xf32>
    }
    %o2 = scf.for %d = %c0 to %c4 step %c1 iter_args(%x = %r#1) -> (tensor<2x4xf32>) {
      %e = tensor.extract %x[%h, %d] : tensor<2x4xf32>
      %nv = arith.divf %e, %r#0 : f32
      %x1 = tensor.insert %nv into %x[%h, %d] : tensor<2x4xf32>
      scf.yield %x1 : tensor<2x4xf32>
    }
    scf.yield %o2 : tensor<2x4xf32>
  }
  return %out, %kc1, %vc1 : tensor<2x4xf32>, tensor<16x2x4xf32>, tensor<16x2x4xf32>
}

// -----

// A [batch, heads, seq, head_dim] cache collapsed to [heads, seq, head_dim]
// and written, but returned collapsed: the caller's state would change
// shape (when it is reshaped back, kvq-quantize-kv-cache-tosa.mlir adopts
// it).
// CHECK-LABEL: func.func @reshaped_not_back(
// CHECK: tensor.collapse_shape
func.func @reshaped_not_back(%k: tensor<2x1x4xf32>, %kc: tensor<1x2x16x4xf32>, %pos: index) -> tensor<2x16x4xf32> {
  // expected-remark@below {{not adopted: the cache is reshaped before it is written and not returned as that written value reshaped back}}
  %c = tensor.collapse_shape %kc [[0, 1], [2], [3]] : tensor<1x2x16x4xf32> into tensor<2x16x4xf32>
  %w = tensor.insert_slice %k into %c[0, %pos, 0] [2, 1, 4] [1, 1, 1] : tensor<2x1x4xf32> into tensor<2x16x4xf32>
  return %w : tensor<2x16x4xf32>
}

// -----

// torch-mlir's index_put indices (as in -tosa.mlir's @torch_index_put) with
// a head stride of 15 in a cache of 16 positions: the indices evaluate to
// head * 15 + position, which is not each head's slot, so the scatter stays.
// CHECK-LABEL: func.func @tosa_index_put_wrong_stride(
// CHECK: tosa.scatter
func.func @tosa_index_put_wrong_stride(%k: tensor<1x2x4xf32>, %kc: tensor<1x32x4xf32>, %pos: tensor<1xi64>) -> tensor<1x32x4xf32> {
  %s111 = tosa.const_shape {values = dense<[1, 1, 1]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %m121 = tosa.const_shape {values = dense<[1, 2, 1]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %p64 = tosa.reshape %pos, %s111 : (tensor<1xi64>, !tosa.shape<3>) -> tensor<1x1x1xi64>
  %pt = tosa.tile %p64, %m121 : (tensor<1x1x1xi64>, !tosa.shape<3>) -> tensor<1x2x1xi64>
  %i0 = "tosa.const"() {values = dense<0> : tensor<1x2x1xi64>} : () -> tensor<1x2x1xi64>
  %i1 = "tosa.const"() {values = dense<[[[0], [1]]]> : tensor<1x2x1xi64>} : () -> tensor<1x2x1xi64>
  %c0 = tosa.cast %i0 : (tensor<1x2x1xi64>) -> tensor<1x2x1xi32>
  %c1 = tosa.cast %i1 : (tensor<1x2x1xi64>) -> tensor<1x2x1xi32>
  %c2 = tosa.cast %pt : (tensor<1x2x1xi64>) -> tensor<1x2x1xi32>
  %s1211 = tosa.const_shape {values = dense<[1, 2, 1, 1]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %r0 = tosa.reshape %c0, %s1211 : (tensor<1x2x1xi32>, !tosa.shape<4>) -> tensor<1x2x1x1xi32>
  %r1 = tosa.reshape %c1, %s1211 : (tensor<1x2x1xi32>, !tosa.shape<4>) -> tensor<1x2x1x1xi32>
  %r2 = tosa.reshape %c2, %s1211 : (tensor<1x2x1xi32>, !tosa.shape<4>) -> tensor<1x2x1x1xi32>
  %ind = tosa.concat %r0, %r1, %r2 {axis = 3 : i32} : (tensor<1x2x1x1xi32>, tensor<1x2x1x1xi32>, tensor<1x2x1x1xi32>) -> tensor<1x2x1x3xi32>
  %s23 = tosa.const_shape {values = dense<[2, 3]> : tensor<2xindex>} : () -> !tosa.shape<2>
  %s12 = tosa.const_shape {values = dense<[1, 2]> : tensor<2xindex>} : () -> !tosa.shape<2>
  %s13 = tosa.const_shape {values = dense<[1, 3]> : tensor<2xindex>} : () -> !tosa.shape<2>
  %im = tosa.reshape %ind, %s23 : (tensor<1x2x1x3xi32>, !tosa.shape<2>) -> tensor<2x3xi32>
  %coef = "tosa.const"() {values = dense<[[30, 15, 1]]> : tensor<1x3xi32>} : () -> tensor<1x3xi32>
  %sh = "tosa.const"() {values = dense<0> : tensor<1xi8>} : () -> tensor<1xi8>
  %mm = tosa.mul %im, %coef, %sh : (tensor<2x3xi32>, tensor<1x3xi32>, tensor<1xi8>) -> tensor<2x3xi32>
  %rs = tosa.reduce_sum %mm {axis = 1 : i32} : (tensor<2x3xi32>) -> tensor<2x1xi32>
  %idx = tosa.reshape %rs, %s12 : (tensor<2x1xi32>, !tosa.shape<2>) -> tensor<1x2xi32>
  // expected-remark@below {{writes several slots per row, at indices not shown to be head * capacity + position}}
  %w = tosa.scatter %kc, %idx, %k : (tensor<1x32x4xf32>, tensor<1x2xi32>, tensor<1x2x4xf32>) -> tensor<1x32x4xf32>
  return %w : tensor<1x32x4xf32>
}
