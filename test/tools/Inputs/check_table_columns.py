#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# check_table_columns.py TABLE.txt HEADER_START MIN_LABEL
#
# The text table whose header line starts with HEADER_START, its rows up to
# the next blank line: every row is as wide as the header (the columns are
# right-aligned to fixed widths after the first, so a label that overflows
# its column makes its row wider), and some row's label is at least
# MIN_LABEL characters long (the case a fixed first column got wrong).
import sys

path, start, min_label = sys.argv[1], sys.argv[2], int(sys.argv[3])
lines = open(path, encoding="utf-8").read().split("\n")
heads = [i for i, l in enumerate(lines) if l.startswith(start + " ")]
if not heads:
    sys.exit("no line starting with %r in %s" % (start, path))
head = heads[0]
rows = []
for line in lines[head + 1:]:
    if not line.strip():
        break
    rows.append(line)
if not rows:
    sys.exit("the table has no rows")
bad = [r for r in rows if len(r) != len(lines[head])]
if bad:
    sys.exit("rows not as wide as the header (%d):\n%s\n%s" %
             (len(lines[head]), lines[head], "\n".join(bad)))
longest = max(len(r.split("  ")[0]) for r in rows)
if longest < min_label:
    sys.exit("no label of %d characters or more (longest %d)" %
             (min_label, longest))
print("%d rows aligned with the header, longest label %d" %
      (len(rows), longest))
