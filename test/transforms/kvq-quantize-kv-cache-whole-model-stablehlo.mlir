// REQUIRES: mlir-runner
// RUN: rm -rf %t && mkdir -p %t
// RUN: %python %S/Inputs/whole_model.py --form stablehlo --print-graph \
// RUN:   --checkpoint %models/stories260K/stories260K.bin \
// RUN:   --text %models/stories260K/eval.txt --out %t --run "%kvq_run" \
// RUN:   > %t/graph.mlir
// RUN: kvq-opt %t/graph.mlir --kvq-quantize-kv-cache=method=kivi 2>&1 \
// RUN:   | FileCheck %s --check-prefix=REWRITE
// RUN: %python %S/Inputs/whole_model.py --form stablehlo \
// RUN:   --checkpoint %models/stories260K/stories260K.bin \
// RUN:   --text %models/stories260K/eval.txt --tokens 200 --capacity 256 \
// RUN:   --out %t --run "%kvq_run" | FileCheck %s

// stories260K as StableHLO's linalg legalization writes a JAX Llama's
// decode step (Inputs/whole_model.py, --form stablehlo): five layers, the
// caches [batch, capacity, kv_heads, head_dim] written by
// dynamic_update_slice at a start index clamped into the capacity
// (stablehlo/conversions/linalg/transforms/StablehloLegalizeToLinalg.cpp:
// maxsi/minsi, then insert_slice), dense layers as linalg.matmul with
// [in, out] kernels (StablehloToLinalgDotProduct.cpp), attention as
// generic contractions over the whole capacity (dot_general with batch
// dims), the scale on the queries, K and V repeated by linalg.broadcast
// (broadcast_in_dim), the causal mask built in the graph (iota, compare,
// select with -inf), reduce max / sum softmax (StablehloToLinalgReduce.cpp)
// and SiLU as x * logistic(x). Every layer's attention is rewritten, with
// no remark (the mask is proven, not assumed):
// REWRITE-NOT: remark:
// REWRITE: !cache = !kvq.cache<layers = 5, kv_heads = 4, head_dim = 8, element_type = f32, config = <method = kivi
// REWRITE: func.func @forward(%arg0: tensor<1x1xi32>, %arg1: tensor<i32>, %arg2: !cache) -> tensor<1x1x512xf32>
// REWRITE-COUNT-5: kvq.cache_attend
// REWRITE-NOT: kvq.cache_attend

// Run for 200 tokens of the evaluation text, one per step, as written and
// rewritten for each method; kvq-run runs the same weights as a Hugging
// Face folder (kvq-import's model) on the same ids, one token per step.
// The fp16 rewrite's logits equal the graph's own up to fp16 rounding of
// K and V, and every perplexity equals kvq-run's within 0.1 %: the two
// compute the projections in different orders, so a quantizer may round a
// K or V element the other way; the script fails when a method's
// perplexity lies within 0.2 % of fp16's, where a wrong method would pass.
// CHECK: graph: perplexity {{[0-9.]+}}, kvq-run {{[0-9.]+}}: equal
// CHECK-NEXT: fp16: 102400 logits over 200 steps equal the graph's
// CHECK-NEXT: fp16: perplexity {{[0-9.]+}}, kvq-run {{[0-9.]+}}: equal
// CHECK-NEXT: kivi: perplexity {{[0-9.]+}}, kvq-run {{[0-9.]+}}: equal
// CHECK-NEXT: kivi_sink: perplexity {{[0-9.]+}}, kvq-run {{[0-9.]+}}: equal
// CHECK-NEXT: kvquant: perplexity {{[0-9.]+}}, kvq-run {{[0-9.]+}}: equal
