//===- KvqDialect.td - the kvq dialect definition ------------*- tablegen -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The dialect record and the base classes of kvq ops, attributes and types.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_DIALECT_TD
#define KVQ_DIALECT_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"

def Kvq_Dialect : Dialect {
  let name = "kvq";
  let summary = "Key/value-cache quantization for LLM inference";
  let description = [{
    The `kvq` dialect models the steps of KV-cache quantization — uniform
    group quantization (KIVI), non-uniform Lloyd-Max levels (KVQuant-NUQ),
    dense-and-sparse outlier splitting, attention-sink selection by key norm
    — and the quantized KV cache itself, as an opaque `!kvq.cache` handle
    whose configuration (`#kvq.config`) carries every method parameter.

    Primitive ops work on ranked tensors whose dimension 0 is the token
    dimension: a `per_token` group runs along the last dimension (inside one
    token), a `per_channel` group runs along dimension 0 (across tokens,
    inside one channel). Cache ops append to, read from and attend over the
    runtime's quantized state; `convert-kvq-to-runtime` lowers them to calls
    of the kvq runtime library.
  }];
  let cppNamespace = "::mlir::kvq";
  let useDefaultAttributePrinterParser = 1;
  let useDefaultTypePrinterParser = 1;
  let hasConstantMaterializer = 1;
  let dependentDialects = ["::mlir::arith::ArithDialect"];
}

class Kvq_Op<string mnemonic, list<Trait> traits = []>
    : Op<Kvq_Dialect, mnemonic, traits>;

class Kvq_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<Kvq_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

class Kvq_Type<string name, string typeMnemonic, list<Trait> traits = []>
    : TypeDef<Kvq_Dialect, name, traits> {
  let mnemonic = typeMnemonic;
}

#endif // KVQ_DIALECT_TD
