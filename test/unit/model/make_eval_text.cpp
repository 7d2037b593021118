//===- make_eval_text.cpp - writes models/stories260K/eval.txt ------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//   make_eval_text CHECKPOINT TOKENIZER OUT [STORIES [MIN_TOKENS]]
//
// Samples seeds 1, 2, 3, ... in order with sampleStory() (temperature 1.0,
// at most 400 tokens), keeps a story when it has at least MIN_TOKENS tokens
// (default 0) and writes each kept story as one line of OUT until STORIES
// (default 12) are kept. Reports every seed on stderr.
//
//===----------------------------------------------------------------------===//
#include "story_sampler.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>

using namespace kvqtest;

int main(int argc, char **argv) {
  if (argc < 4 || argc > 6) {
    std::cerr << "usage: make_eval_text CHECKPOINT TOKENIZER OUT "
                 "[STORIES [MIN_TOKENS]]\n";
    return 2;
  }
  int stories = argc > 4 ? std::atoi(argv[4]) : 12;
  int minTokens = argc > 5 ? std::atoi(argv[5]) : 0;
  std::string err;
  std::optional<ReferenceModel> model = ReferenceModel::load(argv[1], &err);
  if (!model) {
    std::cerr << "make_eval_text: " << err << "\n";
    return 1;
  }
  std::optional<kvq::model::Tokenizer> tok =
      kvq::model::Tokenizer::load(argv[2], model->config().vocabSize, &err);
  if (!tok) {
    std::cerr << "make_eval_text: " << err << "\n";
    return 1;
  }
  std::ofstream out(argv[3], std::ios::binary);
  if (!out) {
    std::cerr << "make_eval_text: cannot write '" << argv[3] << "'\n";
    return 1;
  }
  int kept = 0;
  // A story cannot be kept past this many seeds only if every seed is short.
  for (uint64_t seed = 1; kept < stories && seed <= 10000; ++seed) {
    Story s = sampleStory(*model, *tok, seed, kEvalTemperature, kEvalMaxTokens);
    std::string line = oneLine(s.text);
    bool keep = int(s.tokens.size()) >= minTokens && !line.empty();
    std::cerr << "seed " << seed << ": " << s.tokens.size() << " tokens"
              << (keep ? "" : " (skipped)") << "\n";
    if (keep) {
      out << line << "\n";
      ++kept;
    }
  }
  out.close();
  if (!out || kept < stories) {
    std::cerr << "make_eval_text: wrote " << kept << " of " << stories
              << " stories\n";
    return 1;
  }
  return 0;
}
