//===- Passes.td - kvq pass declarations ---------------------*- tablegen -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
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

// The options that set a #kvq.config, shared by every pass that writes one
// (passes/transforms/CacheConfigOptions.h reads them).
// Each option is a std::optional (kvq/passes/OptionalParser.h): not given,
// the base configuration's value stays, on the command line, in a pipeline
// string and in the C++ options structs alike. Methods and residual modes
// are spelled as the dialect spells them.
defvar KvqCacheConfigOptions = [
    Option<"method", "method", "std::optional<::mlir::kvq::Method>",
           /*default=*/"std::nullopt",
           "fp16, kivi, kivi_sink or kvquant (not given: keep the cache's; "
           "kvq-quantize-kv-cache: kivi)">,
    Option<"bits", "bits", "std::optional<int64_t>", /*default=*/"std::nullopt",
           "Code width of keys and values (2, 3, 4 or 8)">,
    Option<"keyBits", "key-bits", "std::optional<int64_t>",
           /*default=*/"std::nullopt", "Code width of keys (overrides bits)">,
    Option<"valueBits", "value-bits", "std::optional<int64_t>",
           /*default=*/"std::nullopt",
           "Code width of values (overrides bits)">,
    Option<"groupSize", "group-size", "std::optional<int64_t>",
           /*default=*/"std::nullopt",
           "KIVI group size G (must divide head_dim)">,
    Option<"residualLength", "residual-length", "std::optional<int64_t>",
           /*default=*/"std::nullopt", "KIVI fp16 residual window R (tokens)">,
    Option<"residualMode", "residual-mode",
           "std::optional<::mlir::kvq::ResidualMode>",
           /*default=*/"std::nullopt",
           "How KIVI keys leave the residual window: sliding (whole groups, "
           "the seed's rule) or block (R at a time, KIVI's code)">,
    Option<"sinks", "sinks", "std::optional<int64_t>",
           /*default=*/"std::nullopt",
           "kivi_sink: top-k key-norm tokens kept fp16 (n_sink_tokens)">,
    Option<"outlierFraction", "outlier-fraction", "std::optional<double>",
           /*default=*/"std::nullopt",
           "kvquant: fraction of outliers kept fp16, in [0, 1)">,
    Option<"lloydIters", "lloyd-iters", "std::optional<int64_t>",
           /*default=*/"std::nullopt", "kvquant: Lloyd-Max sweeps">,
    Option<"refitInterval", "refit-interval", "std::optional<int64_t>",
           /*default=*/"std::nullopt",
           "kvquant: refit key levels every N decode steps (0 = frozen)">,
    Option<"kvquantSinks", "kvquant-sinks", "std::optional<int64_t>",
           /*default=*/"std::nullopt",
           "kvquant: leading prefill tokens kept fp16 (kvquant_n_sink)">,
    Option<"kvquantGroupSize", "kvquant-group-size", "std::optional<int64_t>",
           /*default=*/"std::nullopt", "kvquant: storage block size">
  ];

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
  let options = KvqCacheConfigOptions;
  let dependentDialects = ["::mlir::kvq::KvqDialect"];
}

def KvqQuantizeKvCache : Pass<"kvq-quantize-kv-cache", "mlir::ModuleOp"> {
  let summary = "Find a model's KV cache and replace it with a !kvq.cache";
  let description = [{
    Finds, in each function, the KV cache a model graph keeps in plain
    tensors (function arguments of shape `[layers, context, kv_heads,
    head_dim]` stacked, or `[context, kv_heads, head_dim]` per layer, f16 or
    f32, written by `tensor.insert_slice` at a position `pos` and returned)
    and the causal attention that reads it back (`tensor.extract_slice` of
    positions `0 .. pos + n - 1`, scores by contraction with the queries,
    scaled by `1/sqrt(head_dim)`, a causal mask when `n > 1`, softmax as
    `linalg.softmax` or its max/exp/sum/div expansion, weighted sum of the
    values; query heads grouped onto KV heads by reshape or by broadcast).
    Each layer's write and attention become `kvq.cache_update` and
    `kvq.cache_attend` on one `!kvq.cache` argument that replaces the cache
    tensors in the signature (the cache results disappear). A cache held
    in memref arguments updated in place (a bufferized graph) is read in
    its tensor form; the adopted function takes the `!kvq.cache` for those
    buffers and keeps its other buffer arguments. Every adopted
    function first checks at run time that each layer holds exactly `pos`
    tokens (`cf.assert`): the runtime cache appends, so the host must write
    positions in order, as prefill-then-decode does. Three helper functions
    are added for the host: `@kv_cache_create`, `@kv_cache_destroy` and
    `@kv_cache_stats` (tokens, bytes, fp16 bytes, effective bits).

    A function where a cache-like pattern is found but cannot be proven
    equivalent is left unchanged, with a remark at the location of the
    offending op giving the reason (for example `not adopted: attention
    reads positions beyond the written prefix`).

    The cache configuration comes from the options, as in
    `--kvq-configure-caches` (method default `kivi`).

    With `pre-rope=true` the pass also looks for the RoPE of each cached
    key (KVQuant's pre-RoPE key quantization): the cache then receives the
    key *before* the rotation and the configuration records the rotation
    (`rope = <theta = ..., style = interleaved | half>`), so the runtime
    quantizes pre-RoPE keys and rotates them at their positions inside
    attention; queries keep their RoPE. The RoPE is proven, not guessed:
    the ops between a candidate pre-rotation tensor and the key are
    evaluated on probe inputs at several write positions (reshapes, slices
    of constant cos/sin tables, elementwise `linalg.generic` bodies), theta
    and the pairing are inferred, and every probe must agree with RoPE at
    positions `pos + t`. Where that fails for any layer, all keys stay
    post-RoPE and a remark says why.

    Example:

    ```
    kvq-import stories260K.bin | kvq-opt --kvq-quantize-kv-cache="method=kivi bits=2" --kvq-to-llvm
    ```
  }];
  let options = !listconcat(KvqCacheConfigOptions, [
    Option<"preRope", "pre-rope", "bool", /*default=*/"false",
           "store keys before their RoPE (proven in the graph) and rotate "
           "them inside attention">,
    Option<"maxContext", "max-context", "int64_t", /*default=*/"0",
           "adopt caches grown by tensor.concat (Hugging Face DynamicCache), "
           "which have no capacity in the graph, as caches of this many "
           "positions; the compiled step stops with an error past it "
           "(0: such caches are refused with a remark)">
  ]);
  let dependentDialects = ["::mlir::kvq::KvqDialect",
                           "::mlir::cf::ControlFlowDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::arith::ArithDialect"];
}

//===----------------------------------------------------------------------===//
// Conversions (kvq -> runtime calls)
//===----------------------------------------------------------------------===//

def ConvertKvqToRuntime : Pass<"convert-kvq-to-runtime", "mlir::ModuleOp"> {
  let summary = "Lower kvq ops to calls of the kvq runtime library";
  let description = [{
    Replaces every kvq op in memref form (run `--one-shot-bufferize` first)
    with a `func.call` of the runtime entry point that
    `runtime/include/kvq/entry_points.def` names for `target`, passing bare
    pointers and scalars exactly as `runtime/include/kvq/runtime.h` declares
    them. Result buffers are `memref.alloc`ed by the generated code; the
    runtime writes into them. `!kvq.cache` becomes an opaque `!llvm.ptr`,
    in function signatures too. Callees are declared privately on first use.

    `target=cpu` calls `kvq_*`; `target=metal` calls `kvq_metal_*`, passing
    the Metal context (from `kvq_metal_default_context`) to stateless
    kernels and creating caches with the Metal backend.

    Every status a runtime call returns goes through `kvq_check_status`,
    which prints `kvq: error: <op> (<symbol>) at <location>: <status>:
    <message>` and records it for `kvq_take_pending_status()` (the line
    for `kvq_pending_error()`). With `on-error=abort` (the default) a
    `cf.assert` then stops the program; with `on-error=report` execution
    continues, outputs of the failed call are unspecified, and the host
    reads the pending status.

    Example:

    ```
    kvq-opt --one-shot-bufferize="bufferize-function-boundaries" \
            --convert-kvq-to-runtime="target=cpu" graph.mlir
    ```

    Named pipelines (registered by `kvq-opt`, option `on-error` as above):

    - `--kvq-to-llvm`: `convert-elementwise-to-linalg` (tensor arith has no
      bufferization of its own), `one-shot-bufferize` with
      `bufferize-function-boundaries` and identity layouts at function
      boundaries (the runtime takes dense buffers), the upstream
      `buffer-deallocation-pipeline` (kvq results are allocations), this pass
      with `target=cpu`, `canonicalize`, `convert-linalg-to-kvq-matmul`
      (left out with the option `matmul-kernels=false`),
      `convert-linalg-to-loops`,
      `expand-strided-metadata`, `lower-affine`, `convert-scf-to-cf`,
      `convert-to-llvm`, `reconcile-unrealized-casts`, `canonicalize`.
    - `--kvq-to-metal`: the same up to and including this pass with
      `target=metal`, then `canonicalize`; the result calls `kvq_metal_*`.
  }];
  let options = [
    Option<"target", "target", "::mlir::kvq::RuntimeTarget",
           /*default=*/"::mlir::kvq::RuntimeTarget::CPU",
           "Runtime backend whose entry points are called",
           [{::mlir::kvq::runtimeTargetValues()}]>,
    Option<"onError", "on-error", "::mlir::kvq::OnRuntimeError",
           /*default=*/"::mlir::kvq::OnRuntimeError::Abort",
           "What generated code does after a failed runtime call",
           [{::mlir::kvq::onRuntimeErrorValues()}]>
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::cf::ControlFlowDialect",
    "::mlir::func::FuncDialect", "::mlir::LLVM::LLVMDialect",
    "::mlir::memref::MemRefDialect"
  ];
}

def ConvertLinalgToKvqMatmul
    : Pass<"convert-linalg-to-kvq-matmul", "mlir::ModuleOp"> {
  let summary = "Rewrite f32 matrix products on buffers into kvq_matmul calls";
  let description = [{
    Replaces every linalg contraction in memref form (run
    `--one-shot-bufferize` first) that is a dense layer with its weights
    stored [out][in] with one call of the runtime's `kvq_matmul`
    (`runtime/include/kvq/runtime.h`), which runs an AVX-512, AVX2, NEON or
    portable kernel chosen once at run time, on the runtime's parallel-for.
    The graph before this pass stays upstream MLIR; without it
    `convert-linalg-to-loops` makes the same ops scalar loops.

    Rewritten: a `linalg.generic` (or a named op such as `linalg.matmul`
    with transposed B, `linalg.matvec`) whose indexing maps make it
    y[m][n] += sum_k x[m][k] * w[n][k] or y[n] += sum_k w[n][k] * x[k],
    with no batch dimension and one reduction dimension; a body that is
    exactly `acc + x * w` (`arith.mulf`, `arith.addf`, either operand
    order), with w optionally widened by `arith.extf`; x and y f32, w f32,
    f16 or bf16; the reduction dimension innermost with unit stride in x
    and w, and n innermost with unit stride in y (other strides may be
    anything, static or dynamic); and y a buffer of its own (a view of a
    `memref.alloc` or `memref.alloca` that x and w do not view). Anything
    else is left as it was.

    Numerics: the call computes every dot product in `kvq_matmul`'s fixed
    order (32 partial sums with fused multiply-adds, then a pairwise tree)
    and adds it to y once, where the loops add the products to y one by
    one: a reassociation, so results can differ from the loops in the last
    bits, and are the same on every ISA and for any thread count.

    Every returned status goes through `kvq_check_status` as in
    `convert-kvq-to-runtime`, with the same `on-error` option.

    `--kvq-to-llvm` runs this pass after `convert-kvq-to-runtime` unless
    its option `matmul-kernels=false` is given.
  }];
  let options = [
    Option<"onError", "on-error", "::mlir::kvq::OnRuntimeError",
           /*default=*/"::mlir::kvq::OnRuntimeError::Abort",
           "What generated code does after a failed runtime call",
           [{::mlir::kvq::onRuntimeErrorValues()}]>
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::cf::ControlFlowDialect",
    "::mlir::func::FuncDialect", "::mlir::LLVM::LLVMDialect",
    "::mlir::memref::MemRefDialect"
  ];
}

#endif // KVQ_PASSES_TD
