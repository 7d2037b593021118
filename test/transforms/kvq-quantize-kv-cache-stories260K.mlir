// RUN: kvq-import %models/stories260K/stories260K.bin --prefill=4 --cache-layout=stacked --cache-type=f32 --gqa=reshape --softmax=linalg \
// RUN:   | kvq-opt --kvq-quantize-kv-cache=method=kivi 2>&1 | FileCheck %s -DT=f32 \
// RUN:   --implicit-check-not=remark --implicit-check-not=tensor.insert_slice --implicit-check-not=linalg.softmax --implicit-check-not=arith.maximumf
// RUN: kvq-import %models/stories260K/stories260K.bin --prefill=4 --cache-layout=stacked --cache-type=f32 --gqa=reshape --softmax=expanded \
// RUN:   | kvq-opt --kvq-quantize-kv-cache=method=kivi 2>&1 | FileCheck %s -DT=f32 \
// RUN:   --implicit-check-not=remark --implicit-check-not=tensor.insert_slice --implicit-check-not=linalg.softmax --implicit-check-not=arith.maximumf
// RUN: kvq-import %models/stories260K/stories260K.bin --prefill=4 --cache-layout=stacked --cache-type=f32 --gqa=broadcast --softmax=linalg \
// RUN:   | kvq-opt --kvq-quantize-kv-cache=method=kivi 2>&1 | FileCheck %s -DT=f32 \
// RUN:   --implicit-check-not=remark --implicit-check-not=tensor.insert_slice --implicit-check-not=linalg.softmax --implicit-check-not=arith.maximumf
// RUN: kvq-import %models/stories260K/stories260K.bin --prefill=4 --cache-layout=stacked --cache-type=f32 --gqa=broadcast --softmax=expanded \
// RUN:   | kvq-opt --kvq-quantize-kv-cache=method=kivi 2>&1 | FileCheck %s -DT=f32 \
// RUN:   --implicit-check-not=remark --implicit-check-not=tensor.insert_slice --implicit-check-not=linalg.softmax --implicit-check-not=arith.maximumf
// RUN: kvq-import %models/stories260K/stories260K.bin --prefill=4 --cache-layout=stacked --cache-type=f16 --gqa=reshape --softmax=linalg \
// RUN:   | kvq-opt --kvq-quantize-kv-cache=method=kivi 2>&1 | FileCheck %s -DT=f16 \
// RUN:   --implicit-check-not=remark --implicit-check-not=tensor.insert_slice --implicit-check-not=linalg.softmax --implicit-check-not=arith.maximumf
// RUN: kvq-import %models/stories260K/stories260K.bin --prefill=4 --cache-layout=stacked --cache-type=f16 --gqa=reshape --softmax=expanded \
// RUN:   | kvq-opt --kvq-quantize-kv-cache=method=kivi 2>&1 | FileCheck %s -DT=f16 \
// RUN:   --implicit-check-not=remark --implicit-check-not=tensor.insert_slice --implicit-check-not=linalg.softmax --implicit-check-not=arith.maximumf
// RUN: kvq-import %models/stories260K/stories260K.bin --prefill=4 --cache-layout=stacked --cache-type=f16 --gqa=broadcast --softmax=linalg \
// RUN:   | kvq-opt --kvq-quantize-kv-cache=method=kivi 2>&1 | FileCheck %s -DT=f16 \
// RUN:   --implicit-check-not=remark --implicit-check-not=tensor.insert_slice --implicit-check-not=linalg.softmax --implicit-check-not=arith.maximumf
// RUN: kvq-import %models/stories260K/stories260K.bin --prefill=4 --cache-layout=stacked --cache-type=f16 --gqa=broadcast --softmax=expanded \
// RUN:   | kvq-opt --kvq-quantize-kv-cache=method=kivi 2>&1 | FileCheck %s -DT=f16 \
// RUN:   --implicit-check-not=remark --implicit-check-not=tensor.insert_slice --implicit-check-not=linalg.softmax --implicit-check-not=arith.maximumf
// RUN: kvq-import %models/stories260K/stories260K.bin --prefill=4 --cache-layout=per-layer --cache-type=f32 --gqa=reshape --softmax=linalg \
// RUN:   | kvq-opt --kvq-quantize-kv-cache=method=kivi 2>&1 | FileCheck %s -DT=f32 \
// RUN:   --implicit-check-not=remark --implicit-check-not=tensor.insert_slice --implicit-check-not=linalg.softmax --implicit-check-not=arith.maximumf
// RUN: kvq-import %models/stories260K/stories260K.bin --prefill=4 --cache-layout=per-layer --cache-type=f32 --gqa=reshape --softmax=expanded \
// RUN:   | kvq-opt --kvq-quantize-kv-cache=method=kivi 2>&1 | FileCheck %s -DT=f32 \
// RUN:   --implicit-check-not=remark --implicit-check-not=tensor.insert_slice --implicit-check-not=linalg.softmax --implicit-check-not=arith.maximumf
// RUN: kvq-import %models/stories260K/stories260K.bin --prefill=4 --cache-layout=per-layer --cache-type=f32 --gqa=broadcast --softmax=linalg \
// RUN:   | kvq-opt --kvq-quantize-kv-cache=method=kivi 2>&1 | FileCheck %s -DT=f32 \
// RUN:   --implicit-check-not=remark --implicit-check-not=tensor.insert_slice --implicit-check-not=linalg.softmax --implicit-check-not=arith.maximumf
// RUN: kvq-import %models/stories260K/stories260K.bin --prefill=4 --cache-layout=per-layer --cache-type=f32 --gqa=broadcast --softmax=expanded \
// RUN:   | kvq-opt --kvq-quantize-kv-cache=method=kivi 2>&1 | FileCheck %s -DT=f32 \
// RUN:   --implicit-check-not=remark --implicit-check-not=tensor.insert_slice --implicit-check-not=linalg.softmax --implicit-check-not=arith.maximumf
// RUN: kvq-import %models/stories260K/stories260K.bin --prefill=4 --cache-layout=per-layer --cache-type=f16 --gqa=reshape --softmax=linalg \
// RUN:   | kvq-opt --kvq-quantize-kv-cache=method=kivi 2>&1 | FileCheck %s -DT=f16 \
// RUN:   --implicit-check-not=remark --implicit-check-not=tensor.insert_slice --implicit-check-not=linalg.softmax --implicit-check-not=arith.maximumf
// RUN: kvq-import %models/stories260K/stories260K.bin --prefill=4 --cache-layout=per-layer --cache-type=f16 --gqa=reshape --softmax=expanded \
// RUN:   | kvq-opt --kvq-quantize-kv-cache=method=kivi 2>&1 | FileCheck %s -DT=f16 \
// RUN:   --implicit-check-not=remark --implicit-check-not=tensor.insert_slice --implicit-check-not=linalg.softmax --implicit-check-not=arith.maximumf
// RUN: kvq-import %models/stories260K/stories260K.bin --prefill=4 --cache-layout=per-layer --cache-type=f16 --gqa=broadcast --softmax=linalg \
// RUN:   | kvq-opt --kvq-quantize-kv-cache=method=kivi 2>&1 | FileCheck %s -DT=f16 \
// RUN:   --implicit-check-not=remark --implicit-check-not=tensor.insert_slice --implicit-check-not=linalg.softmax --implicit-check-not=arith.maximumf
// RUN: kvq-import %models/stories260K/stories260K.bin --prefill=4 --cache-layout=per-layer --cache-type=f16 --gqa=broadcast --softmax=expanded \
// RUN:   | kvq-opt --kvq-quantize-kv-cache=method=kivi 2>&1 | FileCheck %s -DT=f16 \
// RUN:   --implicit-check-not=remark --implicit-check-not=tensor.insert_slice --implicit-check-not=linalg.softmax --implicit-check-not=arith.maximumf

// The real model (stories260K: 5 layers, 8 query heads on 4 KV heads,
// head_dim 8) in every graph spelling kvq-import has: stacked or per-layer
// cache tensors, f32 or f16, GQA by reshape or by broadcast (repeat_kv),
// linalg.softmax or its expansion, with a 4-token prefill and a 1-token
// decode. kvq-quantize-kv-cache must adopt both functions in every case: one
// !kvq.cache argument instead of the 2 (stacked) or 10 (per-layer) cache
// tensors, only the logits returned, and per layer, in order, a position
// check, one kvq.cache_update of the layer's K/V and one kvq.cache_attend of
// its 8 query heads. Nothing refused (no remark), no cache slice and no
// softmax left (implicit-check-not).

// CHECK: !cache = !kvq.cache<layers = 5, kv_heads = 4, head_dim = 8, element_type = [[T]], config = <method = kivi, key_bits = 2, value_bits = 2, group_size = 8>>

// CHECK-LABEL: func.func @prefill(
// CHECK-SAME: %{{[a-z0-9]+}}: tensor<264128xf32>, %[[C:[a-z0-9]+]]: !cache, %{{[a-z0-9]+}}: tensor<4xi32>, %{{[a-z0-9]+}}: index) -> tensor<512xf32>
// CHECK: cf.assert %{{.*}}, "kvq: cache layer 0 does not hold exactly pos tokens
// CHECK: kvq.cache_update %[[C]][0], %{{.*}}, %{{.*}} : !cache, tensor<4x4x8x[[T]]>, tensor<4x4x8x[[T]]>
// CHECK: kvq.cache_attend %[[C]][0], %{{.*}} : !cache, tensor<4x8x8xf32> -> tensor<4x8x8xf32>
// CHECK: kvq.cache_update %[[C]][1], %{{.*}}, %{{.*}} : !cache, tensor<4x4x8x[[T]]>, tensor<4x4x8x[[T]]>
// CHECK: kvq.cache_attend %[[C]][1], %{{.*}} : !cache, tensor<4x8x8xf32> -> tensor<4x8x8xf32>
// CHECK: kvq.cache_update %[[C]][2], %{{.*}}, %{{.*}} : !cache, tensor<4x4x8x[[T]]>, tensor<4x4x8x[[T]]>
// CHECK: kvq.cache_attend %[[C]][2], %{{.*}} : !cache, tensor<4x8x8xf32> -> tensor<4x8x8xf32>
// CHECK: kvq.cache_update %[[C]][3], %{{.*}}, %{{.*}} : !cache, tensor<4x4x8x[[T]]>, tensor<4x4x8x[[T]]>
// CHECK: kvq.cache_attend %[[C]][3], %{{.*}} : !cache, tensor<4x8x8xf32> -> tensor<4x8x8xf32>
// CHECK: kvq.cache_update %[[C]][4], %{{.*}}, %{{.*}} : !cache, tensor<4x4x8x[[T]]>, tensor<4x4x8x[[T]]>
// CHECK: kvq.cache_attend %[[C]][4], %{{.*}} : !cache, tensor<4x8x8xf32> -> tensor<4x8x8xf32>
// CHECK-NOT: kvq.cache_
// CHECK: return %{{.*}} : tensor<512xf32>

// CHECK-LABEL: func.func @decode(
// CHECK-SAME: %{{[a-z0-9]+}}: tensor<264128xf32>, %[[C:[a-z0-9]+]]: !cache, %{{[a-z0-9]+}}: tensor<1xi32>, %{{[a-z0-9]+}}: index) -> tensor<512xf32>
// CHECK: cf.assert %{{.*}}, "kvq: cache layer 0 does not hold exactly pos tokens
// CHECK: kvq.cache_update %[[C]][0], %{{.*}}, %{{.*}} : !cache, tensor<1x4x8x[[T]]>, tensor<1x4x8x[[T]]>
// CHECK: kvq.cache_attend %[[C]][0], %{{.*}} : !cache, tensor<1x8x8xf32> -> tensor<1x8x8xf32>
// CHECK: kvq.cache_update %[[C]][1], %{{.*}}, %{{.*}} : !cache, tensor<1x4x8x[[T]]>, tensor<1x4x8x[[T]]>
// CHECK: kvq.cache_attend %[[C]][1], %{{.*}} : !cache, tensor<1x8x8xf32> -> tensor<1x8x8xf32>
// CHECK: kvq.cache_update %[[C]][2], %{{.*}}, %{{.*}} : !cache, tensor<1x4x8x[[T]]>, tensor<1x4x8x[[T]]>
// CHECK: kvq.cache_attend %[[C]][2], %{{.*}} : !cache, tensor<1x8x8xf32> -> tensor<1x8x8xf32>
// CHECK: kvq.cache_update %[[C]][3], %{{.*}}, %{{.*}} : !cache, tensor<1x4x8x[[T]]>, tensor<1x4x8x[[T]]>
// CHECK: kvq.cache_attend %[[C]][3], %{{.*}} : !cache, tensor<1x8x8xf32> -> tensor<1x8x8xf32>
// CHECK: kvq.cache_update %[[C]][4], %{{.*}}, %{{.*}} : !cache, tensor<1x4x8x[[T]]>, tensor<1x4x8x[[T]]>
// CHECK: kvq.cache_attend %[[C]][4], %{{.*}} : !cache, tensor<1x8x8xf32> -> tensor<1x8x8xf32>
// CHECK-NOT: kvq.cache_
// CHECK: return %{{.*}} : tensor<512xf32>

// CHECK-LABEL: func.func @kv_cache_create() -> !cache
// CHECK-LABEL: func.func @kv_cache_destroy(%arg0: !cache)
// CHECK-LABEL: func.func @kv_cache_stats(%arg0: !cache) -> (i64, i64, i64, f64)
