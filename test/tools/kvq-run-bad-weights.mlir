// kvq-run on checkpoints that are wrong in their weights: each run ends
// with one line on stderr naming the problem and exit status 2, never a
// crash. Offsets into stories260K (dim 64, 5 layers, kv_dim 32, vocab 512)
// are counted by hand from llama2.c's layout: wk starts at float
// 512*64 + 5*64 + 5*64*64 = 53568, one layer of it is 32*64 = 2048 floats.
//
// A NaN weight is refused when the checkpoint is opened:
// RUN: %python %S/Inputs/llama2c_patch.py %models/stories260K/stories260K.bin %t.nan.bin --set 57669 nan
// RUN: not kvq-run %t.nan.bin --tokenizer %models/stories260K/tok512.bin --steps 4 2> %t.nan.err
// RUN: FileCheck %s --check-prefix=NAN --input-file=%t.nan.err
// NAN-NOT: {{.}}
// NAN: kvq-run: error: {{.*}}.nan.bin: weight wk of layer 2, element 5 is NaN (every weight must be finite)
// NAN-NOT: {{.}}
//
// An infinite one too, by kvq-import as well:
// RUN: %python %S/Inputs/llama2c_patch.py %models/stories260K/stories260K.bin %t.inf.bin --set 53568 -inf
// RUN: not kvq-import %t.inf.bin 2>&1 | FileCheck %s --check-prefix=INF
// INF-NOT: {{.}}
// INF: kvq-import: error: {{.*}}.inf.bin: weight wk of layer 0, element 0 is infinite (every weight must be finite)
// INF-NOT: {{.}}
//
// Bytes after the weights the header describes:
// RUN: %python %S/Inputs/llama2c_patch.py %models/stories260K/stories260K.bin %t.long.bin --append 8
// RUN: not kvq-run %t.long.bin --tokenizer %models/stories260K/tok512.bin --steps 4 2>&1 | FileCheck %s --check-prefix=LONG
// LONG-NOT: {{.}}
// LONG: kvq-run: error: {{.*}}.long.bin: 1056548 bytes, but its header describes exactly 1056540: 8 bytes follow the weights
// LONG-NOT: {{.}}
//
// Finite weights whose keys leave the fp16 range (layer 3's wk all 1e30):
// the runtime refuses the keys inside the compiled graph, which reports it
// (on-error=report) instead of aborting.
// RUN: %python %S/Inputs/llama2c_patch.py %models/stories260K/stories260K.bin %t.big.bin --fill 59712 2048 1e30
// RUN: sh -c 'kvq-run %t.big.bin --tokenizer %models/stories260K/tok512.bin --method kivi --steps 4 2> %t.big.err; echo "status $?"' | FileCheck %s --check-prefix=BIG-OUT
// RUN: FileCheck %s --check-prefix=BIG --input-file=%t.big.err
// BIG-OUT: [kivi] Once upon a time
// BIG-OUT-NEXT: status 2
// BIG-NOT: {{.}}
// BIG: kvq-run: error: kivi: @prefill at position 0: kvq.cache_update (kvq_cache_update) at {{.*}}: non-finite input: kvq_cache_update: layer 3: key element {{[0-9]+}} is NaN, infinite or outside the fp16 range
// BIG-NOT: {{.}}
//
// The same in perplexity mode (one document of 20 token ids):
// RUN: echo "1 10 20 30 40 50 60 70 80 90 100 110 120 130 140 150 160 170 180 190" > %t.ids
// RUN: not kvq-run %t.big.bin --tokenizer %models/stories260K/tok512.bin --method fp16 --perplexity %t.ids --prefill 16 --json 2> %t.ppl.err
// RUN: FileCheck %s --check-prefix=PPL --input-file=%t.ppl.err
// PPL-NOT: {{.}}
// PPL: kvq-run: error: fp16: @prefill at position 0: {{.*}}layer 3: key element 0 is NaN, infinite or outside the fp16 range
// PPL-NOT: {{.}}
//
// Weights so large (wk and the following weights all 3e38) that the f32
// arithmetic overflows: with no cache to refuse the keys (--method none) the
// logits turn non-finite, which is an error, never a NaN perplexity or
// text sampled from NaN with status 0.
// RUN: %python %S/Inputs/llama2c_patch.py %models/stories260K/stories260K.bin %t.huge.bin --fill 53568 40000 3e38
// RUN: not kvq-run %t.huge.bin --tokenizer %models/stories260K/tok512.bin --method none --perplexity %t.ids --prefill 16 2> %t.huge.err
// RUN: FileCheck %s --check-prefix=HUGE --input-file=%t.huge.err
// RUN: not kvq-run %t.huge.bin --tokenizer %models/stories260K/tok512.bin --method none --steps 4 2>&1 >/dev/null | FileCheck %s --check-prefix=HUGE
// HUGE-NOT: {{.}}
// HUGE: kvq-run: error: none: the logits at position {{[0-9]+}} are not finite (logit {{[0-9]+}}): the weights overflow f32 arithmetic
// HUGE-NOT: {{.}}
