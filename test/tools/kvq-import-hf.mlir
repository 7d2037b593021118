// A Hugging Face folder converted from stories260K by
// scripts/llama2c_to_hf.py (q_proj / k_proj rows permuted for the
// half-split RoPE, as Hugging Face's conversion does).
// RUN: rm -rf %t.hf %t.bad
// RUN: %python %kvq_src_root/scripts/llama2c_to_hf.py %models/stories260K/stories260K.bin %t.hf --shards 2
//
// kvq-import emits the half-split RoPE (channel c with c + head_dim/2), and
// the pre-RoPE rewrite proves it in every layer of both functions: the
// cache records style = half and only the queries' rotations remain.
// RUN: kvq-import %t.hf --prefill=4 | kvq-opt --kvq-quantize-kv-cache="method=kvquant pre-rope=true" 2>&1 \
// RUN:   | FileCheck %s --implicit-check-not=remark
// CHECK: !cache = !kvq.cache<layers = 5, kv_heads = 4, head_dim = 8, element_type = f32, config = <method = kvquant, key_bits = 3, value_bits = 3, group_size = 8, rope = <theta = 1.000000e+04, style = half>>>
// CHECK-COUNT-10: math.cos
// CHECK-NOT: math.cos
//
// A folder kvq cannot read is one line naming what it refuses.
// RUN: cp -r %t.hf %t.bad
// RUN: sed -i 's/LlamaForCausalLM/GemmaForCausalLM/' %t.bad/config.json
// RUN: not kvq-import %t.bad 2>&1 | FileCheck %s --check-prefix=ARCH
// ARCH-NOT: {{.}}
// ARCH: kvq-import: error: {{.*}}.bad/config.json: architecture 'GemmaForCausalLM' is not supported (LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM)
// ARCH-NOT: {{.}}
// RUN: sed -i 's/GemmaForCausalLM/LlamaForCausalLM/; s/"hidden_act"/"rope_parameters": {}, "hidden_act"/' %t.bad/config.json
// RUN: not kvq-run %t.bad --steps 1 2>&1 | FileCheck %s --check-prefix=FIELD
// FIELD-NOT: {{.}}
// FIELD: kvq-run: error: {{.*}}.bad/config.json: field 'rope_parameters' is not supported (kvq does not know how it changes the model)
// FIELD-NOT: {{.}}
// RUN: rm %t.bad/model-00002-of-00002.safetensors
// RUN: sed -i 's/"rope_parameters": {}, //' %t.bad/config.json
// RUN: not kvq-run %t.bad --steps 1 2>&1 | FileCheck %s --check-prefix=SHARD
// SHARD-NOT: {{.}}
// SHARD: kvq-run: error: cannot open '{{.*}}.bad/model-00002-of-00002.safetensors': No such file or directory
// SHARD-NOT: {{.}}
