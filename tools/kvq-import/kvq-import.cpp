//===- kvq-import.cpp - a model checkpoint as an MLIR module --------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//   kvq-import MODEL.bin|MODEL.gguf|MODEL_DIR [options] [-o FILE]
//
// Writes the model (upstream dialects only, KV cache in plain tensors) for
// kvq-opt --kvq-quantize-kv-cache. The weights stay in the checkpoint: the
// module takes them as one argument (docs/MODEL.md).
//
//===----------------------------------------------------------------------===//
#include "tools/kvq-import/Llama2cImporter.h"
#include "tools/model/checkpoint.h"

#include "cl_version.h"
#include "vocabulary.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

namespace cl = llvm::cl;
using kvq::import::ImportOptions;

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  kvq::cli::setVersionPrinter("kvq-import");
  cl::OptionCategory category("kvq-import options");
  cl::opt<std::string> input(
      cl::Positional, cl::Required,
      cl::desc("<llama2.c checkpoint, GGUF file or Hugging Face "
               "model folder>"),
      cl::cat(category));
  cl::opt<std::string> output("o", cl::desc("Output file (default: stdout)"),
                              cl::value_desc("file"), cl::init("-"),
                              cl::cat(category));
  cl::opt<ImportOptions::CacheLayout> layout(
      "cache-layout", cl::desc("How the KV cache tensors are held"),
      cl::values(clEnumValN(ImportOptions::CacheLayout::Stacked, "stacked",
                            "one [layers, context, kv_heads, head_dim] tensor "
                            "for K and one for V (default)"),
                 clEnumValN(ImportOptions::CacheLayout::PerLayer, "per-layer",
                            "one [context, kv_heads, head_dim] tensor per "
                            "layer for K and for V")),
      cl::init(ImportOptions::CacheLayout::Stacked), cl::cat(category));
  cl::opt<std::string> cacheType("cache-type",
                                 cl::desc("Cache element type: f32 or f16"),
                                 cl::init("f32"), cl::cat(category));
  cl::opt<ImportOptions::Gqa> gqa(
      "gqa", cl::desc("How query heads are grouped onto KV heads"),
      cl::values(clEnumValN(ImportOptions::Gqa::Reshape, "reshape",
                            "queries expanded to [kv_heads, group] (default)"),
                 clEnumValN(ImportOptions::Gqa::Broadcast, "broadcast",
                            "each KV head repeated for its group "
                            "(Hugging Face's repeat_kv)")),
      cl::init(ImportOptions::Gqa::Reshape), cl::cat(category));
  cl::opt<std::string> softmax(
      "softmax",
      cl::desc("linalg (linalg.softmax) or expanded (max, exp, "
               "sum, divide)"),
      cl::init("linalg"), cl::cat(category));
  cl::opt<int64_t> prefill(
      "prefill",
      cl::desc("Tokens of the @prefill entry point (0: only @decode)"),
      cl::init(0), cl::cat(category));
  cl::opt<int64_t> context(
      "context", cl::desc("Cache capacity in tokens (default: seq_len)"),
      cl::init(0), cl::cat(category));
  cl::opt<std::string> weightType(
      "weight-type",
      cl::desc("Element type of %weights: f32, f16 or bf16 (kept in that "
               "type, widened where read; default: the type the model's "
               "file holds its weights in when that is f16 or bf16, else "
               "f32)"),
      cl::cat(category));
  cl::HideUnrelatedOptions(category);
  std::vector<std::string> renamed;
  kvq::cli::renameDeprecatedFlags("kvq-import", argc, argv,
                                  {"--prefill-tokens"}, renamed);
  kvq::cli::parseCommandLine(
      "kvq-import", argc, argv,
      "kvq-import: a llama2.c checkpoint or Hugging Face folder as an MLIR "
      "module (func, arith, "
      "math, tensor, linalg) with an explicit KV cache\n");

  auto fail = [](const std::string &message) {
    llvm::errs() << "kvq-import: error: " << message << "\n";
    return 2;
  };
  if (cacheType != "f32" && cacheType != "f16")
    return fail("--cache-type must be f32 or f16, got '" + cacheType + "'");
  if (softmax != "linalg" && softmax != "expanded")
    return fail("--softmax must be linalg or expanded, got '" + softmax + "'");
  auto weights = kvq::import::parseWeightType(weightType);
  if (!weightType.empty() && !weights)
    return fail("--weight-type must be f32, f16 or bf16, got '" + weightType +
                "'");

  std::string error;
  auto ckpt = kvq::model::openCheckpoint(input, &error);
  if (!ckpt)
    return fail(error);
  if (weightType.empty())
    weights = kvq::import::storedWeightType(*ckpt);
  ImportOptions options;
  options.cacheLayout = layout;
  options.cacheF16 = cacheType == "f16";
  options.gqa = gqa;
  options.expandSoftmax = softmax == "expanded";
  options.weightType = *weights;
  options.prefillTokens = prefill;
  // Unset means the checkpoint's seq_len; a value given is checked as is.
  options.contextLength =
      context.getNumOccurrences() ? int64_t(context) : ckpt->config().seqLen;
  std::string bad = kvq::import::validateImportOptions(ckpt->config(), options);
  if (!bad.empty())
    return fail(bad);

  mlir::MLIRContext mlirContext;
  auto module =
      kvq::import::importLlama2c(mlirContext, ckpt->config(), options);
  if (!module)
    return fail("the emitted module did not verify (a kvq-import bug)");
  auto file = mlir::openOutputFile(output, &error);
  if (!file)
    return fail(error);
  module->print(file->os());
  file->os() << "\n";
  file->keep();
  return 0;
}
