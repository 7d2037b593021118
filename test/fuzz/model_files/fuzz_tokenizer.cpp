//===- fuzz_tokenizer.cpp - libFuzzer target for the tokenizer reader -----===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Any bytes loaded as a llama2.c tokenizer (tools/model/tokenizer.h), with
// any vocabulary size and with 512 required: refused with a one-line
// message, or accepted and then used: encoding short texts (the input's own
// first bytes among them) gives ids inside the vocabulary, and every id
// decodes (out-of-range ids too). A crash, a sanitizer report or a broken
// promise is a finding.
//
//===----------------------------------------------------------------------===//
#include "memfile.h"
#include "tools/model/tokenizer.h"

using kvq::model::Tokenizer;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  kvqfuzz::MemFile file(data, size);
  for (int32_t vocab : {0, 512}) {
    std::string error;
    std::optional<Tokenizer> tok = Tokenizer::load(file.path(), vocab, &error);
    if (!tok) {
      kvqfuzz::checkOneLine(error);
      continue;
    }
    if (vocab && tok->vocabSize() != vocab)
      std::abort();
    const std::string own(reinterpret_cast<const char *>(data),
                          size < 48 ? size : 48);
    for (const std::string &text :
         {std::string(), std::string("Once upon a time"),
          std::string("\xc3\xa9t\xe2\x82\xac \xf0\x9f\x99\x82\xff"), own}) {
      std::vector<int32_t> ids = tok->encode(text, /*bos=*/true);
      int32_t prev = Tokenizer::kBos;
      for (int32_t id : ids) {
        if (id < 0 || id >= tok->vocabSize())
          std::abort();
        (void)tok->decode(prev, id);
        prev = id;
      }
    }
    for (int32_t id = -1; id <= tok->vocabSize() && id < 1024; ++id) {
      (void)tok->decode(Tokenizer::kBos, id);
      (void)tok->piece(id);
      (void)tok->score(id);
    }
  }
  return 0;
}
