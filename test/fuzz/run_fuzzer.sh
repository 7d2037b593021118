#!/bin/sh
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#
# run_fuzzer.sh SECONDS FUZZER WORK_DIR CORPUS_DIR... [-flag=value...]
#
# One libFuzzer run of FUZZER for $KVQ_FUZZ_SECONDS seconds (default
# SECONDS) starting from the checked-in CORPUS_DIRs, which it only reads:
# inputs that add coverage go to WORK_DIR/new, a crashing, leaking or
# timing-out input to WORK_DIR/ (libFuzzer prints its name; reproduce with
# `FUZZER THAT_FILE`). Exit status non-zero on any finding. ctest runs it
# with the fixed default (test/fuzz/KvqFuzz.cmake); `./kvq.sh fuzz SECONDS`
# runs every fuzzer longer by setting KVQ_FUZZ_SECONDS.
set -eu
# The fixed-time ctest run starts from a fixed seed, so that a suite run
# explores the same inputs (as far as the machine's speed gets) everywhere;
# longer runs take a fresh seed each time.
seed=-seed=1
if [ -n "${KVQ_FUZZ_SECONDS:-}" ]; then
  seed=-seed=0
fi
seconds="${KVQ_FUZZ_SECONDS:-$1}"
fuzzer="$2"
work="$3"
shift 3
mkdir -p "$work/new"
# allow_user_poisoning=0: see run_ctest in kvq.sh (libMLIR.so is not
# instrumented); the later settings win over the caller's.
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=1:halt_on_error=1:allow_user_poisoning=0"
export ASAN_OPTIONS
exec "$fuzzer" -max_total_time="$seconds" "$seed" -timeout=10 -rss_limit_mb=2048 \
  -print_final_stats=1 -artifact_prefix="$work/" "$work/new" "$@"
