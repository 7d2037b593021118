// REQUIRES: arm64
// stories260K compiled ahead of time with a KIVI 2-bit cache, for x86_64 and
// for arm64 (+neon), each linked with the runtime built for it: the same
// greedy tokens and the same logits, bit for bit (the arm64 build runs under
// qemu). The driver prefills "Once upon a time" and decodes 12 tokens.
// RUN: kvq-import %S/../../models/stories260K/stories260K.bin --prefill=5 \
// RUN:   | kvq-opt --kvq-quantize-kv-cache="method=kivi bits=2" --kvq-to-llvm \
// RUN:   | mlir-translate --mlir-to-llvmir -o %t.ll
// RUN: %host_cc -O2 %t.ll %S/Inputs/llama_driver.c %kvq_host_link -lm -o %t.x86
// RUN: %t.x86 %S/../../models/stories260K/stories260K.bin 12 > %t.x86.out
// RUN: llc -O2 -mtriple=aarch64-linux-gnu -mattr=+neon -filetype=obj %t.ll -o %t.arm64.o
// RUN: %arm64_cc %t.arm64.o %S/Inputs/llama_driver.c %kvq_arm64_link -o %t.arm64
// RUN: %arm64_run %t.arm64 %S/../../models/stories260K/stories260K.bin 12 > %t.arm64.out
// RUN: diff %t.x86.out %t.arm64.out
// RUN: FileCheck %s < %t.arm64.out

// The greedy continuation of "Once upon a time" is ", there was a little
// girl named Lily. She": ',' ' there' ' was' ' a' ' little' ' g' 'ir' 'l'
// ' named' ' Lily' '.' ' She' in models/stories260K/tok512.bin.
// CHECK:      token 432
// CHECK-NEXT: token 383
// CHECK-NEXT: token 286
// CHECK-NEXT: token 261
// CHECK-NEXT: token 376
// CHECK-NEXT: token 298
// CHECK-NEXT: token 315
// CHECK-NEXT: token 421
// CHECK-NEXT: token 395
// CHECK-NEXT: token 317
// CHECK-NEXT: token 426
// CHECK-NEXT: token 338
// CHECK: logit[0] {{-?0x}}
// CHECK: pending status: 0
