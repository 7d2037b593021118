// RUN: kvq-import %models/stories260K/stories260K.bin --prefill=4 --cache-layout=stacked --cache-type=f32 \
// RUN:   | kvq-opt --kvq-quantize-kv-cache="method=kvquant pre-rope=true" 2>&1 | FileCheck %s -DT=f32 --implicit-check-not=remark
// RUN: kvq-import %models/stories260K/stories260K.bin --prefill=4 --cache-layout=per-layer --cache-type=f16 --gqa=broadcast --softmax=expanded \
// RUN:   | kvq-opt --kvq-quantize-kv-cache="method=kvquant pre-rope=true" 2>&1 | FileCheck %s -DT=f16 --implicit-check-not=remark
// RUN: kvq-import %models/stories260K/stories260K.bin --prefill=4 --cache-layout=stacked --cache-type=f16 \
// RUN:   | kvq-opt --kvq-quantize-kv-cache="method=kvquant" 2>&1 | FileCheck %s --check-prefix=OFF --implicit-check-not=remark

// The real model's RoPE (llama2.c: interleaved pairs, theta 10000, angles
// computed in the graph with math.powf / math.cos / math.sin) is proven
// for every layer of the prefill and the decode function: the cache records
// it, and only the queries' rotations remain (one per layer and function:
// 10 generics with a math.cos instead of 20). Without pre-rope the keys are
// written rotated and both rotations stay.

// CHECK: !cache = !kvq.cache<layers = 5, kv_heads = 4, head_dim = 8, element_type = [[T]], config = <method = kvquant, key_bits = 3, value_bits = 3, group_size = 8, rope = <theta = 1.000000e+04, style = interleaved>>>
// CHECK-COUNT-10: math.cos
// CHECK-NOT: math.cos

// OFF: !cache = !kvq.cache<layers = 5, kv_heads = 4, head_dim = 8, element_type = f16, config = <method = kvquant, key_bits = 3, value_bits = 3, group_size = 8>>
// OFF-COUNT-20: math.cos
// OFF-NOT: math.cos
