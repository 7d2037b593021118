// RUN: kvq-opt %s --convert-kvq-to-runtime | FileCheck %s
// RUN: kvq-opt %s --convert-kvq-to-runtime="on-error=report" | FileCheck %s --check-prefix=REPORT

// kvq.cache_truncate calls kvq_cache_truncate(cache, n_tokens) with the
// declaration of runtime.h and the status check of every runtime call
// (the Metal target: cache-truncate-metal.mlir).

!cache = !kvq.cache<layers = 2, kv_heads = 2, head_dim = 64, element_type = f16,
    config = <method = kivi, key_bits = 2, value_bits = 2>>

// CHECK-DAG: func.func private @kvq_cache_truncate(!llvm.ptr, i64) -> i32
// CHECK-DAG: func.func private @kvq_check_status(i32, !llvm.ptr) -> i32

// CHECK-LABEL: func.func @truncate
// CHECK-SAME: (%[[C:.*]]: !llvm.ptr, %[[N:.*]]: i64)
// CHECK: %[[STATUS:.*]] = call @kvq_cache_truncate(%[[C]], %[[N]]) : (!llvm.ptr, i64) -> i32
// CHECK: %[[CHECKED:.*]] = call @kvq_check_status(%[[STATUS]], %{{.*}})
// CHECK: %[[OK:.*]] = arith.cmpi eq, %[[CHECKED]], %c0_i32
// CHECK: cf.assert %[[OK]], "kvq runtime call failed: kvq.cache_truncate (kvq_cache_truncate) at
// CHECK-NEXT: return

// REPORT-LABEL: func.func @truncate
// REPORT: call @kvq_cache_truncate
// REPORT: call @kvq_check_status
// REPORT-NOT: cf.assert
// REPORT: return
func.func @truncate(%c: !cache, %n: i64) {
  kvq.cache_truncate %c, %n : !cache
  return
}
