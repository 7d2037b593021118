//===- KvqOps.td - kvq operations ----------------------------*- tablegen -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Primitive quantization ops on ranked tensors and the KV-cache ops.
// Shape rules shared by several ops live in KvqOps.cpp (verifyOneKind,
// verifyBits, verifyShapeIs, verifyLayer, verifyKVTensor, ...).
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_OPS_TD
#define KVQ_OPS_TD

include "KvqTypes.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

//===----------------------------------------------------------------------===//
// Operand and attribute constraints
//===----------------------------------------------------------------------===//

// Every primitive op works on ranked tensors (model graphs) and, after
// bufferization, on memrefs; one op is all tensors or all memrefs.
class Kvq_Array<list<Type> elements, string what>
    : AnyTypeOf<[RankedTensorOf<elements>, MemRefOf<elements>],
                "ranked tensor or memref of " # what>;
class Kvq_Vector<list<Type> elements, string what>
    : AnyTypeOf<[RankedTensorOf<elements, [HasAnyRankOfPred<[1]>]>,
                 MemRefRankOf<elements, [1]>],
                "1-D ranked tensor or memref of " # what>;

def Kvq_FloatTensor : Kvq_Array<[F16, F32], "f16 or f32">;
def Kvq_CodeTensor : Kvq_Array<[I8], "i8 codes">;
def Kvq_F16Tensor : Kvq_Array<[F16], "f16">;
def Kvq_MaskTensor : Kvq_Array<[I1], "i1">;
def Kvq_F32Tensor : Kvq_Array<[F32], "f32">;
def Kvq_F32Vector : Kvq_Vector<[F32], "f32">;
def Kvq_I64Vector : Kvq_Vector<[I64], "i64">;
def Kvq_BufferEffects : DeclareOpInterfaceMethods<MemoryEffectsOpInterface>;
def Kvq_GroupSizeAttr : ConfinedAttr<I64Attr, [IntPositive]>;
def Kvq_LayerAttr : ConfinedAttr<I64Attr, [IntNonNegative]>;

//===----------------------------------------------------------------------===//
// Uniform group quantization (KIVI)
//===----------------------------------------------------------------------===//

def Kvq_GroupQuantOp : Kvq_Op<"group_quant", [Kvq_BufferEffects]> {
  let summary = "uniform min/max quantization in fixed-size groups";
  let description = [{
    Splits `input` into groups of `group` elements along `axis` and maps each
    group to `bits`-wide codes with one fp16 scale and zero point:
    `scale = (max - min) / (2^bits - 1)`, `zero = min`,
    `code = clamp(rint((x - zero) / scale), 0, 2^bits - 1)` (round half to
    even). A constant group stores scale 0 and codes 0. `per_token` groups run
    along the last dimension, `per_channel` groups along dimension 0, so
    `scale` and `zero_point` have the input's shape with that dimension
    divided by `group`. Codes are unpacked, one `i8` per element.

    The optional `exclude` mask (same shape, `i1`) leaves elements out of
    their group's min/max: this is KIVI-Sink's calibration exclusion.

    Example:

    ```mlir
    %codes, %scale, %zero = kvq.group_quant %v axis per_token group 32 bits 2
        : tensor<128x8x128xf16> -> tensor<128x8x128xi8>, tensor<128x8x4xf16>,
          tensor<128x8x4xf16>
    ```
  }];
  let arguments = (ins
    Kvq_FloatTensor:$input,
    Kvq_QuantAxis:$axis,
    Kvq_GroupSizeAttr:$group,
    I64Attr:$bits,
    Optional<Kvq_MaskTensor>:$exclude
  );
  let results = (outs
    Kvq_CodeTensor:$codes,
    Kvq_F16Tensor:$scale,
    Kvq_F16Tensor:$zero_point
  );
  let assemblyFormat = [{
    $input `axis` $axis `group` $group `bits` $bits
    (`exclude` `(` $exclude^ `:` type($exclude) `)`)? attr-dict
    `:` type($input) `->` type($codes) `,` type($scale) `,` type($zero_point)
  }];
  let hasVerifier = 1;
}

def Kvq_GroupDequantOp : Kvq_Op<"group_dequant", [Kvq_BufferEffects]> {
  let summary = "inverse of kvq.group_quant";
  let description = [{
    Reconstructs `code * scale + zero_point` for each element, with the
    grouping of `kvq.group_quant`. Quantization is lossy:
    `group_dequant(group_quant(x))` is not `x`, and kvq never folds it.

    Example:

    ```mlir
    %x = kvq.group_dequant %codes, %scale, %zero axis per_token group 32 bits 2
        : tensor<128x8x128xi8>, tensor<128x8x4xf16>, tensor<128x8x4xf16>
          -> tensor<128x8x128xf16>
    ```
  }];
  let arguments = (ins
    Kvq_CodeTensor:$codes,
    Kvq_F16Tensor:$scale,
    Kvq_F16Tensor:$zero_point,
    Kvq_QuantAxis:$axis,
    Kvq_GroupSizeAttr:$group,
    I64Attr:$bits
  );
  let results = (outs Kvq_FloatTensor:$output);
  let assemblyFormat = [{
    $codes `,` $scale `,` $zero_point `axis` $axis `group` $group `bits` $bits
    attr-dict `:` type($codes) `,` type($scale) `,` type($zero_point)
    `->` type($output)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Non-uniform quantization (KVQuant-NUQ)
//===----------------------------------------------------------------------===//

def Kvq_NuqFitOp : Kvq_Op<"nuq_fit", [Kvq_BufferEffects]> {
  let summary = "fit Lloyd-Max non-uniform levels per vector";
  let description = [{
    For each vector (a group of `group` elements along `axis`), fits `2^bits`
    ascending fp16 levels by 1-D Lloyd-Max: levels start at the quantiles
    `(i + 0.5) / L` of the vector's eligible elements (linear interpolation),
    then `iters` sweeps of assign-to-nearest (ties to the lower level) and
    move-to-mean (an empty level stays). Elements marked in `exclude`
    (outliers, sink tokens) are left out of the fit. `levels` has the scale
    shape of `kvq.group_quant` with a trailing dimension of `2^bits`.

    Example (keys per channel, one table per channel over 128 tokens):

    ```mlir
    %levels = kvq.nuq_fit %k axis per_channel group 128 bits 3 iters 8
        : tensor<128x8x64xf16> -> tensor<1x8x64x8xf16>
    ```
  }];
  let arguments = (ins
    Kvq_FloatTensor:$input,
    Kvq_QuantAxis:$axis,
    Kvq_GroupSizeAttr:$group,
    I64Attr:$bits,
    ConfinedAttr<I64Attr, [IntNonNegative]>:$iters,
    Optional<Kvq_MaskTensor>:$exclude
  );
  let results = (outs Kvq_F16Tensor:$levels);
  let assemblyFormat = [{
    $input `axis` $axis `group` $group `bits` $bits `iters` $iters
    (`exclude` `(` $exclude^ `:` type($exclude) `)`)? attr-dict
    `:` type($input) `->` type($levels)
  }];
  let hasVerifier = 1;
}

def Kvq_NuqQuantOp : Kvq_Op<"nuq_quant", [Kvq_BufferEffects]> {
  let summary = "map each element to its nearest non-uniform level";
  let description = [{
    Code of the nearest level of the element's vector (ties to the lower
    level), one `i8` per element.

    Example:

    ```mlir
    %codes = kvq.nuq_quant %k, %levels axis per_channel group 128 bits 3
        : tensor<128x8x64xf16>, tensor<1x8x64x8xf16> -> tensor<128x8x64xi8>
    ```
  }];
  let arguments = (ins
    Kvq_FloatTensor:$input,
    Kvq_F16Tensor:$levels,
    Kvq_QuantAxis:$axis,
    Kvq_GroupSizeAttr:$group,
    I64Attr:$bits
  );
  let results = (outs Kvq_CodeTensor:$codes);
  let assemblyFormat = [{
    $input `,` $levels `axis` $axis `group` $group `bits` $bits attr-dict
    `:` type($input) `,` type($levels) `->` type($codes)
  }];
  let hasVerifier = 1;
}

def Kvq_NuqDequantOp : Kvq_Op<"nuq_dequant", [Kvq_BufferEffects]> {
  let summary = "non-uniform dequantization by table lookup";
  let description = [{
    `output = levels[vector][code]` for each element.

    Example:

    ```mlir
    %k2 = kvq.nuq_dequant %codes, %levels axis per_channel group 128 bits 3
        : tensor<128x8x64xi8>, tensor<1x8x64x8xf16> -> tensor<128x8x64xf32>
    ```
  }];
  let arguments = (ins
    Kvq_CodeTensor:$codes,
    Kvq_F16Tensor:$levels,
    Kvq_QuantAxis:$axis,
    Kvq_GroupSizeAttr:$group,
    I64Attr:$bits
  );
  let results = (outs Kvq_FloatTensor:$output);
  let assemblyFormat = [{
    $codes `,` $levels `axis` $axis `group` $group `bits` $bits attr-dict
    `:` type($codes) `,` type($levels) `->` type($output)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Dense-and-sparse outliers
//===----------------------------------------------------------------------===//

def Kvq_OutlierSplitOp : Kvq_Op<"outlier_split", [Kvq_BufferEffects]> {
  let summary = "rank-based dense-and-sparse outlier selection";
  let description = [{
    For each vector (a group of `group` elements along `axis`) with `n`
    eligible elements (not in `exclude`), marks exactly
    `k = ceil(fraction * n)` elements with the largest `|x|` in `mask`, ties
    to the earlier index: selection is by rank, so ties never over-select.
    `threshold` receives each vector's k-th largest `|x|` (+inf when k = 0):
    the value that `kvq.outlier_screen` compares decode keys against.

    Example (one 1% outlier set per key channel over 128 tokens):

    ```mlir
    %mask, %thr = kvq.outlier_split %k axis per_channel group 128 fraction 0.01
        : tensor<128x8x64xf16> -> tensor<128x8x64xi1>, tensor<1x8x64xf32>
    ```
  }];
  let arguments = (ins
    Kvq_FloatTensor:$input,
    Kvq_QuantAxis:$axis,
    Kvq_GroupSizeAttr:$group,
    F64Attr:$fraction,
    Optional<Kvq_MaskTensor>:$exclude
  );
  let results = (outs Kvq_MaskTensor:$mask, Kvq_F32Tensor:$threshold);
  let assemblyFormat = [{
    $input `axis` $axis `group` $group `fraction` $fraction
    (`exclude` `(` $exclude^ `:` type($exclude) `)`)? attr-dict
    `:` type($input) `->` type($mask) `,` type($threshold)
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Kvq_OutlierScreenOp : Kvq_Op<"outlier_screen", [Kvq_BufferEffects]> {
  let summary = "screen elements against frozen per-channel thresholds";
  let description = [{
    The decode form of `kvq.outlier_split`: a single decode token has no
    top-k of its own, so each element is an outlier iff
    `|x| >= threshold[channel]`, with the per-channel thresholds frozen at
    prefill. `threshold` has the input's shape without dimension 0.

    Example:

    ```mlir
    %mask = kvq.outlier_screen %k_new above %thr
        : tensor<1x8x64xf16>, tensor<8x64xf32> -> tensor<1x8x64xi1>
    ```
  }];
  let arguments = (ins Kvq_FloatTensor:$input, Kvq_F32Tensor:$threshold);
  let results = (outs Kvq_MaskTensor:$mask);
  let assemblyFormat = [{
    $input `above` $threshold attr-dict `:` type($input) `,` type($threshold)
    `->` type($mask)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Attention sinks
//===----------------------------------------------------------------------===//

def Kvq_KeyNormOp : Kvq_Op<"key_norm", [Kvq_BufferEffects]> {
  let summary = "per-token key L2 norm, averaged over KV heads";
  let description = [{
    `norms[t] = mean over heads h of ||keys[t, h, :]||_2`: the cache-observable
    sink signal of KIVI-Sink.

    Example:

    ```mlir
    %norms = kvq.key_norm %k : tensor<128x8x64xf16> -> tensor<128xf32>
    ```
  }];
  let arguments = (ins Kvq_FloatTensor:$keys);
  let results = (outs Kvq_F32Vector:$norms);
  let assemblyFormat = "$keys attr-dict `:` type($keys) `->` type($norms)";
  let hasVerifier = 1;
}

def Kvq_SinkSelectOp : Kvq_Op<"sink_select", [Kvq_BufferEffects]> {
  let summary = "top-k token positions by key norm";
  let description = [{
    The positions of the `count` largest norms, ties to the earlier
    position, in ascending order. `count` may not exceed the number of
    tokens.

    Example:

    ```mlir
    %sinks = kvq.sink_select %norms count 5 : tensor<128xf32> -> tensor<5xi64>
    ```
  }];
  let arguments = (ins
    Kvq_F32Vector:$norms,
    ConfinedAttr<I64Attr, [IntNonNegative]>:$count
  );
  let results = (outs Kvq_I64Vector:$positions);
  let assemblyFormat = [{
    $norms `count` $count attr-dict `:` type($norms) `->` type($positions)
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Cache ops
//===----------------------------------------------------------------------===//

def Kvq_CacheCreateOp : Kvq_Op<"cache_create"> {
  let summary = "create an empty quantized KV cache";
  let description = [{
    Allocates an empty cache with the shape and configuration of its type.
    Free it with `kvq.cache_destroy`.

    Example:

    ```mlir
    %cache = kvq.cache_create : !kvq.cache<layers = 2, kv_heads = 8,
        head_dim = 64, element_type = f16,
        config = <method = kivi, key_bits = 2, value_bits = 2>>
    ```
  }];
  let results = (outs Res<Kvq_CacheType, "", [MemAlloc]>:$cache);
  let assemblyFormat = "attr-dict `:` type($cache)";
}

def Kvq_CacheDestroyOp : Kvq_Op<"cache_destroy"> {
  let summary = "free a quantized KV cache";
  let description = [{
    Example:

    ```mlir
    kvq.cache_destroy %cache : !kvq.cache<layers = 2, kv_heads = 8,
        head_dim = 64, element_type = f16,
        config = <method = kivi, key_bits = 2, value_bits = 2>>
    ```
  }];
  let arguments = (ins Arg<Kvq_CacheType, "", [MemFree]>:$cache);
  let assemblyFormat = "$cache attr-dict `:` type($cache)";
}

def Kvq_CacheUpdateOp : Kvq_Op<"cache_update", [Kvq_BufferEffects]> {
  let summary = "append K/V tokens to a layer, optionally fetching it";
  let description = [{
    Appends `keys` and `values` (`[tokens, kv_heads, head_dim]` of the
    cache's element type) to layer `layer`. The first update of a layer is
    its prefill; later ones are decode steps. With result types, the op also
    returns the layer's whole dequantized K and V after the update
    (update-and-fetch), `[cached tokens, kv_heads, head_dim]`.

    Example:

    ```mlir
    kvq.cache_update %cache[0], %k, %v : !cache, tensor<1x8x64xf16>,
        tensor<1x8x64xf16>
    %all_k, %all_v = kvq.cache_update %cache[1], %k, %v : !cache,
        tensor<1x8x64xf16>, tensor<1x8x64xf16>
        -> tensor<?x8x64xf16>, tensor<?x8x64xf16>
    ```
  }];
  let arguments = (ins
    Kvq_CacheType:$cache,
    Kvq_LayerAttr:$layer,
    Kvq_FloatTensor:$keys,
    Kvq_FloatTensor:$values
  );
  let results = (outs Variadic<Kvq_FloatTensor>:$fetched);
  let assemblyFormat = [{
    $cache `[` $layer `]` `,` $keys `,` $values attr-dict `:` type($cache) `,`
    type($keys) `,` type($values) (`->` type($fetched)^)?
  }];
  let hasVerifier = 1;
}

def Kvq_CacheAttendOp : Kvq_Op<"cache_attend", [Kvq_BufferEffects]> {
  let summary = "causal attention straight over the quantized cache";
  let description = [{
    `softmax(q kᵀ / sqrt(head_dim)) v` for `queries` `[steps, q_heads,
    head_dim]` (f32) over layer `layer`. `q_heads` is a multiple of the
    cache's `kv_heads` (grouped-query attention: query head `h` reads KV head
    `h / (q_heads / kv_heads)`). Query step `i` sits at position
    `length - steps + i` and attends to positions up to its own.

    Example:

    ```mlir
    %o = kvq.cache_attend %cache[0], %q : !cache, tensor<1x32x64xf32>
        -> tensor<1x32x64xf32>
    ```
  }];
  let arguments = (ins
    Kvq_CacheType:$cache,
    Kvq_LayerAttr:$layer,
    Kvq_F32Tensor:$queries
  );
  let results = (outs Kvq_F32Tensor:$output);
  let assemblyFormat = [{
    $cache `[` $layer `]` `,` $queries attr-dict `:` type($cache) `,`
    type($queries) `->` type($output)
  }];
  let hasVerifier = 1;
}

def Kvq_CacheTruncateOp : Kvq_Op<"cache_truncate"> {
  let summary = "keep only the first n_tokens tokens of every layer";
  let description = [{
    Afterwards every layer holds exactly its first `n_tokens` tokens
    (layers holding fewer are unchanged): bit for bit what a fresh cache
    would hold after the same updates restricted to those tokens, e.g. to
    roll back rejected speculative tokens or to rewind a shared prompt.
    `n_tokens` is an `i64` value; a negative one is an error (a constant
    one is rejected by the verifier). A cut that drops only tokens still
    held fp16 in the residual window is always exact; a deeper cut the
    method cannot make exactly is refused by the runtime
    (`kvq_cache_truncate`, `KVQ_ERR_NOT_EXACT`, docs/RUNTIME.md) and, like
    every runtime error, caught by the status check of the lowering.

    Example:

    ```mlir
    %n = arith.constant 12 : i64
    kvq.cache_truncate %cache, %n : !cache
    ```
  }];
  let arguments = (ins
    Arg<Kvq_CacheType, "", [MemRead, MemWrite]>:$cache,
    I64:$n_tokens
  );
  let assemblyFormat = "$cache `,` $n_tokens attr-dict `:` type($cache)";
  let hasVerifier = 1;
}

def Kvq_CacheStatsOp : Kvq_Op<"cache_stats"> {
  let summary = "byte accounting of a cache or one of its layers";
  let description = [{
    Returns the cached tokens, the bytes the cache really holds (codes,
    scales and zeros, level tables, outliers, sink and residual rows), the
    bytes an fp16 cache would hold for the same tokens, and the effective
    bits per cached element. Without `[layer]` it covers every layer.

    Example:

    ```mlir
    %tokens, %bytes, %fp16_bytes, %bits = kvq.cache_stats %cache : !cache
    ```
  }];
  let arguments = (ins
    Arg<Kvq_CacheType, "", [MemRead]>:$cache,
    OptionalAttr<Kvq_LayerAttr>:$layer
  );
  let results = (outs I64:$tokens, I64:$total_bytes, I64:$fp16_bytes,
                      F64:$effective_bits);
  let assemblyFormat = [{
    $cache (`[` $layer^ `]`)? attr-dict `:` type($cache)
  }];
  let hasVerifier = 1;
}

#endif // KVQ_OPS_TD
