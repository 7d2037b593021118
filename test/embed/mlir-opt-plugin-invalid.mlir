// REQUIRES: plugins
// The dialect's verifier diagnostics, exactly as kvq-opt reports them
// (test/dialect/invalid.mlir), from a stock mlir-opt with the plugin.
// RUN: %mlir_opt %kvq_plugin_args %kvq_src_root/test/dialect/invalid.mlir \
// RUN:   -split-input-file -verify-diagnostics
