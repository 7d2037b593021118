//===- fuzz_kvq_ir.cpp - libFuzzer target for kvq IR ----------------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// An input is MLIR text, split like `kvq-opt -split-input-file` at lines
// `// -----` (so every case of the invalid.mlir files is a seed of its own).
// Each piece is parsed in a context set up by mlir::kvq::registerAllKvq
// alone (what an embedder gets), verified, and what verifies goes through
// the --kvq-to-llvm pipeline. Parse errors, verifier errors and pipeline
// failures are expected: diagnostics are swallowed. A crash, an assertion,
// a sanitizer report or a leak is a finding. Seeds: the .mlir files of
// test/dialect, test/conversion and examples, read from the source tree
// (CMakeLists.txt beside this file).
//
//===----------------------------------------------------------------------===//
#include "kvq/passes/Registration.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>

using namespace mlir;

namespace {

const DialectRegistry &registry() {
  static const DialectRegistry *r = [] {
    auto *reg = new DialectRegistry;
    kvq::registerAllKvq(*reg);
    return reg;
  }();
  return *r;
}

void runOne(llvm::StringRef text) {
  // A fresh context per piece: nothing one input interns or loads can
  // change how the next one behaves.
  MLIRContext context(registry(), MLIRContext::Threading::DISABLED);
  ScopedDiagnosticHandler swallow(&context,
                                  [](Diagnostic &) { return success(); });
  ParserConfig config(&context);
  // A null-terminated copy, as kvq-opt's file buffers are: MLIR's lexer
  // reads up to the terminator (parseSourceString on the fuzzer's bare
  // bytes reads past their end).
  llvm::SourceMgr sources;
  sources.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBufferCopy(text),
                             llvm::SMLoc());
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sources, config);
  if (!module || failed(verify(*module)))
    return;
  PassManager pm(&context);
  if (failed(parsePassPipeline("kvq-to-llvm", pm))) {
    std::fprintf(stderr, "fuzz_kvq_ir: --kvq-to-llvm is not registered\n");
    std::abort();
  }
  (void)pm.run(*module);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef rest(reinterpret_cast<const char *>(data), size);
  // Split markers as mlir::splitAndProcessBuffer sees them: "// -----" on
  // a line of its own.
  const llvm::StringRef marker = "// -----";
  while (true) {
    size_t at = rest.find(marker);
    while (at != llvm::StringRef::npos && at != 0 && rest[at - 1] != '\n')
      at = rest.find(marker, at + 1);
    runOne(rest.substr(0, at));
    if (at == llvm::StringRef::npos)
      break;
    rest = rest.substr(at + marker.size());
  }
  return 0;
}
