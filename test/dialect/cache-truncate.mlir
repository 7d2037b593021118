// RUN: kvq-opt %s | kvq-opt | FileCheck %s
// RUN: kvq-opt %s --mlir-print-op-generic | kvq-opt | FileCheck %s
// RUN: kvq-opt %s --canonicalize | FileCheck %s --check-prefix=CANON

// kvq.cache_truncate round-trips in the custom and the generic form, takes
// any i64 (a constant, a block argument, the token count cache_stats
// returns), and is not erased as dead: it writes the cache.

!cache = !kvq.cache<layers = 2, kv_heads = 8, head_dim = 64, element_type = f16,
    config = <method = kivi, key_bits = 2, value_bits = 2>>

// CHECK-LABEL: func.func @truncate
// CHECK-SAME:    (%[[C:.*]]: !cache, %[[N:.*]]: i64)
func.func @truncate(%c: !cache, %n: i64) {
  // CHECK: kvq.cache_truncate %[[C]], %[[N]] : !cache
  kvq.cache_truncate %c, %n : !cache
  // CHECK: %[[ZERO:.*]] = arith.constant 0 : i64
  // CHECK: kvq.cache_truncate %[[C]], %[[ZERO]] : !cache
  %zero = arith.constant 0 : i64
  kvq.cache_truncate %c, %zero : !cache
  // CHECK: %[[T:.*]], %{{.*}}, %{{.*}}, %{{.*}} = kvq.cache_stats %[[C]][1] : !cache
  // CHECK: kvq.cache_truncate %[[C]], %[[T]] : !cache
  %t, %b, %f, %bits = kvq.cache_stats %c[1] : !cache
  kvq.cache_truncate %c, %t : !cache
  return
}

// CANON-LABEL: func.func @kept_by_canonicalize
// CANON: kvq.cache_truncate
func.func @kept_by_canonicalize(%c: !cache, %n: i64) {
  kvq.cache_truncate %c, %n : !cache
  return
}
