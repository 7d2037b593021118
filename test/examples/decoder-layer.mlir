// The README's example graph stays valid and configurable for every method.
// RUN: kvq-opt %kvq_src_root/examples/decoder_layer.mlir | FileCheck %s --check-prefix=FP16
// RUN: kvq-opt %kvq_src_root/examples/decoder_layer.mlir --kvq-configure-caches=method=kivi | FileCheck %s --check-prefix=KIVI
// RUN: kvq-opt %kvq_src_root/examples/decoder_layer.mlir --kvq-configure-caches=method=kivi_sink | FileCheck %s --check-prefix=SINK
// RUN: kvq-opt %kvq_src_root/examples/decoder_layer.mlir --kvq-configure-caches=method=kvquant | FileCheck %s --check-prefix=NUQ

// FP16: config = <method = fp16, key_bits = 16, value_bits = 16>
// FP16: kvq.cache_update %{{.*}}[0]
// FP16: kvq.cache_attend %{{.*}}[0]
// KIVI: config = <method = kivi, key_bits = 2, value_bits = 2>
// SINK: config = <method = kivi_sink, key_bits = 2, value_bits = 2>
// NUQ: config = <method = kvquant, key_bits = 3, value_bits = 3>
