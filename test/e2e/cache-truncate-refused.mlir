// REQUIRES: mlir-runner
// RUN: kvq-opt %s --kvq-to-llvm | not --crash %kvq_run 2>&1 | FileCheck %s --check-prefix=ABORT
// RUN: kvq-opt %s --kvq-to-llvm="on-error=report" | %kvq_run 2>&1 | FileCheck %s --check-prefix=REPORT

// kvquant fits its key levels on the whole prefill (here tokens 1..3;
// token 0 is its fp16 sink): keeping 2 of the 4 tokens would need levels fit
// on tokens 1..1 only, which the cache cannot rebuild, so the runtime
// refuses the cut (KVQ_ERR_NOT_EXACT = 13) and leaves the cache as it was.
// The generated check reports the call site; by default the program stops
// there, with on-error=report it goes on. (kivi can cut back further, from
// its rollback history: docs/RUNTIME.md, "Truncate: exact or refused".)

!nuq = !kvq.cache<layers = 1, kv_heads = 1, head_dim = 4, element_type = f32,
    config = <method = kvquant, key_bits = 3, value_bits = 3, refit_interval = 0>>

// ABORT: kvq: error: kvq.cache_truncate (kvq_cache_truncate) at loc({{.*}}cache-truncate-refused.mlir":[[@LINE+12]]:3): truncation not exact:
// ABORT-NOT: tokens after the refused cut

// REPORT: kvq: error: kvq.cache_truncate (kvq_cache_truncate) at {{.*}}: truncation not exact:
// REPORT: tokens after the refused cut: 4
// REPORT-NEXT: pending status: 13
func.func @main() {
  %k = arith.constant dense<[[[0.0, 3.0, 1.0, 2.0]], [[1.0, 2.0, 0.0, 3.0]],
                             [[2.0, 1.0, 3.0, 0.0]], [[3.0, 0.0, 2.0, 1.0]]]> : tensor<4x1x4xf32>
  %two = arith.constant 2 : i64
  %c = kvq.cache_create : !nuq
  kvq.cache_update %c[0], %k, %k : !nuq, tensor<4x1x4xf32>, tensor<4x1x4xf32>
  kvq.cache_truncate %c, %two : !nuq
  %tokens, %bytes, %fp16_bytes, %bits = kvq.cache_stats %c : !nuq
  vector.print str "tokens after the refused cut: "
  vector.print %tokens : i64
  %status = call @kvq_take_pending_status() : () -> i32
  vector.print str "pending status: "
  vector.print %status : i32
  kvq.cache_destroy %c : !nuq
  return
}

func.func private @kvq_take_pending_status() -> i32
