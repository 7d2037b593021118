// kvq-run --tokens FILE: perplexity on token ids, with no tokenizer at all
// (the checkpoint is copied where no tokenizer file lies next to it).
// RUN: rm -rf %t && mkdir %t && cp %models/stories260K/stories260K.bin %t/
// RUN: printf '1 403 407 261 378 430 261 505 343 378 263 49\n\n1 403 407 261 378 430 261 505 343\n' > %t/ids.txt
// RUN: kvq-run %t/stories260K.bin --tokens %t/ids.txt --prefill 4 --method none --json > %t/tokens.json
// RUN: FileCheck %s --check-prefix=JSON --input-file=%t/tokens.json
// JSON: "documents": 2,
// JSON: "decoded_tokens": 13,
// JSON: {"method": "none", {{.*}} "perplexity": [[PPL:[0-9.]+]],
//
// The same ids through --perplexity (which reads a file of ids as ids, with
// the tokenizer loaded) give the same perplexity.
// RUN: kvq-run %t/stories260K.bin --tokenizer %models/stories260K/tok512.bin --perplexity %t/ids.txt --prefill 4 --method none --json > %t/ppl.json
// RUN: cat %t/tokens.json %t/ppl.json | FileCheck %s --check-prefix=SAME
// SAME: "perplexity": [[PPL:[0-9.]+]],
// SAME: "perplexity": [[PPL]],
//
// RUN: printf '1 403 407\nOnce upon a time\n' > %t/text.txt
// RUN: not kvq-run %t/stories260K.bin --tokens %t/text.txt 2>&1 | FileCheck %s --check-prefix=TEXT
// TEXT: kvq-run: error: {{.*}}text.txt: line 2 is not token ids (non-negative integers separated by spaces)
// RUN: printf '1 403 512 7\n' > %t/big.txt
// RUN: not kvq-run %t/stories260K.bin --tokens %t/big.txt 2>&1 | FileCheck %s --check-prefix=BIG
// BIG: kvq-run: error: {{.*}}big.txt: token id 512 is outside the vocabulary [0, 512)
// RUN: printf '1 403 99999999999999999999 7\n' > %t/huge.txt
// RUN: not kvq-run %t/stories260K.bin --tokens %t/huge.txt 2>&1 | FileCheck %s --check-prefix=HUGE
// HUGE: kvq-run: error: {{.*}}huge.txt: token id 99999999999999999999 is outside the vocabulary [0, 512)
// RUN: not kvq-run %t/stories260K.bin --tokens %t/ids.txt --perplexity %t/ids.txt 2>&1 | FileCheck %s --check-prefix=BOTH
// BOTH: kvq-run: error: --tokens and --perplexity both name the documents; give one
// RUN: not kvq-run %t/stories260K.bin --steps 2 2>&1 | FileCheck %s --check-prefix=NOTOK
// NOTOK: kvq-run: error: no tokenizer next to {{.*}}stories260K.bin (tokenizer.json, tok512.bin or tokenizer.bin); pass --tokenizer
