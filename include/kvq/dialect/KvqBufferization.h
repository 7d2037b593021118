//===- KvqBufferization.h - One-Shot Bufferize support for kvq --*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Attaches BufferizableOpInterface to every kvq op with tensor operands, so
// --one-shot-bufferize turns the tensor forms into the memref forms.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_DIALECT_KVQBUFFERIZATION_H
#define KVQ_DIALECT_KVQBUFFERIZATION_H

namespace mlir {
class DialectRegistry;
namespace kvq {
/// Registers the external BufferizableOpInterface models of the kvq ops.
void registerBufferizableOpInterfaceExternalModels(DialectRegistry &registry);
} // namespace kvq
} // namespace mlir

#endif // KVQ_DIALECT_KVQBUFFERIZATION_H
