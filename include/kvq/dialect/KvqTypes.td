//===- KvqTypes.td - kvq types -------------------------------*- tablegen -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The opaque quantized KV cache handle.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_TYPES_TD
#define KVQ_TYPES_TD

include "KvqAttrs.td"
include "mlir/IR/BuiltinTypeInterfaces.td"
include "mlir/IR/OpAsmInterface.td"

def Kvq_CacheType : Kvq_Type<"Cache", "cache", [OpAsmTypeInterface]> {
  let summary = "opaque handle to a quantized KV cache";
  let description = [{
    A handle to the runtime's quantized key/value cache of one sequence:
    `layers` layers of `kv_heads` heads of `head_dim` channels. K and V
    tensors exchanged with the cache are `[tokens, kv_heads, head_dim]` of
    `element_type` (f16 or f32). The configuration says how the runtime
    stores them. Lowering turns the handle into an opaque pointer.

    Example:

    ```mlir
    !cache = !kvq.cache<layers = 32, kv_heads = 8, head_dim = 128,
        element_type = f16,
        config = <method = kivi, key_bits = 2, value_bits = 2>>
    ```
  }];
  let parameters = (ins
    "int64_t":$layers,
    "int64_t":$kv_heads,
    "int64_t":$head_dim,
    "::mlir::Type":$element_type,
    "::mlir::kvq::CacheConfigAttr":$config
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  // Prints `!cache = !kvq.cache<...>` once at the top of a module.
  let genMnemonicAlias = 1;
}

#endif // KVQ_TYPES_TD
