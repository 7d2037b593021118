// RUN: kvq-opt %s --split-input-file --kvq-quantize-kv-cache 2>&1 \
// RUN:   | FileCheck %s --implicit-check-not=remark \
// RUN:       --implicit-check-not=tensor.insert_slice \
// RUN:       --implicit-check-not=tensor.extract_slice \
// RUN:       --implicit-check-not=linalg.softmax --implicit-check-not=math.exp
// RUN: kvq-opt %s --split-input-file --kvq-quantize-kv-cache="method=kvquant bits=4" \
// RUN:   | FileCheck %s --check-prefix=KVQUANT
// RUN: kvq-opt %s --split-input-file --kvq-quantize-kv-cache="group-size=2" \
// RUN:   | FileCheck %s --check-prefix=G2
// RUN: not kvq-opt %s --split-input-file --kvq-quantize-kv-cache="group-size=3" 2>&1 \
// RUN:   | FileCheck %s --check-prefix=G3

// kvq-quantize-kv-cache on small hand-written graphs (context 16, 2 KV
// heads, head_dim 4; 4 query heads when grouped), one per form the pass
// recognises, in the op forms kvq-import emits: the cache written by
// tensor.insert_slice at %pos and read back as positions 0 .. pos + n - 1,
// scores = q·k over head_dim, scaled by 1/sqrt(4) = 0.5, a causal mask when
// n > 1, softmax (linalg.softmax or max/exp/sum/div), weighted sum of the
// values. Each function must become: one !kvq.cache argument in place of the
// cache tensors, no cache results, per layer a position check, a
// kvq.cache_update of that layer's K/V and a kvq.cache_attend of its queries
// (transposed/collapsed to [n, heads, head_dim] and back). No slice of a
// cache, no softmax and no exp may remain (implicit-check-not), and nothing
// may be refused (no remark).

// Stacked [layers, context, kv_heads, head_dim] f32, MHA, a 2-token prefill
// with the causal mask, linalg.softmax, two layers. Also checks the config
// (kivi defaults; group size shrunk from 32 to head_dim 4) and the host helpers.

// CHECK: !cache = !kvq.cache<layers = 2, kv_heads = 2, head_dim = 4, element_type = f32, config = <method = kivi, key_bits = 2, value_bits = 2, group_size = 4>>
// KVQUANT: !cache = !kvq.cache<layers = 2, kv_heads = 2, head_dim = 4, element_type = f32, config = <method = kvquant, key_bits = 4, value_bits = 4, group_size = 4>>
// G2: !cache = !kvq.cache<layers = 2, kv_heads = 2, head_dim = 4, element_type = f32, config = <method = kivi, key_bits = 2, value_bits = 2, group_size = 2>>
// G3: error: kvq-quantize-kv-cache: group_size 3 does not divide head_dim 4
// CHECK-LABEL: func.func @stacked_f32_mha_prefill_softmax(
// CHECK-SAME: %[[Q:arg[0-9]+]]: tensor<2x2x4xf32>, %[[K0:arg[0-9]+]]: tensor<2x2x4xf32>, %[[V0:arg[0-9]+]]: tensor<2x2x4xf32>, %[[K1:arg[0-9]+]]: tensor<2x2x4xf32>, %[[V1:arg[0-9]+]]: tensor<2x2x4xf32>, %[[C:arg[0-9]+]]: !cache, %[[POS:arg[0-9]+]]: index) -> tensor<2x2x4xf32> {
// CHECK: %[[N0:.*]], %{{.*}}, %{{.*}}, %{{.*}} = kvq.cache_stats %[[C]][0] : !cache
// CHECK: %[[P0:.*]] = arith.index_cast %[[POS]] : index to i64
// CHECK: %[[OK0:.*]] = arith.cmpi eq, %[[N0]], %[[P0]] : i64
// CHECK: cf.assert %[[OK0]], "kvq: cache layer 0 does not hold exactly pos tokens (write positions in order)"
// CHECK: kvq.cache_update %[[C]][0], %[[K0]], %[[V0]] : !cache, tensor<2x2x4xf32>, tensor<2x2x4xf32>
// CHECK: %[[A0:.*]] = kvq.cache_attend %[[C]][0], %[[Q]] : !cache, tensor<2x2x4xf32> -> tensor<2x2x4xf32>
// CHECK: %[[X0:.*]] = arith.negf %[[A0]]
// CHECK: %[[N1:.*]], %{{.*}}, %{{.*}}, %{{.*}} = kvq.cache_stats %[[C]][1] : !cache
// CHECK: %[[P1:.*]] = arith.index_cast %[[POS]] : index to i64
// CHECK: %[[OK1:.*]] = arith.cmpi eq, %[[N1]], %[[P1]] : i64
// CHECK: cf.assert %[[OK1]], "kvq: cache layer 1 does not hold exactly pos tokens
// CHECK: kvq.cache_update %[[C]][1], %[[K1]], %[[V1]] : !cache, tensor<2x2x4xf32>, tensor<2x2x4xf32>
// CHECK: %[[A1:.*]] = kvq.cache_attend %[[C]][1], %[[X0]] : !cache, tensor<2x2x4xf32> -> tensor<2x2x4xf32>
// CHECK: return %[[A1]] : tensor<2x2x4xf32>
// CHECK-LABEL: func.func @kv_cache_create() -> !cache attributes {llvm.emit_c_interface}
// CHECK: %[[NEW:.*]] = kvq.cache_create : !cache
// CHECK: return %[[NEW]] : !cache
// CHECK-LABEL: func.func @kv_cache_destroy(%arg0: !cache) attributes {llvm.emit_c_interface}
// CHECK: kvq.cache_destroy %arg0 : !cache
// CHECK-LABEL: func.func @kv_cache_stats(%arg0: !cache) -> (i64, i64, i64, f64) attributes {llvm.emit_c_interface}
// CHECK: kvq.cache_stats %arg0 : !cache

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#sq3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d3)>
#sk3 = affine_map<(d0, d1, d2, d3) -> (d2, d0, d3)>
#ss3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#wp3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
#wv3 = affine_map<(d0, d1, d2, d3) -> (d3, d0, d2)>
#wo3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d2)>

func.func @stacked_f32_mha_prefill_softmax(%q: tensor<2x2x4xf32>, %k0: tensor<2x2x4xf32>, %v0: tensor<2x2x4xf32>, %k1: tensor<2x2x4xf32>, %v1: tensor<2x2x4xf32>, %kc: tensor<2x16x2x4xf32>, %vc: tensor<2x16x2x4xf32>, %pos: index)
    -> (tensor<2x2x4xf32>, tensor<2x16x2x4xf32>, tensor<2x16x2x4xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %c2 = arith.constant 2 : index
  %len = arith.addi %pos, %c2 : index
  // Layer 0
  %kw0 = tensor.insert_slice %k0 into %kc[0, %pos, 0, 0] [1, 2, 2, 4] [1, 1, 1, 1] : tensor<2x2x4xf32> into tensor<2x16x2x4xf32>
  %kr0 = tensor.extract_slice %kw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<2x16x2x4xf32> to tensor<?x2x4xf32>
  %vw0 = tensor.insert_slice %v0 into %vc[0, %pos, 0, 0] [1, 2, 2, 4] [1, 1, 1, 1] : tensor<2x2x4xf32> into tensor<2x16x2x4xf32>
  %vr0 = tensor.extract_slice %vw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<2x16x2x4xf32> to tensor<?x2x4xf32>
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
  %me0 = tensor.empty(%len) : tensor<2x2x?xf32>
  %mk0 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%sc0 : tensor<2x2x?xf32>) outs(%me0 : tensor<2x2x?xf32>) {
    ^bb0(%in: f32, %out: f32):
      %i = linalg.index 1 : index
      %j = linalg.index 2 : index
      %p = arith.addi %pos, %i : index
      %c = arith.cmpi ugt, %j, %p : index
      %s = arith.select %c, %ninf, %in : f32
      linalg.yield %s : f32
    } -> tensor<2x2x?xf32>
  %pe0 = tensor.empty(%len) : tensor<2x2x?xf32>
  %pr0 = linalg.softmax dimension(2) ins(%mk0 : tensor<2x2x?xf32>) outs(%pe0 : tensor<2x2x?xf32>) -> tensor<2x2x?xf32>
  %oe0 = tensor.empty() : tensor<2x2x4xf32>
  %oz0 = linalg.fill ins(%zero : f32) outs(%oe0 : tensor<2x2x4xf32>) -> tensor<2x2x4xf32>
  %o0 = linalg.generic {indexing_maps = [#wp3, #wv3, #wo3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%pr0, %vr0 : tensor<2x2x?xf32>, tensor<?x2x4xf32>) outs(%oz0 : tensor<2x2x4xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<2x2x4xf32>
  // The next layer's queries (a stand-in for the projections).
  %x0 = arith.negf %o0 : tensor<2x2x4xf32>
  // Layer 1
  %kw1 = tensor.insert_slice %k1 into %kw0[1, %pos, 0, 0] [1, 2, 2, 4] [1, 1, 1, 1] : tensor<2x2x4xf32> into tensor<2x16x2x4xf32>
  %kr1 = tensor.extract_slice %kw1[1, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<2x16x2x4xf32> to tensor<?x2x4xf32>
  %vw1 = tensor.insert_slice %v1 into %vw0[1, %pos, 0, 0] [1, 2, 2, 4] [1, 1, 1, 1] : tensor<2x2x4xf32> into tensor<2x16x2x4xf32>
  %vr1 = tensor.extract_slice %vw1[1, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<2x16x2x4xf32> to tensor<?x2x4xf32>
  %se1 = tensor.empty(%len) : tensor<2x2x?xf32>
  %sz1 = linalg.fill ins(%zero : f32) outs(%se1 : tensor<2x2x?xf32>) -> tensor<2x2x?xf32>
  %s1 = linalg.generic {indexing_maps = [#sq3, #sk3, #ss3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%x0, %kr1 : tensor<2x2x4xf32>, tensor<?x2x4xf32>) outs(%sz1 : tensor<2x2x?xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<2x2x?xf32>
  %scale1 = arith.constant 0.5 : f32
  %sce1 = tensor.empty(%len) : tensor<2x2x?xf32>
  %sc1 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s1 : tensor<2x2x?xf32>) outs(%sce1 : tensor<2x2x?xf32>) {
    ^bb0(%in: f32, %out: f32):
      %m = arith.mulf %in, %scale1 : f32
      linalg.yield %m : f32
    } -> tensor<2x2x?xf32>
  %me1 = tensor.empty(%len) : tensor<2x2x?xf32>
  %mk1 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%sc1 : tensor<2x2x?xf32>) outs(%me1 : tensor<2x2x?xf32>) {
    ^bb0(%in: f32, %out: f32):
      %i = linalg.index 1 : index
      %j = linalg.index 2 : index
      %p = arith.addi %pos, %i : index
      %c = arith.cmpi ugt, %j, %p : index
      %s = arith.select %c, %ninf, %in : f32
      linalg.yield %s : f32
    } -> tensor<2x2x?xf32>
  %pe1 = tensor.empty(%len) : tensor<2x2x?xf32>
  %pr1 = linalg.softmax dimension(2) ins(%mk1 : tensor<2x2x?xf32>) outs(%pe1 : tensor<2x2x?xf32>) -> tensor<2x2x?xf32>
  %oe1 = tensor.empty() : tensor<2x2x4xf32>
  %oz1 = linalg.fill ins(%zero : f32) outs(%oe1 : tensor<2x2x4xf32>) -> tensor<2x2x4xf32>
  %o1 = linalg.generic {indexing_maps = [#wp3, #wv3, #wo3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%pr1, %vr1 : tensor<2x2x?xf32>, tensor<?x2x4xf32>) outs(%oz1 : tensor<2x2x4xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<2x2x4xf32>
  return %o1, %kw1, %vw1 : tensor<2x2x4xf32>, tensor<2x16x2x4xf32>, tensor<2x16x2x4xf32>
}

// -----

// Per-layer [context, kv_heads, head_dim] f32 caches (K0, V0, K1, V1, as
// kvq-import orders them), MHA, a 1-token decode without mask, the expanded
// softmax. Layer numbers come from the order of the cache arguments.

// CHECK: !cache = !kvq.cache<layers = 2, kv_heads = 2, head_dim = 4, element_type = f32, config = <method = kivi, key_bits = 2, value_bits = 2, group_size = 4>>
// KVQUANT: !cache = !kvq.cache<layers = 2, kv_heads = 2, head_dim = 4, element_type = f32, config = <method = kvquant, key_bits = 4, value_bits = 4, group_size = 4>>
// CHECK-LABEL: func.func @per_layer_f32_mha_decode_expanded(
// CHECK-SAME: %[[Q:arg[0-9]+]]: tensor<1x2x4xf32>, %[[K0:arg[0-9]+]]: tensor<1x2x4xf32>, %[[V0:arg[0-9]+]]: tensor<1x2x4xf32>, %[[K1:arg[0-9]+]]: tensor<1x2x4xf32>, %[[V1:arg[0-9]+]]: tensor<1x2x4xf32>, %[[C:arg[0-9]+]]: !cache, %[[POS:arg[0-9]+]]: index) -> tensor<1x2x4xf32> {
// CHECK: kvq.cache_stats %[[C]][0]
// CHECK: cf.assert %{{.*}}, "kvq: cache layer 0 does not hold exactly pos tokens
// CHECK: kvq.cache_update %[[C]][0], %[[K0]], %[[V0]] : !cache, tensor<1x2x4xf32>, tensor<1x2x4xf32>
// CHECK: %[[A0:.*]] = kvq.cache_attend %[[C]][0], %[[Q]] : !cache, tensor<1x2x4xf32> -> tensor<1x2x4xf32>
// CHECK: %[[X0:.*]] = arith.negf %[[A0]]
// CHECK: kvq.cache_stats %[[C]][1]
// CHECK: cf.assert %{{.*}}, "kvq: cache layer 1 does not hold exactly pos tokens
// CHECK: kvq.cache_update %[[C]][1], %[[K1]], %[[V1]] : !cache, tensor<1x2x4xf32>, tensor<1x2x4xf32>
// CHECK: %[[A1:.*]] = kvq.cache_attend %[[C]][1], %[[X0]] : !cache, tensor<1x2x4xf32> -> tensor<1x2x4xf32>
// CHECK: return %[[A1]] : tensor<1x2x4xf32>
// CHECK-LABEL: func.func @kv_cache_create

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#red3 = affine_map<(d0, d1, d2) -> (d0, d1)>
#sq3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d3)>
#sk3 = affine_map<(d0, d1, d2, d3) -> (d2, d0, d3)>
#ss3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#wp3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
#wv3 = affine_map<(d0, d1, d2, d3) -> (d3, d0, d2)>
#wo3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d2)>

func.func @per_layer_f32_mha_decode_expanded(%q: tensor<1x2x4xf32>, %k0: tensor<1x2x4xf32>, %v0: tensor<1x2x4xf32>, %k1: tensor<1x2x4xf32>, %v1: tensor<1x2x4xf32>, %kc0: tensor<16x2x4xf32>, %vc0: tensor<16x2x4xf32>, %kc1: tensor<16x2x4xf32>, %vc1: tensor<16x2x4xf32>, %pos: index)
    -> (tensor<1x2x4xf32>, tensor<16x2x4xf32>, tensor<16x2x4xf32>, tensor<16x2x4xf32>, tensor<16x2x4xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %c1 = arith.constant 1 : index
  %len = arith.addi %pos, %c1 : index
  // Layer 0
  %kw0 = tensor.insert_slice %k0 into %kc0[%pos, 0, 0] [1, 2, 4] [1, 1, 1] : tensor<1x2x4xf32> into tensor<16x2x4xf32>
  %kr0 = tensor.extract_slice %kw0[0, 0, 0] [%len, 2, 4] [1, 1, 1] : tensor<16x2x4xf32> to tensor<?x2x4xf32>
  %vw0 = tensor.insert_slice %v0 into %vc0[%pos, 0, 0] [1, 2, 4] [1, 1, 1] : tensor<1x2x4xf32> into tensor<16x2x4xf32>
  %vr0 = tensor.extract_slice %vw0[0, 0, 0] [%len, 2, 4] [1, 1, 1] : tensor<16x2x4xf32> to tensor<?x2x4xf32>
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
  // The next layer's queries (a stand-in for the projections).
  %x0 = arith.negf %o0 : tensor<1x2x4xf32>
  // Layer 1
  %kw1 = tensor.insert_slice %k1 into %kc1[%pos, 0, 0] [1, 2, 4] [1, 1, 1] : tensor<1x2x4xf32> into tensor<16x2x4xf32>
  %kr1 = tensor.extract_slice %kw1[0, 0, 0] [%len, 2, 4] [1, 1, 1] : tensor<16x2x4xf32> to tensor<?x2x4xf32>
  %vw1 = tensor.insert_slice %v1 into %vc1[%pos, 0, 0] [1, 2, 4] [1, 1, 1] : tensor<1x2x4xf32> into tensor<16x2x4xf32>
  %vr1 = tensor.extract_slice %vw1[0, 0, 0] [%len, 2, 4] [1, 1, 1] : tensor<16x2x4xf32> to tensor<?x2x4xf32>
  %se1 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sz1 = linalg.fill ins(%zero : f32) outs(%se1 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %s1 = linalg.generic {indexing_maps = [#sq3, #sk3, #ss3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%x0, %kr1 : tensor<1x2x4xf32>, tensor<?x2x4xf32>) outs(%sz1 : tensor<2x1x?xf32>) {
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
  %mxe1 = tensor.empty() : tensor<2x1xf32>
  %mxi1 = linalg.fill ins(%ninf : f32) outs(%mxe1 : tensor<2x1xf32>) -> tensor<2x1xf32>
  %mx1 = linalg.generic {indexing_maps = [#id3, #red3], iterator_types = ["parallel", "parallel", "reduction"]} ins(%sc1 : tensor<2x1x?xf32>) outs(%mxi1 : tensor<2x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %m = arith.maximumf %in, %out : f32
      linalg.yield %m : f32
    } -> tensor<2x1xf32>
  %exe1 = tensor.empty(%len) : tensor<2x1x?xf32>
  %ex1 = linalg.generic {indexing_maps = [#id3, #red3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%sc1, %mx1 : tensor<2x1x?xf32>, tensor<2x1xf32>) outs(%exe1 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %d = arith.subf %in, %in_1 : f32
      %e = math.exp %d : f32
      linalg.yield %e : f32
    } -> tensor<2x1x?xf32>
  %sme1 = tensor.empty() : tensor<2x1xf32>
  %smi1 = linalg.fill ins(%zero : f32) outs(%sme1 : tensor<2x1xf32>) -> tensor<2x1xf32>
  %sm1 = linalg.generic {indexing_maps = [#id3, #red3], iterator_types = ["parallel", "parallel", "reduction"]} ins(%ex1 : tensor<2x1x?xf32>) outs(%smi1 : tensor<2x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %a = arith.addf %in, %out : f32
      linalg.yield %a : f32
    } -> tensor<2x1xf32>
  %pe1 = tensor.empty(%len) : tensor<2x1x?xf32>
  %pr1 = linalg.generic {indexing_maps = [#id3, #red3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%ex1, %sm1 : tensor<2x1x?xf32>, tensor<2x1xf32>) outs(%pe1 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %d = arith.divf %in, %in_1 : f32
      linalg.yield %d : f32
    } -> tensor<2x1x?xf32>
  %oe1 = tensor.empty() : tensor<1x2x4xf32>
  %oz1 = linalg.fill ins(%zero : f32) outs(%oe1 : tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  %o1 = linalg.generic {indexing_maps = [#wp3, #wv3, #wo3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%pr1, %vr1 : tensor<2x1x?xf32>, tensor<?x2x4xf32>) outs(%oz1 : tensor<1x2x4xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<1x2x4xf32>
  return %o1, %kw0, %vw0, %kw1, %vw1 : tensor<1x2x4xf32>, tensor<16x2x4xf32>, tensor<16x2x4xf32>, tensor<16x2x4xf32>, tensor<16x2x4xf32>
}

// -----

// Stacked f16 (truncf before the write, extf after the read), GQA by reshape
// (queries expand_shape'd to [n, kv_heads, group, head_dim], scores
// [kv_heads, group, n, t]), 2-token prefill, two layers. kvq.cache_update
// takes the f16 K/V; the queries go in collapsed to [n, 4, 4].

// CHECK: !cache = !kvq.cache<layers = 2, kv_heads = 2, head_dim = 4, element_type = f16, config = <method = kivi, key_bits = 2, value_bits = 2, group_size = 4>>
// CHECK-LABEL: func.func @stacked_f16_gqa_reshape_prefill(
// CHECK-SAME: %[[Q:arg[0-9]+]]: tensor<2x4x4xf32>, %[[K0:arg[0-9]+]]: tensor<2x2x4xf32>, %[[V0:arg[0-9]+]]: tensor<2x2x4xf32>, %[[K1:arg[0-9]+]]: tensor<2x2x4xf32>, %[[V1:arg[0-9]+]]: tensor<2x2x4xf32>, %[[C:arg[0-9]+]]: !cache, %[[POS:arg[0-9]+]]: index) -> tensor<2x4x4xf32> {
// CHECK: %[[KH0:.*]] = linalg.generic {{.*}} ins(%[[K0]] : tensor<2x2x4xf32>) outs(%{{.*}} : tensor<2x2x4xf16>)
// CHECK: arith.truncf
// CHECK: %[[VH0:.*]] = linalg.generic {{.*}} ins(%[[V0]] : tensor<2x2x4xf32>) outs(%{{.*}} : tensor<2x2x4xf16>)
// CHECK: %[[QG0:.*]] = tensor.expand_shape %[[Q]] {{\[\[}}0], [1, 2], [3]] output_shape [2, 2, 2, 4]
// CHECK: cf.assert %{{.*}}, "kvq: cache layer 0 does not hold exactly pos tokens
// CHECK: kvq.cache_update %[[C]][0], %[[KH0]], %[[VH0]] : !cache, tensor<2x2x4xf16>, tensor<2x2x4xf16>
// CHECK: %[[QC0:.*]] = tensor.collapse_shape %[[QG0]] {{\[\[}}0], [1, 2], [3]] : tensor<2x2x2x4xf32> into tensor<2x4x4xf32>
// CHECK: %[[A0:.*]] = kvq.cache_attend %[[C]][0], %[[QC0]] : !cache, tensor<2x4x4xf32> -> tensor<2x4x4xf32>
// CHECK: %[[AG0:.*]] = tensor.expand_shape %[[A0]] {{\[\[}}0], [1, 2], [3]] output_shape [2, 2, 2, 4] : tensor<2x4x4xf32> into tensor<2x2x2x4xf32>
// CHECK: %[[O0:.*]] = tensor.collapse_shape %[[AG0]]
// CHECK: arith.negf %[[O0]]
// CHECK: %[[KH1:.*]] = linalg.generic {{.*}} ins(%[[K1]] : tensor<2x2x4xf32>) outs(%{{.*}} : tensor<2x2x4xf16>)
// CHECK: %[[VH1:.*]] = linalg.generic {{.*}} ins(%[[V1]] : tensor<2x2x4xf32>) outs(%{{.*}} : tensor<2x2x4xf16>)
// CHECK: cf.assert %{{.*}}, "kvq: cache layer 1 does not hold exactly pos tokens
// CHECK: kvq.cache_update %[[C]][1], %[[KH1]], %[[VH1]] : !cache, tensor<2x2x4xf16>, tensor<2x2x4xf16>
// CHECK: kvq.cache_attend %[[C]][1], %{{.*}} : !cache, tensor<2x4x4xf32> -> tensor<2x4x4xf32>
// CHECK-NOT: arith.extf
// CHECK: return %{{.*}} : tensor<2x4x4xf32>

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#id4 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#sq4 = affine_map<(d0, d1, d2, d3, d4) -> (d2, d0, d1, d4)>
#sk4 = affine_map<(d0, d1, d2, d3, d4) -> (d3, d0, d4)>
#ss4 = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>
#wp4 = affine_map<(d0, d1, d2, d3, d4) -> (d1, d2, d0, d4)>
#wv4 = affine_map<(d0, d1, d2, d3, d4) -> (d4, d1, d3)>
#wo4 = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>

func.func @stacked_f16_gqa_reshape_prefill(%q: tensor<2x4x4xf32>, %k0: tensor<2x2x4xf32>, %v0: tensor<2x2x4xf32>, %k1: tensor<2x2x4xf32>, %v1: tensor<2x2x4xf32>, %kc: tensor<2x16x2x4xf16>, %vc: tensor<2x16x2x4xf16>, %pos: index)
    -> (tensor<2x4x4xf32>, tensor<2x16x2x4xf16>, tensor<2x16x2x4xf16>) {
  %zero = arith.constant 0.000000e+00 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %c2 = arith.constant 2 : index
  %len = arith.addi %pos, %c2 : index
  // Layer 0
  %kh0 = tensor.empty() : tensor<2x2x4xf16>
  %kt0 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%k0 : tensor<2x2x4xf32>) outs(%kh0 : tensor<2x2x4xf16>) {
    ^bb0(%in: f32, %out: f16):
      %t = arith.truncf %in : f32 to f16
      linalg.yield %t : f16
    } -> tensor<2x2x4xf16>
  %vh0 = tensor.empty() : tensor<2x2x4xf16>
  %vt0 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%v0 : tensor<2x2x4xf32>) outs(%vh0 : tensor<2x2x4xf16>) {
    ^bb0(%in: f32, %out: f16):
      %t = arith.truncf %in : f32 to f16
      linalg.yield %t : f16
    } -> tensor<2x2x4xf16>
  %kw0 = tensor.insert_slice %kt0 into %kc[0, %pos, 0, 0] [1, 2, 2, 4] [1, 1, 1, 1] : tensor<2x2x4xf16> into tensor<2x16x2x4xf16>
  %kr0 = tensor.extract_slice %kw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<2x16x2x4xf16> to tensor<?x2x4xf16>
  %vw0 = tensor.insert_slice %vt0 into %vc[0, %pos, 0, 0] [1, 2, 2, 4] [1, 1, 1, 1] : tensor<2x2x4xf16> into tensor<2x16x2x4xf16>
  %vr0 = tensor.extract_slice %vw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<2x16x2x4xf16> to tensor<?x2x4xf16>
  %ke0 = tensor.empty(%len) : tensor<?x2x4xf32>
  %kf0 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%kr0 : tensor<?x2x4xf16>) outs(%ke0 : tensor<?x2x4xf32>) {
    ^bb0(%in: f16, %out: f32):
      %e = arith.extf %in : f16 to f32
      linalg.yield %e : f32
    } -> tensor<?x2x4xf32>
  %ve0 = tensor.empty(%len) : tensor<?x2x4xf32>
  %vf0 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%vr0 : tensor<?x2x4xf16>) outs(%ve0 : tensor<?x2x4xf32>) {
    ^bb0(%in: f16, %out: f32):
      %e = arith.extf %in : f16 to f32
      linalg.yield %e : f32
    } -> tensor<?x2x4xf32>
  %qg0 = tensor.expand_shape %q [[0], [1, 2], [3]] output_shape [2, 2, 2, 4] : tensor<2x4x4xf32> into tensor<2x2x2x4xf32>
  %se0 = tensor.empty(%len) : tensor<2x2x2x?xf32>
  %sz0 = linalg.fill ins(%zero : f32) outs(%se0 : tensor<2x2x2x?xf32>) -> tensor<2x2x2x?xf32>
  %s0 = linalg.generic {indexing_maps = [#sq4, #sk4, #ss4], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%qg0, %kf0 : tensor<2x2x2x4xf32>, tensor<?x2x4xf32>) outs(%sz0 : tensor<2x2x2x?xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<2x2x2x?xf32>
  %scale0 = arith.constant 0.5 : f32
  %sce0 = tensor.empty(%len) : tensor<2x2x2x?xf32>
  %sc0 = linalg.generic {indexing_maps = [#id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s0 : tensor<2x2x2x?xf32>) outs(%sce0 : tensor<2x2x2x?xf32>) {
    ^bb0(%in: f32, %out: f32):
      %m = arith.mulf %in, %scale0 : f32
      linalg.yield %m : f32
    } -> tensor<2x2x2x?xf32>
  %me0 = tensor.empty(%len) : tensor<2x2x2x?xf32>
  %mk0 = linalg.generic {indexing_maps = [#id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%sc0 : tensor<2x2x2x?xf32>) outs(%me0 : tensor<2x2x2x?xf32>) {
    ^bb0(%in: f32, %out: f32):
      %i = linalg.index 2 : index
      %j = linalg.index 3 : index
      %p = arith.addi %pos, %i : index
      %c = arith.cmpi ugt, %j, %p : index
      %s = arith.select %c, %ninf, %in : f32
      linalg.yield %s : f32
    } -> tensor<2x2x2x?xf32>
  %pe0 = tensor.empty(%len) : tensor<2x2x2x?xf32>
  %pr0 = linalg.softmax dimension(3) ins(%mk0 : tensor<2x2x2x?xf32>) outs(%pe0 : tensor<2x2x2x?xf32>) -> tensor<2x2x2x?xf32>
  %oe0 = tensor.empty() : tensor<2x2x2x4xf32>
  %oz0 = linalg.fill ins(%zero : f32) outs(%oe0 : tensor<2x2x2x4xf32>) -> tensor<2x2x2x4xf32>
  %o0 = linalg.generic {indexing_maps = [#wp4, #wv4, #wo4], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%pr0, %vf0 : tensor<2x2x2x?xf32>, tensor<?x2x4xf32>) outs(%oz0 : tensor<2x2x2x4xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<2x2x2x4xf32>
  %oc0 = tensor.collapse_shape %o0 [[0], [1, 2], [3]] : tensor<2x2x2x4xf32> into tensor<2x4x4xf32>
  // The next layer's queries (a stand-in for the projections).
  %x0 = arith.negf %oc0 : tensor<2x4x4xf32>
  // Layer 1
  %kh1 = tensor.empty() : tensor<2x2x4xf16>
  %kt1 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%k1 : tensor<2x2x4xf32>) outs(%kh1 : tensor<2x2x4xf16>) {
    ^bb0(%in: f32, %out: f16):
      %t = arith.truncf %in : f32 to f16
      linalg.yield %t : f16
    } -> tensor<2x2x4xf16>
  %vh1 = tensor.empty() : tensor<2x2x4xf16>
  %vt1 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%v1 : tensor<2x2x4xf32>) outs(%vh1 : tensor<2x2x4xf16>) {
    ^bb0(%in: f32, %out: f16):
      %t = arith.truncf %in : f32 to f16
      linalg.yield %t : f16
    } -> tensor<2x2x4xf16>
  %kw1 = tensor.insert_slice %kt1 into %kw0[1, %pos, 0, 0] [1, 2, 2, 4] [1, 1, 1, 1] : tensor<2x2x4xf16> into tensor<2x16x2x4xf16>
  %kr1 = tensor.extract_slice %kw1[1, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<2x16x2x4xf16> to tensor<?x2x4xf16>
  %vw1 = tensor.insert_slice %vt1 into %vw0[1, %pos, 0, 0] [1, 2, 2, 4] [1, 1, 1, 1] : tensor<2x2x4xf16> into tensor<2x16x2x4xf16>
  %vr1 = tensor.extract_slice %vw1[1, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<2x16x2x4xf16> to tensor<?x2x4xf16>
  %ke1 = tensor.empty(%len) : tensor<?x2x4xf32>
  %kf1 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%kr1 : tensor<?x2x4xf16>) outs(%ke1 : tensor<?x2x4xf32>) {
    ^bb0(%in: f16, %out: f32):
      %e = arith.extf %in : f16 to f32
      linalg.yield %e : f32
    } -> tensor<?x2x4xf32>
  %ve1 = tensor.empty(%len) : tensor<?x2x4xf32>
  %vf1 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%vr1 : tensor<?x2x4xf16>) outs(%ve1 : tensor<?x2x4xf32>) {
    ^bb0(%in: f16, %out: f32):
      %e = arith.extf %in : f16 to f32
      linalg.yield %e : f32
    } -> tensor<?x2x4xf32>
  %qg1 = tensor.expand_shape %x0 [[0], [1, 2], [3]] output_shape [2, 2, 2, 4] : tensor<2x4x4xf32> into tensor<2x2x2x4xf32>
  %se1 = tensor.empty(%len) : tensor<2x2x2x?xf32>
  %sz1 = linalg.fill ins(%zero : f32) outs(%se1 : tensor<2x2x2x?xf32>) -> tensor<2x2x2x?xf32>
  %s1 = linalg.generic {indexing_maps = [#sq4, #sk4, #ss4], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%qg1, %kf1 : tensor<2x2x2x4xf32>, tensor<?x2x4xf32>) outs(%sz1 : tensor<2x2x2x?xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<2x2x2x?xf32>
  %scale1 = arith.constant 0.5 : f32
  %sce1 = tensor.empty(%len) : tensor<2x2x2x?xf32>
  %sc1 = linalg.generic {indexing_maps = [#id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s1 : tensor<2x2x2x?xf32>) outs(%sce1 : tensor<2x2x2x?xf32>) {
    ^bb0(%in: f32, %out: f32):
      %m = arith.mulf %in, %scale1 : f32
      linalg.yield %m : f32
    } -> tensor<2x2x2x?xf32>
  %me1 = tensor.empty(%len) : tensor<2x2x2x?xf32>
  %mk1 = linalg.generic {indexing_maps = [#id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%sc1 : tensor<2x2x2x?xf32>) outs(%me1 : tensor<2x2x2x?xf32>) {
    ^bb0(%in: f32, %out: f32):
      %i = linalg.index 2 : index
      %j = linalg.index 3 : index
      %p = arith.addi %pos, %i : index
      %c = arith.cmpi ugt, %j, %p : index
      %s = arith.select %c, %ninf, %in : f32
      linalg.yield %s : f32
    } -> tensor<2x2x2x?xf32>
  %pe1 = tensor.empty(%len) : tensor<2x2x2x?xf32>
  %pr1 = linalg.softmax dimension(3) ins(%mk1 : tensor<2x2x2x?xf32>) outs(%pe1 : tensor<2x2x2x?xf32>) -> tensor<2x2x2x?xf32>
  %oe1 = tensor.empty() : tensor<2x2x2x4xf32>
  %oz1 = linalg.fill ins(%zero : f32) outs(%oe1 : tensor<2x2x2x4xf32>) -> tensor<2x2x2x4xf32>
  %o1 = linalg.generic {indexing_maps = [#wp4, #wv4, #wo4], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%pr1, %vf1 : tensor<2x2x2x?xf32>, tensor<?x2x4xf32>) outs(%oz1 : tensor<2x2x2x4xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<2x2x2x4xf32>
  %oc1 = tensor.collapse_shape %o1 [[0], [1, 2], [3]] : tensor<2x2x2x4xf32> into tensor<2x4x4xf32>
  return %oc1, %kw1, %vw1 : tensor<2x4x4xf32>, tensor<2x16x2x4xf16>, tensor<2x16x2x4xf16>
}

// -----

// Per-layer f16, GQA by broadcast (HF repeat_kv: linalg.broadcast of the
// read K/V over dimensions = [2], collapse of [kv_heads, group]), 1-token
// decode, expanded softmax.

// CHECK: !cache = !kvq.cache<layers = 1, kv_heads = 2, head_dim = 4, element_type = f16, config = <method = kivi, key_bits = 2, value_bits = 2, group_size = 4>>
// CHECK-LABEL: func.func @per_layer_f16_gqa_broadcast_decode_expanded(
// CHECK-SAME: %[[Q:arg[0-9]+]]: tensor<1x4x4xf32>, %[[K0:arg[0-9]+]]: tensor<1x2x4xf32>, %[[V0:arg[0-9]+]]: tensor<1x2x4xf32>, %[[C:arg[0-9]+]]: !cache, %[[POS:arg[0-9]+]]: index) -> tensor<1x4x4xf32> {
// CHECK: %[[KH:.*]] = linalg.generic {{.*}} ins(%[[K0]] : tensor<1x2x4xf32>) outs(%{{.*}} : tensor<1x2x4xf16>)
// CHECK: %[[VH:.*]] = linalg.generic {{.*}} ins(%[[V0]] : tensor<1x2x4xf32>) outs(%{{.*}} : tensor<1x2x4xf16>)
// CHECK: cf.assert %{{.*}}, "kvq: cache layer 0 does not hold exactly pos tokens
// CHECK: kvq.cache_update %[[C]][0], %[[KH]], %[[VH]] : !cache, tensor<1x2x4xf16>, tensor<1x2x4xf16>
// CHECK: %[[A:.*]] = kvq.cache_attend %[[C]][0], %[[Q]] : !cache, tensor<1x4x4xf32> -> tensor<1x4x4xf32>
// CHECK-NOT: linalg.broadcast
// CHECK: return %[[A]] : tensor<1x4x4xf32>

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#red3 = affine_map<(d0, d1, d2) -> (d0, d1)>
#sq3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d3)>
#sk3 = affine_map<(d0, d1, d2, d3) -> (d2, d0, d3)>
#ss3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#wp3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
#wv3 = affine_map<(d0, d1, d2, d3) -> (d3, d0, d2)>
#wo3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d2)>

func.func @per_layer_f16_gqa_broadcast_decode_expanded(%q: tensor<1x4x4xf32>, %k0: tensor<1x2x4xf32>, %v0: tensor<1x2x4xf32>, %kc0: tensor<16x2x4xf16>, %vc0: tensor<16x2x4xf16>, %pos: index)
    -> (tensor<1x4x4xf32>, tensor<16x2x4xf16>, tensor<16x2x4xf16>) {
  %zero = arith.constant 0.000000e+00 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %c1 = arith.constant 1 : index
  %len = arith.addi %pos, %c1 : index
  // Layer 0
  %kh0 = tensor.empty() : tensor<1x2x4xf16>
  %kt0 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%k0 : tensor<1x2x4xf32>) outs(%kh0 : tensor<1x2x4xf16>) {
    ^bb0(%in: f32, %out: f16):
      %t = arith.truncf %in : f32 to f16
      linalg.yield %t : f16
    } -> tensor<1x2x4xf16>
  %vh0 = tensor.empty() : tensor<1x2x4xf16>
  %vt0 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%v0 : tensor<1x2x4xf32>) outs(%vh0 : tensor<1x2x4xf16>) {
    ^bb0(%in: f32, %out: f16):
      %t = arith.truncf %in : f32 to f16
      linalg.yield %t : f16
    } -> tensor<1x2x4xf16>
  %kw0 = tensor.insert_slice %kt0 into %kc0[%pos, 0, 0] [1, 2, 4] [1, 1, 1] : tensor<1x2x4xf16> into tensor<16x2x4xf16>
  %kr0 = tensor.extract_slice %kw0[0, 0, 0] [%len, 2, 4] [1, 1, 1] : tensor<16x2x4xf16> to tensor<?x2x4xf16>
  %vw0 = tensor.insert_slice %vt0 into %vc0[%pos, 0, 0] [1, 2, 4] [1, 1, 1] : tensor<1x2x4xf16> into tensor<16x2x4xf16>
  %vr0 = tensor.extract_slice %vw0[0, 0, 0] [%len, 2, 4] [1, 1, 1] : tensor<16x2x4xf16> to tensor<?x2x4xf16>
  %ke0 = tensor.empty(%len) : tensor<?x2x4xf32>
  %kf0 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%kr0 : tensor<?x2x4xf16>) outs(%ke0 : tensor<?x2x4xf32>) {
    ^bb0(%in: f16, %out: f32):
      %e = arith.extf %in : f16 to f32
      linalg.yield %e : f32
    } -> tensor<?x2x4xf32>
  %ve0 = tensor.empty(%len) : tensor<?x2x4xf32>
  %vf0 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%vr0 : tensor<?x2x4xf16>) outs(%ve0 : tensor<?x2x4xf32>) {
    ^bb0(%in: f16, %out: f32):
      %e = arith.extf %in : f16 to f32
      linalg.yield %e : f32
    } -> tensor<?x2x4xf32>
  %kbe0 = tensor.empty(%len) : tensor<?x2x2x4xf32>
  %kb0 = linalg.broadcast ins(%kf0 : tensor<?x2x4xf32>) outs(%kbe0 : tensor<?x2x2x4xf32>) dimensions = [2]
  %kg0 = tensor.collapse_shape %kb0 [[0], [1, 2], [3]] : tensor<?x2x2x4xf32> into tensor<?x4x4xf32>
  %vbe0 = tensor.empty(%len) : tensor<?x2x2x4xf32>
  %vb0 = linalg.broadcast ins(%vf0 : tensor<?x2x4xf32>) outs(%vbe0 : tensor<?x2x2x4xf32>) dimensions = [2]
  %vg0 = tensor.collapse_shape %vb0 [[0], [1, 2], [3]] : tensor<?x2x2x4xf32> into tensor<?x4x4xf32>
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
  %mxe0 = tensor.empty() : tensor<4x1xf32>
  %mxi0 = linalg.fill ins(%ninf : f32) outs(%mxe0 : tensor<4x1xf32>) -> tensor<4x1xf32>
  %mx0 = linalg.generic {indexing_maps = [#id3, #red3], iterator_types = ["parallel", "parallel", "reduction"]} ins(%sc0 : tensor<4x1x?xf32>) outs(%mxi0 : tensor<4x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %m = arith.maximumf %in, %out : f32
      linalg.yield %m : f32
    } -> tensor<4x1xf32>
  %exe0 = tensor.empty(%len) : tensor<4x1x?xf32>
  %ex0 = linalg.generic {indexing_maps = [#id3, #red3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%sc0, %mx0 : tensor<4x1x?xf32>, tensor<4x1xf32>) outs(%exe0 : tensor<4x1x?xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %d = arith.subf %in, %in_1 : f32
      %e = math.exp %d : f32
      linalg.yield %e : f32
    } -> tensor<4x1x?xf32>
  %sme0 = tensor.empty() : tensor<4x1xf32>
  %smi0 = linalg.fill ins(%zero : f32) outs(%sme0 : tensor<4x1xf32>) -> tensor<4x1xf32>
  %sm0 = linalg.generic {indexing_maps = [#id3, #red3], iterator_types = ["parallel", "parallel", "reduction"]} ins(%ex0 : tensor<4x1x?xf32>) outs(%smi0 : tensor<4x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %a = arith.addf %in, %out : f32
      linalg.yield %a : f32
    } -> tensor<4x1xf32>
  %pe0 = tensor.empty(%len) : tensor<4x1x?xf32>
  %pr0 = linalg.generic {indexing_maps = [#id3, #red3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%ex0, %sm0 : tensor<4x1x?xf32>, tensor<4x1xf32>) outs(%pe0 : tensor<4x1x?xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %d = arith.divf %in, %in_1 : f32
      linalg.yield %d : f32
    } -> tensor<4x1x?xf32>
  %oe0 = tensor.empty() : tensor<1x4x4xf32>
  %oz0 = linalg.fill ins(%zero : f32) outs(%oe0 : tensor<1x4x4xf32>) -> tensor<1x4x4xf32>
  %o0 = linalg.generic {indexing_maps = [#wp3, #wv3, #wo3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%pr0, %vg0 : tensor<4x1x?xf32>, tensor<?x4x4xf32>) outs(%oz0 : tensor<1x4x4xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<1x4x4xf32>
  return %o0, %kw0, %vw0 : tensor<1x4x4xf32>, tensor<16x2x4xf16>, tensor<16x2x4xf16>
}

// -----

// Stacked f32, GQA by broadcast, 2-token prefill with the mask, expanded
// softmax.

// CHECK: !cache = !kvq.cache<layers = 1, kv_heads = 2, head_dim = 4, element_type = f32,
// CHECK-LABEL: func.func @stacked_f32_gqa_broadcast_prefill_expanded(
// CHECK-SAME: %[[Q:arg[0-9]+]]: tensor<2x4x4xf32>, %[[K0:arg[0-9]+]]: tensor<2x2x4xf32>, %[[V0:arg[0-9]+]]: tensor<2x2x4xf32>, %[[C:arg[0-9]+]]: !cache, %[[POS:arg[0-9]+]]: index) -> tensor<2x4x4xf32> {
// CHECK: cf.assert %{{.*}}, "kvq: cache layer 0 does not hold exactly pos tokens
// CHECK: kvq.cache_update %[[C]][0], %[[K0]], %[[V0]] : !cache, tensor<2x2x4xf32>, tensor<2x2x4xf32>
// CHECK: %[[A:.*]] = kvq.cache_attend %[[C]][0], %[[Q]] : !cache, tensor<2x4x4xf32> -> tensor<2x4x4xf32>
// CHECK-NOT: linalg.broadcast
// CHECK: return %[[A]] : tensor<2x4x4xf32>

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#red3 = affine_map<(d0, d1, d2) -> (d0, d1)>
#sq3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d3)>
#sk3 = affine_map<(d0, d1, d2, d3) -> (d2, d0, d3)>
#ss3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#wp3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
#wv3 = affine_map<(d0, d1, d2, d3) -> (d3, d0, d2)>
#wo3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d2)>

func.func @stacked_f32_gqa_broadcast_prefill_expanded(%q: tensor<2x4x4xf32>, %k0: tensor<2x2x4xf32>, %v0: tensor<2x2x4xf32>, %kc: tensor<1x16x2x4xf32>, %vc: tensor<1x16x2x4xf32>, %pos: index)
    -> (tensor<2x4x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %c2 = arith.constant 2 : index
  %len = arith.addi %pos, %c2 : index
  // Layer 0
  %kw0 = tensor.insert_slice %k0 into %kc[0, %pos, 0, 0] [1, 2, 2, 4] [1, 1, 1, 1] : tensor<2x2x4xf32> into tensor<1x16x2x4xf32>
  %kr0 = tensor.extract_slice %kw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %vw0 = tensor.insert_slice %v0 into %vc[0, %pos, 0, 0] [1, 2, 2, 4] [1, 1, 1, 1] : tensor<2x2x4xf32> into tensor<1x16x2x4xf32>
  %vr0 = tensor.extract_slice %vw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %kbe0 = tensor.empty(%len) : tensor<?x2x2x4xf32>
  %kb0 = linalg.broadcast ins(%kr0 : tensor<?x2x4xf32>) outs(%kbe0 : tensor<?x2x2x4xf32>) dimensions = [2]
  %kg0 = tensor.collapse_shape %kb0 [[0], [1, 2], [3]] : tensor<?x2x2x4xf32> into tensor<?x4x4xf32>
  %vbe0 = tensor.empty(%len) : tensor<?x2x2x4xf32>
  %vb0 = linalg.broadcast ins(%vr0 : tensor<?x2x4xf32>) outs(%vbe0 : tensor<?x2x2x4xf32>) dimensions = [2]
  %vg0 = tensor.collapse_shape %vb0 [[0], [1, 2], [3]] : tensor<?x2x2x4xf32> into tensor<?x4x4xf32>
  %se0 = tensor.empty(%len) : tensor<4x2x?xf32>
  %sz0 = linalg.fill ins(%zero : f32) outs(%se0 : tensor<4x2x?xf32>) -> tensor<4x2x?xf32>
  %s0 = linalg.generic {indexing_maps = [#sq3, #sk3, #ss3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %kg0 : tensor<2x4x4xf32>, tensor<?x4x4xf32>) outs(%sz0 : tensor<4x2x?xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<4x2x?xf32>
  %scale0 = arith.constant 0.5 : f32
  %sce0 = tensor.empty(%len) : tensor<4x2x?xf32>
  %sc0 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s0 : tensor<4x2x?xf32>) outs(%sce0 : tensor<4x2x?xf32>) {
    ^bb0(%in: f32, %out: f32):
      %m = arith.mulf %in, %scale0 : f32
      linalg.yield %m : f32
    } -> tensor<4x2x?xf32>
  %me0 = tensor.empty(%len) : tensor<4x2x?xf32>
  %mk0 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%sc0 : tensor<4x2x?xf32>) outs(%me0 : tensor<4x2x?xf32>) {
    ^bb0(%in: f32, %out: f32):
      %i = linalg.index 1 : index
      %j = linalg.index 2 : index
      %p = arith.addi %pos, %i : index
      %c = arith.cmpi ugt, %j, %p : index
      %s = arith.select %c, %ninf, %in : f32
      linalg.yield %s : f32
    } -> tensor<4x2x?xf32>
  %mxe0 = tensor.empty() : tensor<4x2xf32>
  %mxi0 = linalg.fill ins(%ninf : f32) outs(%mxe0 : tensor<4x2xf32>) -> tensor<4x2xf32>
  %mx0 = linalg.generic {indexing_maps = [#id3, #red3], iterator_types = ["parallel", "parallel", "reduction"]} ins(%mk0 : tensor<4x2x?xf32>) outs(%mxi0 : tensor<4x2xf32>) {
    ^bb0(%in: f32, %out: f32):
      %m = arith.maximumf %in, %out : f32
      linalg.yield %m : f32
    } -> tensor<4x2xf32>
  %exe0 = tensor.empty(%len) : tensor<4x2x?xf32>
  %ex0 = linalg.generic {indexing_maps = [#id3, #red3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%mk0, %mx0 : tensor<4x2x?xf32>, tensor<4x2xf32>) outs(%exe0 : tensor<4x2x?xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %d = arith.subf %in, %in_1 : f32
      %e = math.exp %d : f32
      linalg.yield %e : f32
    } -> tensor<4x2x?xf32>
  %sme0 = tensor.empty() : tensor<4x2xf32>
  %smi0 = linalg.fill ins(%zero : f32) outs(%sme0 : tensor<4x2xf32>) -> tensor<4x2xf32>
  %sm0 = linalg.generic {indexing_maps = [#id3, #red3], iterator_types = ["parallel", "parallel", "reduction"]} ins(%ex0 : tensor<4x2x?xf32>) outs(%smi0 : tensor<4x2xf32>) {
    ^bb0(%in: f32, %out: f32):
      %a = arith.addf %in, %out : f32
      linalg.yield %a : f32
    } -> tensor<4x2xf32>
  %pe0 = tensor.empty(%len) : tensor<4x2x?xf32>
  %pr0 = linalg.generic {indexing_maps = [#id3, #red3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%ex0, %sm0 : tensor<4x2x?xf32>, tensor<4x2xf32>) outs(%pe0 : tensor<4x2x?xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %d = arith.divf %in, %in_1 : f32
      linalg.yield %d : f32
    } -> tensor<4x2x?xf32>
  %oe0 = tensor.empty() : tensor<2x4x4xf32>
  %oz0 = linalg.fill ins(%zero : f32) outs(%oe0 : tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %o0 = linalg.generic {indexing_maps = [#wp3, #wv3, #wo3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%pr0, %vg0 : tensor<4x2x?xf32>, tensor<?x4x4xf32>) outs(%oz0 : tensor<2x4x4xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<2x4x4xf32>
  return %o0, %kw0, %vw0 : tensor<2x4x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>
}

// -----

// Per-layer f32, GQA by reshape, 2-token prefill, expanded softmax.

// CHECK: !cache = !kvq.cache<layers = 1, kv_heads = 2, head_dim = 4, element_type = f32,
// CHECK-LABEL: func.func @per_layer_f32_gqa_reshape_prefill_expanded(
// CHECK-SAME: %[[Q:arg[0-9]+]]: tensor<2x4x4xf32>, %[[K0:arg[0-9]+]]: tensor<2x2x4xf32>, %[[V0:arg[0-9]+]]: tensor<2x2x4xf32>, %[[C:arg[0-9]+]]: !cache, %[[POS:arg[0-9]+]]: index) -> tensor<2x4x4xf32> {
// CHECK: %[[QG:.*]] = tensor.expand_shape %[[Q]]
// CHECK: kvq.cache_update %[[C]][0], %[[K0]], %[[V0]] : !cache, tensor<2x2x4xf32>, tensor<2x2x4xf32>
// CHECK: %[[QC:.*]] = tensor.collapse_shape %[[QG]] {{\[\[}}0], [1, 2], [3]] : tensor<2x2x2x4xf32> into tensor<2x4x4xf32>
// CHECK: %[[A:.*]] = kvq.cache_attend %[[C]][0], %[[QC]] : !cache, tensor<2x4x4xf32> -> tensor<2x4x4xf32>
// CHECK: %[[AG:.*]] = tensor.expand_shape %[[A]] {{\[\[}}0], [1, 2], [3]] output_shape [2, 2, 2, 4]
// CHECK: %[[O:.*]] = tensor.collapse_shape %[[AG]]
// CHECK: return %[[O]] : tensor<2x4x4xf32>

#id4 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#red4 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#sq4 = affine_map<(d0, d1, d2, d3, d4) -> (d2, d0, d1, d4)>
#sk4 = affine_map<(d0, d1, d2, d3, d4) -> (d3, d0, d4)>
#ss4 = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>
#wp4 = affine_map<(d0, d1, d2, d3, d4) -> (d1, d2, d0, d4)>
#wv4 = affine_map<(d0, d1, d2, d3, d4) -> (d4, d1, d3)>
#wo4 = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>

func.func @per_layer_f32_gqa_reshape_prefill_expanded(%q: tensor<2x4x4xf32>, %k0: tensor<2x2x4xf32>, %v0: tensor<2x2x4xf32>, %kc0: tensor<16x2x4xf32>, %vc0: tensor<16x2x4xf32>, %pos: index)
    -> (tensor<2x4x4xf32>, tensor<16x2x4xf32>, tensor<16x2x4xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %c2 = arith.constant 2 : index
  %len = arith.addi %pos, %c2 : index
  // Layer 0
  %kw0 = tensor.insert_slice %k0 into %kc0[%pos, 0, 0] [2, 2, 4] [1, 1, 1] : tensor<2x2x4xf32> into tensor<16x2x4xf32>
  %kr0 = tensor.extract_slice %kw0[0, 0, 0] [%len, 2, 4] [1, 1, 1] : tensor<16x2x4xf32> to tensor<?x2x4xf32>
  %vw0 = tensor.insert_slice %v0 into %vc0[%pos, 0, 0] [2, 2, 4] [1, 1, 1] : tensor<2x2x4xf32> into tensor<16x2x4xf32>
  %vr0 = tensor.extract_slice %vw0[0, 0, 0] [%len, 2, 4] [1, 1, 1] : tensor<16x2x4xf32> to tensor<?x2x4xf32>
  %qg0 = tensor.expand_shape %q [[0], [1, 2], [3]] output_shape [2, 2, 2, 4] : tensor<2x4x4xf32> into tensor<2x2x2x4xf32>
  %se0 = tensor.empty(%len) : tensor<2x2x2x?xf32>
  %sz0 = linalg.fill ins(%zero : f32) outs(%se0 : tensor<2x2x2x?xf32>) -> tensor<2x2x2x?xf32>
  %s0 = linalg.generic {indexing_maps = [#sq4, #sk4, #ss4], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%qg0, %kr0 : tensor<2x2x2x4xf32>, tensor<?x2x4xf32>) outs(%sz0 : tensor<2x2x2x?xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<2x2x2x?xf32>
  %scale0 = arith.constant 0.5 : f32
  %sce0 = tensor.empty(%len) : tensor<2x2x2x?xf32>
  %sc0 = linalg.generic {indexing_maps = [#id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s0 : tensor<2x2x2x?xf32>) outs(%sce0 : tensor<2x2x2x?xf32>) {
    ^bb0(%in: f32, %out: f32):
      %m = arith.mulf %in, %scale0 : f32
      linalg.yield %m : f32
    } -> tensor<2x2x2x?xf32>
  %me0 = tensor.empty(%len) : tensor<2x2x2x?xf32>
  %mk0 = linalg.generic {indexing_maps = [#id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%sc0 : tensor<2x2x2x?xf32>) outs(%me0 : tensor<2x2x2x?xf32>) {
    ^bb0(%in: f32, %out: f32):
      %i = linalg.index 2 : index
      %j = linalg.index 3 : index
      %p = arith.addi %pos, %i : index
      %c = arith.cmpi ugt, %j, %p : index
      %s = arith.select %c, %ninf, %in : f32
      linalg.yield %s : f32
    } -> tensor<2x2x2x?xf32>
  %mxe0 = tensor.empty() : tensor<2x2x2xf32>
  %mxi0 = linalg.fill ins(%ninf : f32) outs(%mxe0 : tensor<2x2x2xf32>) -> tensor<2x2x2xf32>
  %mx0 = linalg.generic {indexing_maps = [#id4, #red4], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%mk0 : tensor<2x2x2x?xf32>) outs(%mxi0 : tensor<2x2x2xf32>) {
    ^bb0(%in: f32, %out: f32):
      %m = arith.maximumf %in, %out : f32
      linalg.yield %m : f32
    } -> tensor<2x2x2xf32>
  %exe0 = tensor.empty(%len) : tensor<2x2x2x?xf32>
  %ex0 = linalg.generic {indexing_maps = [#id4, #red4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%mk0, %mx0 : tensor<2x2x2x?xf32>, tensor<2x2x2xf32>) outs(%exe0 : tensor<2x2x2x?xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %d = arith.subf %in, %in_1 : f32
      %e = math.exp %d : f32
      linalg.yield %e : f32
    } -> tensor<2x2x2x?xf32>
  %sme0 = tensor.empty() : tensor<2x2x2xf32>
  %smi0 = linalg.fill ins(%zero : f32) outs(%sme0 : tensor<2x2x2xf32>) -> tensor<2x2x2xf32>
  %sm0 = linalg.generic {indexing_maps = [#id4, #red4], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%ex0 : tensor<2x2x2x?xf32>) outs(%smi0 : tensor<2x2x2xf32>) {
    ^bb0(%in: f32, %out: f32):
      %a = arith.addf %in, %out : f32
      linalg.yield %a : f32
    } -> tensor<2x2x2xf32>
  %pe0 = tensor.empty(%len) : tensor<2x2x2x?xf32>
  %pr0 = linalg.generic {indexing_maps = [#id4, #red4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%ex0, %sm0 : tensor<2x2x2x?xf32>, tensor<2x2x2xf32>) outs(%pe0 : tensor<2x2x2x?xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %d = arith.divf %in, %in_1 : f32
      linalg.yield %d : f32
    } -> tensor<2x2x2x?xf32>
  %oe0 = tensor.empty() : tensor<2x2x2x4xf32>
  %oz0 = linalg.fill ins(%zero : f32) outs(%oe0 : tensor<2x2x2x4xf32>) -> tensor<2x2x2x4xf32>
  %o0 = linalg.generic {indexing_maps = [#wp4, #wv4, #wo4], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%pr0, %vr0 : tensor<2x2x2x?xf32>, tensor<?x2x4xf32>) outs(%oz0 : tensor<2x2x2x4xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<2x2x2x4xf32>
  %oc0 = tensor.collapse_shape %o0 [[0], [1, 2], [3]] : tensor<2x2x2x4xf32> into tensor<2x4x4xf32>
  return %oc0, %kw0, %vw0 : tensor<2x4x4xf32>, tensor<16x2x4xf32>, tensor<16x2x4xf32>
}

// -----

// Queries and output heads-first ([heads, n, head_dim] = [2, 3, 4]), MHA,
// 3-token prefill: the queries are transposed to [n, heads, head_dim] for
// kvq.cache_attend and its result transposed back.

// CHECK-LABEL: func.func @stacked_f32_heads_first_prefill(
// CHECK-SAME: %[[Q:arg[0-9]+]]: tensor<2x3x4xf32>, %[[K0:arg[0-9]+]]: tensor<3x2x4xf32>, %[[V0:arg[0-9]+]]: tensor<3x2x4xf32>, %[[C:arg[0-9]+]]: !cache, %[[POS:arg[0-9]+]]: index) -> tensor<2x3x4xf32> {
// CHECK: kvq.cache_update %[[C]][0], %[[K0]], %[[V0]] : !cache, tensor<3x2x4xf32>, tensor<3x2x4xf32>
// CHECK: %[[QT:.*]] = linalg.transpose ins(%[[Q]] : tensor<2x3x4xf32>) outs(%{{.*}} : tensor<3x2x4xf32>) permutation = [1, 0, 2]
// CHECK: %[[A:.*]] = kvq.cache_attend %[[C]][0], %[[QT]] : !cache, tensor<3x2x4xf32> -> tensor<3x2x4xf32>
// CHECK: %[[O:.*]] = linalg.transpose ins(%[[A]] : tensor<3x2x4xf32>) outs(%{{.*}} : tensor<2x3x4xf32>) permutation = [1, 0, 2]
// CHECK: return %[[O]] : tensor<2x3x4xf32>

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#sqt3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
#sk3 = affine_map<(d0, d1, d2, d3) -> (d2, d0, d3)>
#ss3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#wp3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
#wv3 = affine_map<(d0, d1, d2, d3) -> (d3, d0, d2)>
#wot3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>

func.func @stacked_f32_heads_first_prefill(%q: tensor<2x3x4xf32>, %k0: tensor<3x2x4xf32>, %v0: tensor<3x2x4xf32>, %kc: tensor<1x16x2x4xf32>, %vc: tensor<1x16x2x4xf32>, %pos: index)
    -> (tensor<2x3x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %c3 = arith.constant 3 : index
  %len = arith.addi %pos, %c3 : index
  // Layer 0
  %kw0 = tensor.insert_slice %k0 into %kc[0, %pos, 0, 0] [1, 3, 2, 4] [1, 1, 1, 1] : tensor<3x2x4xf32> into tensor<1x16x2x4xf32>
  %kr0 = tensor.extract_slice %kw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %vw0 = tensor.insert_slice %v0 into %vc[0, %pos, 0, 0] [1, 3, 2, 4] [1, 1, 1, 1] : tensor<3x2x4xf32> into tensor<1x16x2x4xf32>
  %vr0 = tensor.extract_slice %vw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %se0 = tensor.empty(%len) : tensor<2x3x?xf32>
  %sz0 = linalg.fill ins(%zero : f32) outs(%se0 : tensor<2x3x?xf32>) -> tensor<2x3x?xf32>
  %s0 = linalg.generic {indexing_maps = [#sqt3, #sk3, #ss3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %kr0 : tensor<2x3x4xf32>, tensor<?x2x4xf32>) outs(%sz0 : tensor<2x3x?xf32>) {
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
  %me0 = tensor.empty(%len) : tensor<2x3x?xf32>
  %mk0 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%sc0 : tensor<2x3x?xf32>) outs(%me0 : tensor<2x3x?xf32>) {
    ^bb0(%in: f32, %out: f32):
      %i = linalg.index 1 : index
      %j = linalg.index 2 : index
      %p = arith.addi %pos, %i : index
      %c = arith.cmpi ugt, %j, %p : index
      %s = arith.select %c, %ninf, %in : f32
      linalg.yield %s : f32
    } -> tensor<2x3x?xf32>
  %pe0 = tensor.empty(%len) : tensor<2x3x?xf32>
  %pr0 = linalg.softmax dimension(2) ins(%mk0 : tensor<2x3x?xf32>) outs(%pe0 : tensor<2x3x?xf32>) -> tensor<2x3x?xf32>
  %oe0 = tensor.empty() : tensor<2x3x4xf32>
  %oz0 = linalg.fill ins(%zero : f32) outs(%oe0 : tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %o0 = linalg.generic {indexing_maps = [#wp3, #wv3, #wot3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%pr0, %vr0 : tensor<2x3x?xf32>, tensor<?x2x4xf32>) outs(%oz0 : tensor<2x3x4xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<2x3x4xf32>
  return %o0, %kw0, %vw0 : tensor<2x3x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>
}

// -----

// Heads-first queries with GQA by broadcast, 1-token decode.

// CHECK-LABEL: func.func @stacked_f32_gqa_broadcast_heads_first_decode(
// CHECK-SAME: %[[Q:arg[0-9]+]]: tensor<4x1x4xf32>, %[[K0:arg[0-9]+]]: tensor<1x2x4xf32>, %[[V0:arg[0-9]+]]: tensor<1x2x4xf32>, %[[C:arg[0-9]+]]: !cache, %[[POS:arg[0-9]+]]: index) -> tensor<4x1x4xf32> {
// CHECK: kvq.cache_update %[[C]][0], %[[K0]], %[[V0]] : !cache, tensor<1x2x4xf32>, tensor<1x2x4xf32>
// CHECK: %[[QT:.*]] = linalg.transpose ins(%[[Q]] : tensor<4x1x4xf32>) outs(%{{.*}} : tensor<1x4x4xf32>) permutation = [1, 0, 2]
// CHECK: %[[A:.*]] = kvq.cache_attend %[[C]][0], %[[QT]] : !cache, tensor<1x4x4xf32> -> tensor<1x4x4xf32>
// CHECK: %[[O:.*]] = linalg.transpose ins(%[[A]] : tensor<1x4x4xf32>) outs(%{{.*}} : tensor<4x1x4xf32>) permutation = [1, 0, 2]
// CHECK: return %[[O]] : tensor<4x1x4xf32>

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#sqt3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
#sk3 = affine_map<(d0, d1, d2, d3) -> (d2, d0, d3)>
#ss3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#wp3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
#wv3 = affine_map<(d0, d1, d2, d3) -> (d3, d0, d2)>
#wot3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>

func.func @stacked_f32_gqa_broadcast_heads_first_decode(%q: tensor<4x1x4xf32>, %k0: tensor<1x2x4xf32>, %v0: tensor<1x2x4xf32>, %kc: tensor<1x16x2x4xf32>, %vc: tensor<1x16x2x4xf32>, %pos: index)
    -> (tensor<4x1x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %c1 = arith.constant 1 : index
  %len = arith.addi %pos, %c1 : index
  // Layer 0
  %kw0 = tensor.insert_slice %k0 into %kc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<1x16x2x4xf32>
  %kr0 = tensor.extract_slice %kw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %vw0 = tensor.insert_slice %v0 into %vc[0, %pos, 0, 0] [1, 1, 2, 4] [1, 1, 1, 1] : tensor<1x2x4xf32> into tensor<1x16x2x4xf32>
  %vr0 = tensor.extract_slice %vw0[0, 0, 0, 0] [1, %len, 2, 4] [1, 1, 1, 1] : tensor<1x16x2x4xf32> to tensor<?x2x4xf32>
  %kbe0 = tensor.empty(%len) : tensor<?x2x2x4xf32>
  %kb0 = linalg.broadcast ins(%kr0 : tensor<?x2x4xf32>) outs(%kbe0 : tensor<?x2x2x4xf32>) dimensions = [2]
  %kg0 = tensor.collapse_shape %kb0 [[0], [1, 2], [3]] : tensor<?x2x2x4xf32> into tensor<?x4x4xf32>
  %vbe0 = tensor.empty(%len) : tensor<?x2x2x4xf32>
  %vb0 = linalg.broadcast ins(%vr0 : tensor<?x2x4xf32>) outs(%vbe0 : tensor<?x2x2x4xf32>) dimensions = [2]
  %vg0 = tensor.collapse_shape %vb0 [[0], [1, 2], [3]] : tensor<?x2x2x4xf32> into tensor<?x4x4xf32>
  %se0 = tensor.empty(%len) : tensor<4x1x?xf32>
  %sz0 = linalg.fill ins(%zero : f32) outs(%se0 : tensor<4x1x?xf32>) -> tensor<4x1x?xf32>
  %s0 = linalg.generic {indexing_maps = [#sqt3, #sk3, #ss3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %kg0 : tensor<4x1x4xf32>, tensor<?x4x4xf32>) outs(%sz0 : tensor<4x1x?xf32>) {
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
  %oe0 = tensor.empty() : tensor<4x1x4xf32>
  %oz0 = linalg.fill ins(%zero : f32) outs(%oe0 : tensor<4x1x4xf32>) -> tensor<4x1x4xf32>
  %o0 = linalg.generic {indexing_maps = [#wp3, #wv3, #wot3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%pr0, %vg0 : tensor<4x1x?xf32>, tensor<?x4x4xf32>) outs(%oz0 : tensor<4x1x4xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<4x1x4xf32>
  return %o0, %kw0, %vw0 : tensor<4x1x4xf32>, tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>
}

// -----

// head_dim 48 (scale 1/sqrt(48)): without group-size the kivi default 32
// does not divide it and shrinks to the largest divisor below, 24; an
// explicit group-size is kept, and checked (G3 above fails on head_dim 4
// first, in the first function).

// CHECK: !cache = !kvq.cache<layers = 1, kv_heads = 2, head_dim = 48, element_type = f32, config = <method = kivi, key_bits = 2, value_bits = 2, group_size = 24>>
// CHECK-LABEL: func.func @head_dim_48(
// CHECK-SAME: !cache
// CHECK: kvq.cache_update %{{.*}}[0], %{{.*}}, %{{.*}} : !cache, tensor<1x2x48xf32>, tensor<1x2x48xf32>
// CHECK: kvq.cache_attend %{{.*}}[0], %{{.*}} : !cache, tensor<1x2x48xf32> -> tensor<1x2x48xf32>
// G2: !cache = !kvq.cache<layers = 1, kv_heads = 2, head_dim = 48, element_type = f32, config = <method = kivi, key_bits = 2, value_bits = 2, group_size = 2>>

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#sq3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d3)>
#sk3 = affine_map<(d0, d1, d2, d3) -> (d2, d0, d3)>
#ss3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#wp3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
#wv3 = affine_map<(d0, d1, d2, d3) -> (d3, d0, d2)>
#wo3 = affine_map<(d0, d1, d2, d3) -> (d1, d0, d2)>

func.func @head_dim_48(%q: tensor<1x2x48xf32>, %k0: tensor<1x2x48xf32>, %v0: tensor<1x2x48xf32>, %kc: tensor<1x16x2x48xf32>, %vc: tensor<1x16x2x48xf32>, %pos: index)
    -> (tensor<1x2x48xf32>, tensor<1x16x2x48xf32>, tensor<1x16x2x48xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %c1 = arith.constant 1 : index
  %len = arith.addi %pos, %c1 : index
  // Layer 0
  %kw0 = tensor.insert_slice %k0 into %kc[0, %pos, 0, 0] [1, 1, 2, 48] [1, 1, 1, 1] : tensor<1x2x48xf32> into tensor<1x16x2x48xf32>
  %kr0 = tensor.extract_slice %kw0[0, 0, 0, 0] [1, %len, 2, 48] [1, 1, 1, 1] : tensor<1x16x2x48xf32> to tensor<?x2x48xf32>
  %vw0 = tensor.insert_slice %v0 into %vc[0, %pos, 0, 0] [1, 1, 2, 48] [1, 1, 1, 1] : tensor<1x2x48xf32> into tensor<1x16x2x48xf32>
  %vr0 = tensor.extract_slice %vw0[0, 0, 0, 0] [1, %len, 2, 48] [1, 1, 1, 1] : tensor<1x16x2x48xf32> to tensor<?x2x48xf32>
  %se0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sz0 = linalg.fill ins(%zero : f32) outs(%se0 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %s0 = linalg.generic {indexing_maps = [#sq3, #sk3, #ss3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %kr0 : tensor<1x2x48xf32>, tensor<?x2x48xf32>) outs(%sz0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<2x1x?xf32>
  %scale0 = arith.constant 0.1443375672974064 : f32
  %sce0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %sc0 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s0 : tensor<2x1x?xf32>) outs(%sce0 : tensor<2x1x?xf32>) {
    ^bb0(%in: f32, %out: f32):
      %m = arith.mulf %in, %scale0 : f32
      linalg.yield %m : f32
    } -> tensor<2x1x?xf32>
  %pe0 = tensor.empty(%len) : tensor<2x1x?xf32>
  %pr0 = linalg.softmax dimension(2) ins(%sc0 : tensor<2x1x?xf32>) outs(%pe0 : tensor<2x1x?xf32>) -> tensor<2x1x?xf32>
  %oe0 = tensor.empty() : tensor<1x2x48xf32>
  %oz0 = linalg.fill ins(%zero : f32) outs(%oe0 : tensor<1x2x48xf32>) -> tensor<1x2x48xf32>
  %o0 = linalg.generic {indexing_maps = [#wp3, #wv3, #wo3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%pr0, %vr0 : tensor<2x1x?xf32>, tensor<?x2x48xf32>) outs(%oz0 : tensor<1x2x48xf32>) {
    ^bb0(%in: f32, %in_1: f32, %out: f32):
      %m = arith.mulf %in, %in_1 : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    } -> tensor<1x2x48xf32>
  return %o0, %kw0, %vw0 : tensor<1x2x48xf32>, tensor<1x16x2x48xf32>, tensor<1x16x2x48xf32>
}
