//===- KvqAttrs.td - kvq enums and attributes ----------------*- tablegen -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The quantization axis, the method, the residual mode and the cache
// configuration attribute that carries every parameter of the seeds.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_ATTRS_TD
#define KVQ_ATTRS_TD

include "KvqDialect.td"
include "mlir/IR/EnumAttr.td"

//===----------------------------------------------------------------------===//
// Enums
//===----------------------------------------------------------------------===//

def Kvq_QuantAxis : I32EnumAttr<"QuantAxis",
    "the dimension a quantization group runs along", [
      I32EnumAttrCase<"PerToken", 0, "per_token">,
      I32EnumAttrCase<"PerChannel", 1, "per_channel">]> {
  let cppNamespace = "::mlir::kvq";
  let description = [{
    `per_token`: groups of consecutive elements of the last dimension (one
    token). `per_channel`: groups of consecutive tokens (dimension 0) of one
    channel.
  }];
}

def Kvq_Method : I32EnumAttr<"Method", "KV-cache quantization method", [
      I32EnumAttrCase<"Fp16", 0, "fp16">,
      I32EnumAttrCase<"Kivi", 1, "kivi">,
      I32EnumAttrCase<"KiviSink", 2, "kivi_sink">,
      I32EnumAttrCase<"KVQuant", 3, "kvquant">]> {
  let cppNamespace = "::mlir::kvq";
  let genSpecializedAttr = 0;
}

def Kvq_ResidualMode : I32EnumAttr<"ResidualMode",
    "how KIVI keys leave the fp16 residual window", [
      I32EnumAttrCase<"Sliding", 0, "sliding">,
      I32EnumAttrCase<"Block", 1, "block">]> {
  let cppNamespace = "::mlir::kvq";
  let genSpecializedAttr = 0;
}

// Values are the runtime's kvq_rope_style (0 is "no RoPE": an absent
// `rope` parameter); dialect/KvqAttrs.cpp static_asserts that they agree,
// as for Kvq_QuantAxis, Kvq_Method and Kvq_ResidualMode.
def Kvq_RopeStyle : I32EnumAttr<"RopeStyle",
    "which channels of a head RoPE rotates together", [
      I32EnumAttrCase<"Interleaved", 1, "interleaved">,
      I32EnumAttrCase<"Half", 2, "half">]> {
  let cppNamespace = "::mlir::kvq";
  let genSpecializedAttr = 0;
  let description = [{
    `interleaved`: channel pairs (2i, 2i+1), as llama2.c and Meta's Llama
    code. `half`: channel i with channel i + head_dim/2, as Hugging Face's
    Llama (`rotate_half`).
  }];
}

def Kvq_MethodAttr : EnumAttr<Kvq_Dialect, Kvq_Method, "method"> {
  let assemblyFormat = "`<` $value `>`";
}

//===----------------------------------------------------------------------===//
// Cache configuration
//===----------------------------------------------------------------------===//

class Kvq_IntParam<string value, string desc>
    : DefaultValuedParameter<"int64_t", value, desc>;

// A double would be simpler, but parameters must be hashable: APFloat is.
class Kvq_FloatParam<string desc> : AttrOrTypeParameter<"::llvm::APFloat",
    desc> {
  let comparator = "$_lhs.bitwiseIsEqual($_rhs)";
  let parser = [{ [&]() -> ::mlir::FailureOr<::llvm::APFloat> {
    double value;
    if (::mlir::failed($_parser.parseFloat(value)))
      return ::mlir::failure();
    return ::llvm::APFloat(value);
  }() }];
  let printer = "$_printer.printFloat($_self)";
}

def Kvq_FractionParam : Kvq_FloatParam<"kvquant_outlier_fraction, in [0, 1)"> {
  let defaultValue = "::llvm::APFloat(::kvq::kDefaultOutlierFraction)";
}

def Kvq_RopeAttr : Kvq_Attr<"Rope", "rope"> {
  let summary = "the rotary position embedding of the keys a cache receives";
  let description = [{
    Set as the `rope` parameter of `#kvq.config`, it makes the cache one of
    pre-RoPE keys (KVQuant, Sec. 3.2): `kvq.cache_update` receives keys
    before the rotation, the cache quantizes them, and `kvq.cache_attend`
    and the fetched keys use them rotated at their positions 0, 1, 2, ...:
    pair i turns by position * theta^(-2i/head_dim). `theta` must be in
    (1, 1e9] and `head_dim` even (the runtime's rule, kvq/config_rules.h).
    `--kvq-quantize-kv-cache="pre-rope=true"` sets it when it finds a RoPE
    feeding a cached key.

    ```mlir
    #kvq.config<method = kivi, key_bits = 2, value_bits = 2,
                rope = <theta = 10000.0, style = interleaved>>
    ```
  }];
  let parameters = (ins
    Kvq_FloatParam<"RoPE base">:$theta,
    EnumParameter<Kvq_RopeStyle>:$style
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    double getThetaValue() const { return getTheta().convertToDouble(); }
  }];
}

def Kvq_CacheConfigAttr : Kvq_Attr<"CacheConfig", "config"> {
  let summary = "every parameter of a quantized KV cache";
  let description = [{
    The method and its parameters, named after the seed configuration
    (`KVCacheConfig`). Parameters left out take the seed default, except
    `refit_interval`: 128, not the seed's 0, because key levels frozen at
    prefill do not cover post-RoPE decode keys (docs/RUNTIME.md; the
    runtime's kvq_config_init uses the same value). A parameter a method
    does not read is kept but has no effect.

    | parameter | seed name | default | read by |
    |---|---|---|---|
    | `method` | `method` | (required) | all |
    | `key_bits`, `value_bits` | `bit_width_inlier` / `kvquant_bits` | required for kivi, kivi_sink and kvquant (2, 3, 4 or 8); fp16: 16 when left out (it stores keys and values unquantized and reads neither), so `#kvq.config<method = fp16>` is complete | all |
    | `group_size` | `kivi_group_size` | 32 | kivi, kivi_sink |
    | `residual_length` | `residual_length` | 32 | kivi, kivi_sink |
    | `residual_mode` | — (`sliding`: seed rule; `block`: KIVI code) | sliding | kivi, kivi_sink |
    | `n_sink_tokens` | `n_sink_tokens` | 5 for kivi_sink, else 0 (plain kivi: must be 0) | kivi_sink |
    | `outlier_fraction` | `kvquant_outlier_fraction` | 0.01 | kvquant |
    | `lloyd_iters` | `kvquant_lloyd_iters` | 8 | kvquant |
    | `refit_interval` | `kvquant_refit_interval` | 128 (seed: 0, frozen) | kvquant |
    | `kvquant_n_sink` | `kvquant_n_sink` | 1 | kvquant |
    | `kvquant_group_size` | `kvquant_group_size` | 32 | kvquant (storage only) |
    | `rope` | — (KVQuant's pre-RoPE keys) | none: keys arrive post-RoPE | all |

    Example:

    ```mlir
    #kivi2 = #kvq.config<method = kivi_sink, key_bits = 2, value_bits = 2,
                         n_sink_tokens = 5>
    ```
  }];
  let parameters = (ins
    EnumParameter<Kvq_Method>:$method,
    Kvq_IntParam<"::kvq::kFp16Bits",
        "key code width (fp16: 16, implied)">:$key_bits,
    Kvq_IntParam<"::kvq::kFp16Bits",
        "value code width (fp16: 16, implied)">:$value_bits,
    Kvq_IntParam<"::kvq::kDefaultGroupSize", "kivi_group_size">:$group_size,
    Kvq_IntParam<"::kvq::kDefaultResidualLength",
        "fp16 residual window (tokens)">:$residual_length,
    DefaultValuedParameter<"::mlir::kvq::ResidualMode",
        "::mlir::kvq::ResidualMode::Sliding",
        "how keys leave the residual window">:$residual_mode,
    OptionalParameter<"std::optional<int64_t>",
        "kivi_sink: top-k key-norm tokens kept fp16 (unset: 5 for kivi_sink, "
        "0 otherwise)">:$n_sink_tokens,
    Kvq_FractionParam:$outlier_fraction,
    Kvq_IntParam<"::kvq::kDefaultLloydIters", "Lloyd-Max sweeps">:$lloyd_iters,
    Kvq_IntParam<"::kvq::kDefaultRefitInterval",
        "refit key levels every N decode steps (0 = frozen)">:$refit_interval,
    Kvq_IntParam<"::kvq::kDefaultKvquantNSink",
        "leading prefill tokens kept fp16">:$kvquant_n_sink,
    Kvq_IntParam<"::kvq::kKvquantGroupSize",
        "kvquant storage block size">:$kvquant_group_size,
    OptionalParameter<"::mlir::kvq::RopeAttr",
        "the keys' RoPE: set, the cache stores pre-RoPE keys">:$rope
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The defaults for `method` (kvq/config_limits.h, as kvq_config_init):
    /// the seed's, but refit_interval 128.
    static CacheConfigAttr getDefault(::mlir::MLIRContext *context,
                                      ::mlir::kvq::Method method);
    /// n_sink_tokens as the runtime receives it: the value given, else
    /// kivi_sink's default (kvq::kDefaultKiviSinkTokens) and 0 for the
    /// other methods, as kvq_config_init sets it.
    int64_t getSinkTokens() const;
    /// The outlier fraction as a double.
    double getOutlierFractionValue() const {
      return getOutlierFraction().convertToDouble();
    }
    /// Whether `bits` is a supported code width (2, 3, 4 or 8).
    static bool isSupportedBits(int64_t bits);
  }];
}

#endif // KVQ_ATTRS_TD
