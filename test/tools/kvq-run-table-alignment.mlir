// kvq-run's perplexity table: the method column is as wide as its longest
// label, so a long method spec leaves the other columns aligned
// (tools/common/table.h).
//
// RUN: head -2 %models/stories260K/eval.txt > %t.eval
// RUN: kvq-run %models/stories260K/stories260K.bin --perplexity %t.eval --method "kivi,kvquant{refit-interval=0 pre-rope=true}" 2>/dev/null > %t.txt
// RUN: %python %S/Inputs/check_table_columns.py %t.txt method 39 | FileCheck %s
// CHECK: 3 rows aligned with the header, longest label 39
