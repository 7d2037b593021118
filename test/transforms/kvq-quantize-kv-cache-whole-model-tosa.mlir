// REQUIRES: mlir-runner
// RUN: rm -rf %t && mkdir -p %t
// RUN: %python %S/Inputs/whole_model.py --form tosa --print-graph \
// RUN:   --checkpoint %models/stories260K/stories260K.bin \
// RUN:   --text %models/stories260K/eval.txt --out %t --run "%kvq_run" \
// RUN:   > %t/graph.mlir
// RUN: kvq-opt %t/graph.mlir --kvq-quantize-kv-cache=method=kivi 2>&1 \
// RUN:   | FileCheck %s --check-prefix=REWRITE
// RUN: %python %S/Inputs/whole_model.py --form tosa \
// RUN:   --checkpoint %models/stories260K/stories260K.bin \
// RUN:   --text %models/stories260K/eval.txt --tokens 200 --capacity 256 \
// RUN:   --out %t --run "%kvq_run" | FileCheck %s

// stories260K as a TOSA program (Inputs/whole_model.py, --form tosa), the
// model in the forms torch-mlir's TOSA backend writes (TorchToTosa.cpp) and
// the cache written per head by tosa.scatter: the embedding and the RoPE
// tables read by tosa.gather, RMSNorm as mul/reduce_sum/rsqrt, the dense
// layers as tosa.matmul with [1, in, out] constants, heads by
// tosa.reshape/tosa.transpose, repeat_kv by tosa.tile, the half-split RoPE
// by tosa.slice/tosa.negate/tosa.concat, the caches [1, kv_heads, capacity,
// head_dim] reshaped to [kv_heads, capacity, head_dim] for tosa.scatter at
// the position tensor (broadcast to every head) and reshaped back, the
// scores under the additive attention_mask argument, the
// reduce_max/exp/reduce_sum/reciprocal softmax, SiLU as x * sigmoid(x).
// Every layer's attention is rewritten; the mask argument is assumed
// causal, and the remark says so:
// REWRITE: remark: kvq-quantize-kv-cache: @forward: adopted on the assumption that argument #2 is the causal attention mask
// REWRITE-NOT: remark:
// REWRITE: !cache = !kvq.cache<layers = 5, kv_heads = 4, head_dim = 8, element_type = f32, config = <method = kivi
// REWRITE: func.func @forward(%arg0: tensor<1x1xi32>, %arg1: tensor<1x1xi32>, %arg2: tensor<1x1x128xf32>, %arg3: !cache) -> tensor<1x1x512xf32>
// REWRITE-COUNT-5: kvq.cache_attend
// REWRITE-NOT: kvq.cache_attend
// REWRITE-NOT: tosa.

// Run for 200 tokens of the evaluation text, one per step, as written
// (--kvq-to-llvm converts the TOSA) and rewritten for each method, against
// kvq-run on the same weights as a Hugging Face folder, as in
// kvq-quantize-kv-cache-whole-model-torch.mlir.
// CHECK: graph: perplexity {{[0-9.]+}}, kvq-run {{[0-9.]+}}: equal
// CHECK-NEXT: fp16: 102400 logits over 200 steps equal the graph's
// CHECK-NEXT: fp16: perplexity {{[0-9.]+}}, kvq-run {{[0-9.]+}}: equal
// CHECK-NEXT: kivi: perplexity {{[0-9.]+}}, kvq-run {{[0-9.]+}}: equal
// CHECK-NEXT: kivi_sink: perplexity {{[0-9.]+}}, kvq-run {{[0-9.]+}}: equal
// CHECK-NEXT: kvquant: perplexity {{[0-9.]+}}, kvq-run {{[0-9.]+}}: equal
