// REQUIRES: plugins
// A stock mlir-opt with KvqPlugin.so as dialect and pass plugin gives
// kvq-opt's output, byte for byte, for the lowering pipeline and for a model
// graph through the cache-finding pass.

// RUN: kvq-opt %kvq_src_root/examples/decoder_layer.mlir \
// RUN:   --pass-pipeline='builtin.module(kvq-configure-caches{method=kivi_sink bits=2 sinks=5},kvq-to-llvm)' > %t.kvq-opt.mlir
// RUN: %mlir_opt %kvq_plugin_args %kvq_src_root/examples/decoder_layer.mlir \
// RUN:   --pass-pipeline='builtin.module(kvq-configure-caches{method=kivi_sink bits=2 sinks=5},kvq-to-llvm)' > %t.mlir-opt.mlir
// RUN: diff %t.kvq-opt.mlir %t.mlir-opt.mlir
// RUN: FileCheck %s --check-prefix=LLVM < %t.mlir-opt.mlir
// LLVM: llvm.call @kvq_cache_create
// LLVM: llvm.call @kvq_cache_attend

// RUN: kvq-import %models/stories260K/stories260K.bin --prefill=4 > %t.graph.mlir
// RUN: kvq-opt %t.graph.mlir --pass-pipeline='builtin.module(kvq-quantize-kv-cache{method=kivi bits=2},kvq-to-llvm)' > %t.q.kvq-opt.mlir
// RUN: %mlir_opt %kvq_plugin_args %t.graph.mlir --pass-pipeline='builtin.module(kvq-quantize-kv-cache{method=kivi bits=2},kvq-to-llvm)' > %t.q.mlir-opt.mlir
// RUN: diff %t.q.kvq-opt.mlir %t.q.mlir-opt.mlir
// RUN: FileCheck %s --check-prefix=QUANT < %t.q.mlir-opt.mlir
// QUANT: llvm.call @kvq_cache_update
// QUANT: llvm.call @kvq_cache_attend

// Without the plugin, mlir-opt knows neither the dialect nor the passes.
// RUN: not %mlir_opt %kvq_src_root/examples/decoder_layer.mlir 2>&1 | FileCheck %s --check-prefix=NODIALECT
// NODIALECT: kvq
