// REQUIRES: mlir-runner
// RUN: rm -rf %t && mkdir -p %t
// RUN: %python %S/Inputs/whole_model.py --form torch --print-graph \
// RUN:   --checkpoint %models/stories260K/stories260K.bin \
// RUN:   --text %models/stories260K/eval.txt --out %t --run "%kvq_run" \
// RUN:   > %t/graph.mlir
// RUN: kvq-opt %t/graph.mlir --kvq-quantize-kv-cache=method=kivi 2>&1 \
// RUN:   | FileCheck %s --check-prefix=REWRITE
// RUN: %python %S/Inputs/whole_model.py --form torch \
// RUN:   --checkpoint %models/stories260K/stories260K.bin \
// RUN:   --text %models/stories260K/eval.txt --tokens 200 --capacity 256 \
// RUN:   --out %t --run "%kvq_run" | FileCheck %s

// stories260K as torch-mlir lowers Hugging Face's LlamaForCausalLM for one
// decode step with a StaticCache (Inputs/whole_model.py, --form torch): five
// layers, the caches [batch, kv_heads, capacity, head_dim] written by
// insert_slice at cache_position (lib/Conversion/TorchToLinalg/
// DataMovement.cpp, slice_scatter), linear as linalg.transpose of the
// weight + linalg.matmul (Linear.cpp), attention as linalg.batch_matmul
// over the whole capacity with the additive attention_mask argument, the
// scale on the scores, repeat_kv as expand_shape + broadcast + collapse,
// torch's softmax decomposition (DecomposeComplexOps.cpp) and rotate_half
// as slices, a negation and tensor.concat. Every layer's attention is
// rewritten, with one remark for the mask argument:
// REWRITE-COUNT-1: remark: kvq-quantize-kv-cache: @forward: adopted on the assumption that argument #2 is the causal attention mask
// REWRITE-NOT: remark:
// REWRITE: !cache = !kvq.cache<layers = 5, kv_heads = 4, head_dim = 8, element_type = f32, config = <method = kivi
// REWRITE: func.func @forward(%arg0: tensor<1x1xi64>, %arg1: tensor<1xi64>, %arg2: tensor<1x1x1x128xf32>, %arg3: !cache) -> tensor<1x1x512xf32>
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
