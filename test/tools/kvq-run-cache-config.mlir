// kvq-run says which cache produced each result: the configuration the kvq
// pass resolved (given options, --bits, defaults), its effective bits and
// bytes, for generation and for perplexity, in the human output and --json.
// stories260K: dim 64, 8 heads, so head_dim 8 (KIVI's default group of 32
// does not divide it; the pass takes 8).
//
// RUN: kvq-run %models/stories260K/stories260K.bin --steps 4 --bits 3 --method "none,fp16,kivi{residual-length=4},kivi_sink{sinks=2},kvquant{refit-interval=0 pre-rope=true}" | FileCheck %s --check-prefix=GEN
// GEN: [none] Once upon a time
// GEN: cache: method=none element-type=f32; 32.00 effective bits, 655360 bytes
// GEN: [fp16] Once upon a time
// GEN: cache: method=fp16 key-bits=16 value-bits=16 pre-rope=false; 16.00 effective bits,
// GEN: [kivi{residual-length=4}] Once upon a time
// GEN: cache: method=kivi key-bits=3 value-bits=3 group-size=8 residual-length=4 residual-mode=sliding pre-rope=false;
// GEN: [kivi_sink{sinks=2}] Once upon a time
// GEN: cache: method=kivi_sink key-bits=3 value-bits=3 group-size=8 residual-length=32 residual-mode=sliding sinks=2 pre-rope=false;
// GEN: [kvquant{refit-interval=0 pre-rope=true}] Once upon a time
// GEN: cache: method=kvquant key-bits=3 value-bits=3 outlier-fraction=0.01 lloyd-iters=8 refit-interval=0 kvquant-sinks=1 pre-rope=true rope-style=interleaved;
//
// RUN: kvq-run %models/stories260K/stories260K.bin --steps 4 --method "kivi{bits=4},kvquant" --json > %t.gen.json
// RUN: FileCheck %s --check-prefix=GENJSON --input-file=%t.gen.json
// GENJSON: "prompt": "Once upon a time",
// GENJSON: "steps": 4,
// GENJSON: {"method": "kivi{bits=4}", "pass_options": "method=kivi bits=4", "cache": {"method": "kivi", "element_type": "f32", "key_bits": 4, "value_bits": 4, "group_size": 8, "residual_length": 32, "residual_mode": "sliding", "pre_rope": false}, "effective_bits": {{[0-9.]+}}, "cache_bytes": {{[1-9][0-9]*}}, "generated_tokens": 4, "text": "{{.+}}", "tokens_per_second":
// GENJSON: {"method": "kvquant", {{.*}}"cache": {"method": "kvquant", "element_type": "f32", "key_bits": 3, "value_bits": 3, "outlier_fraction": 0.01, "lloyd_iters": 8, "refit_interval": 128, "kvquant_sinks": 1, "pre_rope": false},
// RUN: %python -c "import json,sys; d=json.load(open(sys.argv[1])); assert len(d['results'])==2" %t.gen.json
//
// Perplexity: the same objects per row, and the list under the table.
// RUN: printf '1 403 407 261 378 430 261 505 343 378 263 49\n' > %t.ids
// RUN: kvq-run %models/stories260K/stories260K.bin --tokens %t.ids --prefill 4 --method "kivi_sink{bits=2 group-size=4}" --json | FileCheck %s --check-prefix=PPLJSON
// PPLJSON: {"method": "none", "pass_options": "", "cache": {"method": "none", "element_type": "f32"}, "effective_bits": 32.0,
// PPLJSON: {"method": "kivi_sink{bits=2 group-size=4}", {{.*}}"cache": {"method": "kivi_sink", "element_type": "f32", "key_bits": 2, "value_bits": 2, "group_size": 4, "residual_length": 32, "residual_mode": "sliding", "sinks": 5, "pre_rope": false},
// RUN: kvq-run %models/stories260K/stories260K.bin --tokens %t.ids --prefill 4 --method "kivi_sink{bits=2 group-size=4}" 2>/dev/null | FileCheck %s --check-prefix=PPL
// PPL: caches:
// PPL-NEXT: none: method=none element-type=f32
// PPL-NEXT: kivi_sink{bits=2 group-size=4}: method=kivi_sink key-bits=2 value-bits=2 group-size=4 residual-length=32 residual-mode=sliding sinks=5 pre-rope=false
