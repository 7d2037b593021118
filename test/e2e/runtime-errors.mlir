// REQUIRES: mlir-runner
// RUN: kvq-opt %s --kvq-to-llvm | not --crash %kvq_run 2>&1 | FileCheck %s --check-prefix=ABORT
// RUN: kvq-opt %s --kvq-to-llvm="on-error=report" | %kvq_run 2>&1 | FileCheck %s --check-prefix=REPORT

// A NaN key reaches the runtime, which refuses it (KVQ_ERR_NON_FINITE = 9)
// and leaves the cache as it was. The generated check reports the call
// site; by default the program then stops, with on-error=report it goes on
// and the host reads the pending status.

!cache = !kvq.cache<layers = 1, kv_heads = 1, head_dim = 4, element_type = f32,
    config = <method = kivi, key_bits = 2, value_bits = 2, group_size = 4>>

// ABORT: kvq: error: kvq.cache_update (kvq_cache_update) at loc({{.*}}runtime-errors.mlir":[[@LINE+9]]:3): non-finite input:
// ABORT-NOT: tokens after the failed update

// REPORT: kvq: error: kvq.cache_update (kvq_cache_update) at {{.*}}: non-finite input:
// REPORT: tokens after the failed update: 0
// REPORT-NEXT: pending status: 9
func.func @main() {
  %c = kvq.cache_create : !cache
  %k = arith.constant dense<[[[1.0, 0x7FC00000, 2.0, 3.0]]]> : tensor<1x1x4xf32>
  kvq.cache_update %c[0], %k, %k : !cache, tensor<1x1x4xf32>, tensor<1x1x4xf32>
  %tokens, %bytes, %fp16_bytes, %bits = kvq.cache_stats %c : !cache
  vector.print str "tokens after the failed update: "
  vector.print %tokens : i64
  %status = call @kvq_take_pending_status() : () -> i32
  vector.print str "pending status: "
  vector.print %status : i32
  kvq.cache_destroy %c : !cache
  return
}

func.func private @kvq_take_pending_status() -> i32
