//===- Load.cpp - kvq-run: the model, its tokenizer and documents ---------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//===----------------------------------------------------------------------===//
#include "tools/kvq-run/Load.h"
#include "tools/kvq-run/Common.h"
#include "tools/model/checkpoint.h"
#include "tools/model/gguf.h"

#include "flags.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <unistd.h>

namespace kvq::run {

ScratchFile::~ScratchFile() {
  if (!path.empty())
    std::remove(path.c_str());
}

std::unique_ptr<LoadedModel> loadModel(const Options &opt) {
  auto m = std::make_unique<LoadedModel>();
  std::string error;
  m->path = opt.modelPath;
  if (m->path.rfind("random:", 0) == 0) {
    int32_t h[7];
    if (std::sscanf(m->path.c_str() + 7, "%d,%d,%d,%d,%d,%d,%d", &h[0], &h[1],
                    &h[2], &h[3], &h[4], &h[5], &h[6]) != 7) {
      fail("random: expects dim,hidden,layers,heads,kv_heads,vocab,"
           "seq_len");
      return nullptr;
    }
    auto shape = model::parseLlama2cHeader(h, &error);
    if (!shape) {
      fail(error);
      return nullptr;
    }
    if (!opt.bench) {
      fail("random weights are for --bench only");
      return nullptr;
    }
    char tmpl[] = "/tmp/kvq-run-random-XXXXXX";
    int fd = mkstemp(tmpl);
    if (fd < 0) {
      fail("cannot create a temporary checkpoint");
      return nullptr;
    }
    close(fd);
    m->path = tmpl;
    // Uniform weights of variance 1/dim keep activations at unit scale.
    float scale = std::sqrt(3.0f / float(shape->dim));
    if (!model::writeRandomLlama2c(m->path, *shape, 7, scale, &error)) {
      std::remove(m->path.c_str());
      fail(error);
      return nullptr;
    }
    m->scratch.path = m->path;
  }
  m->ckpt = model::openCheckpoint(m->path, &error);
  if (!m->ckpt) {
    fail(error);
    return nullptr;
  }
  m->compileOptions.matmulKernels = opt.matmulKernels;
  if (opt.weightType.empty()) {
    m->spelling.weightType = import::storedWeightType(*m->ckpt);
  } else if (auto w = import::parseWeightType(opt.weightType)) {
    m->spelling.weightType = *w;
  } else {
    fail("--weight-type must be f32, f16 or bf16, got '" + opt.weightType +
         "'");
    return nullptr;
  }
  return m;
}

namespace {

/// --tokenizer, else a GGUF file's own vocabulary, else a tokenizer file
/// next to the model (in its folder); none for --tokens. False after the
/// one-line error.
bool loadTokenizer(const Options &opt, const LoadedModel &model, Inputs &in) {
  const std::string &path = model.path;
  const int32_t vocab = model.config().vocab;
  std::string error;
  std::string tokPath = opt.tokenizerPath;
  if (tokPath.empty() && !in.idsOnly && model::isGguf(path)) {
    // A GGUF's own vocabulary, when it has one.
    bool present = false;
    in.tok = model::openGgufTokenizer(path, vocab, &present, &error);
    if (present && !in.tok) {
      fail(error);
      return false;
    }
  }
  if (tokPath.empty() && !in.idsOnly && !in.tok) {
    // Next to a file; inside a folder.
    std::string dir = path.substr(0, path.find_last_of('/') + 1);
    if (model::isDirectory(path))
      dir = path + "/";
    for (std::string name :
         {std::string("tokenizer.json"), "tok" + std::to_string(vocab) + ".bin",
          std::string("tokenizer.bin")}) {
      if (std::ifstream(dir + name)) {
        tokPath = dir + name;
        break;
      }
    }
    if (tokPath.empty()) {
      fail("no tokenizer next to " + opt.modelPath + " (tokenizer.json, tok" +
           std::to_string(vocab) + ".bin or tokenizer.bin); pass --tokenizer");
      return false;
    }
  }
  const bool tokJson = tokPath.size() > 5 &&
                       tokPath.compare(tokPath.size() - 5, 5, ".json") == 0;
  if (!tokPath.empty() &&
      !(in.tok = tokJson ? model::Tokenizer::loadJson(tokPath, vocab, &error)
                         : model::Tokenizer::load(tokPath, vocab, &error))) {
    fail(error);
    return false;
  }
  return true;
}

} // namespace

std::optional<Inputs> loadInputs(const Options &opt, const LoadedModel &model) {
  if (!opt.tokensFile.empty() && !opt.perplexity.empty()) {
    fail("--tokens and --perplexity both name the documents; give one");
    return std::nullopt;
  }
  Inputs in;
  in.idsOnly = !opt.tokensFile.empty();
  in.evalFile = in.idsOnly ? opt.tokensFile : opt.perplexity;
  if (!loadTokenizer(opt, model, in))
    return std::nullopt;
  std::optional<std::vector<MethodSpec>> specs = planMethods(opt);
  if (!specs)
    return std::nullopt;
  in.specs = std::move(*specs);
  if (opt.steps < 0) {
    fail("--steps must not be negative");
    return std::nullopt;
  }
  return in;
}

std::vector<std::vector<int32_t>> readDocuments(const std::string &path,
                                                const model::Tokenizer *tok,
                                                int32_t vocab, bool idsOnly,
                                                std::string *error) {
  std::ifstream in(path);
  if (!in) {
    *error = path + ": cannot open";
    return {};
  }
  std::vector<std::string> lines;
  std::vector<size_t> lineNumbers;
  size_t number = 0;
  for (std::string line; std::getline(in, line);)
    if (++number, line.find_first_not_of(" \t\r") != std::string::npos) {
      lines.push_back(line);
      lineNumbers.push_back(number);
    }
  bool ids = !lines.empty();
  for (size_t i = 0; i < lines.size(); ++i) {
    bool digits =
        lines[i].find_first_not_of("0123456789 \t\r") == std::string::npos;
    if (idsOnly && !digits) {
      *error = path + ": line " + std::to_string(lineNumbers[i]) +
               " is not token ids (non-negative integers separated by spaces)";
      return {};
    }
    ids = ids && digits;
  }
  std::vector<std::vector<int32_t>> docs;
  for (const std::string &l : lines) {
    if (!ids) {
      docs.push_back(tok->encode(l, /*bos=*/true));
      continue;
    }
    std::istringstream s(l);
    std::vector<int32_t> d;
    for (std::string word; s >> word;) {
      // At most 10 digits: beyond any vocabulary, never an overflow.
      long long v = word.size() > 10 ? -1 : std::stoll(word);
      if (v < 0 || v >= vocab) {
        *error = path + ": token id " + kvq::cli::printable(word, 24) +
                 " is outside the vocabulary [0, " + std::to_string(vocab) +
                 ")";
        return {};
      }
      d.push_back(int32_t(v));
    }
    docs.push_back(d);
  }
  if (docs.empty())
    *error = path + ": no documents (one per non-empty line)";
  return docs;
}

} // namespace kvq::run
