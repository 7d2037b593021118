//===- Load.h - kvq-run: the model, its tokenizer and documents -*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// What a run reads before it compiles anything: the checkpoint (or random
// weights of a given shape, written to a scratch file), the weight type
// and lowering it is compiled with, then for generation and perplexity the
// tokenizer, the documents' file and the method specs.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_TOOLS_KVQ_RUN_LOAD_H
#define KVQ_TOOLS_KVQ_RUN_LOAD_H

#include "tools/kvq-run/CompiledModel.h"
#include "tools/kvq-run/Methods.h"
#include "tools/kvq-run/Options.h"
#include "tools/model/tokenizer.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kvq::run {

/// Removes a file when it goes out of scope ("": none).
struct ScratchFile {
  std::string path;
  ScratchFile() = default;
  ScratchFile(const ScratchFile &) = delete;
  ScratchFile &operator=(const ScratchFile &) = delete;
  ~ScratchFile();
};

/// The opened checkpoint and how every method compiles it.
struct LoadedModel {
  /// The file opened: the model's, or the scratch copy of random weights.
  std::string path;
  /// Declared before the checkpoint, so removed after it is closed.
  ScratchFile scratch;
  std::optional<model::Llama2cCheckpoint> ckpt;
  import::ImportOptions spelling; ///< its weight type
  CompileOptions compileOptions;

  const model::Llama2cConfig &config() const { return ckpt->config(); }
};

/// Opens the model of the command line (random:... only for --bench) in
/// the weight type asked for; null after the one-line error.
std::unique_ptr<LoadedModel> loadModel(const Options &opt);

/// What generation and perplexity read besides the model.
struct Inputs {
  /// The documents' file (--perplexity or --tokens); "" to generate.
  std::string evalFile;
  bool idsOnly = false; ///< --tokens: ids only, no tokenizer
  std::optional<model::Tokenizer> tok;
  std::vector<MethodSpec> specs;

  const model::Tokenizer *tokenizer() const { return tok ? &*tok : nullptr; }
};

/// The inputs of generation, perplexity and --dump-kv; nullopt after the
/// one-line error.
std::optional<Inputs> loadInputs(const Options &opt, const LoadedModel &model);

/// Documents of a perplexity file: each non-empty line. A file of integers
/// only is read as token ids (one document per line, BOS not added); with
/// `idsOnly` (--tokens) it must be one, and no tokenizer is needed. Empty
/// with a one-line *error on failure.
std::vector<std::vector<int32_t>> readDocuments(const std::string &path,
                                                const model::Tokenizer *tok,
                                                int32_t vocab, bool idsOnly,
                                                std::string *error);

} // namespace kvq::run

#endif // KVQ_TOOLS_KVQ_RUN_LOAD_H
