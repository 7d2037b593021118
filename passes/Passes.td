//===- Passes.td - kvq pass declarations ---------------------*- tablegen -*-===//
//
// Transforms (kvq -> kvq) first, then conversions (kvq -> runtime calls).
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_PASSES_TD
#define KVQ_PASSES_TD

include "mlir/Pass/PassBase.td"

//===----------------------------------------------------------------------===//
// Transforms (kvq -> kvq)
//===----------------------------------------------------------------------===//

def KvqConfigureCaches : Pass<"kvq-configure-caches", "mlir::ModuleOp"> {
  let summary = "Set the quantization method and parameters of every !kvq.cache";
  let description = [{
    Rewrites the `#kvq.config` of every `!kvq.cache` type in the module —
    function signatures, block arguments and op results alike — so one model
    graph can be compiled for `fp16`, `kivi`, `kivi_sink` or `kvquant`
    without editing it.

    With `method`, each configuration restarts from that method's seed
    defaults (bits 2 for KIVI, 3 for KVQuant); without it, the existing
    configuration is kept. Every other option given then overrides one
    parameter; options left at -1 (or empty) keep the value. The result is
    verified: an option that makes a cache invalid (for example a group
    size that does not divide head_dim) fails the pass with the verifier's
    message.

    Example:

    ```
    kvq-opt --kvq-configure-caches="method=kivi_sink bits=2 sinks=5" graph.mlir
    ```
  }];
  let options = [
    Option<"method", "method", "std::string", /*default=*/"\"\"",
           "fp16, kivi, kivi_sink or kvquant (empty: keep)">,
    Option<"bits", "bits", "int64_t", /*default=*/"-1",
           "Code width of keys and values (2, 3, 4 or 8)">,
    Option<"keyBits", "key-bits", "int64_t", /*default=*/"-1",
           "Code width of keys (overrides bits)">,
    Option<"valueBits", "value-bits", "int64_t", /*default=*/"-1",
           "Code width of values (overrides bits)">,
    Option<"groupSize", "group-size", "int64_t", /*default=*/"-1",
           "KIVI group size G (must divide head_dim)">,
    Option<"residualLength", "residual-length", "int64_t", /*default=*/"-1",
           "KIVI fp16 residual window R (tokens)">,
    Option<"residualMode", "residual-mode", "std::string", /*default=*/"\"\"",
           "sliding or block">,
    Option<"sinks", "sinks", "int64_t", /*default=*/"-1",
           "kivi_sink: top-k key-norm tokens kept fp16 (n_sink_tokens)">,
    Option<"outlierFraction", "outlier-fraction", "double", /*default=*/"-1.0",
           "kvquant: fraction of outliers kept fp16, in [0, 1)">,
    Option<"lloydIters", "lloyd-iters", "int64_t", /*default=*/"-1",
           "kvquant: Lloyd-Max sweeps">,
    Option<"refitInterval", "refit-interval", "int64_t", /*default=*/"-1",
           "kvquant: refit key levels every N decode steps (0 = frozen)">,
    Option<"kvquantSinks", "kvquant-sinks", "int64_t", /*default=*/"-1",
           "kvquant: leading prefill tokens kept fp16 (kvquant_n_sink)">,
    Option<"kvquantGroupSize", "kvquant-group-size", "int64_t",
           /*default=*/"-1", "kvquant: storage block size">
  ];
  let dependentDialects = ["::mlir::kvq::KvqDialect"];
}

#endif // KVQ_PASSES_TD
