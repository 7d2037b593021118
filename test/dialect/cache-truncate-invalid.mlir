// RUN: kvq-opt %s -split-input-file -verify-diagnostics

// The verifier messages of kvq.cache_truncate (test/dialect/invalid.mlir
// style).

!cache = !kvq.cache<layers = 1, kv_heads = 1, head_dim = 64, element_type = f16, config = <method = kivi, key_bits = 2, value_bits = 2>>

func.func @negative(%c: !cache) {
  %n = arith.constant -1 : i64
  // expected-error @below {{'kvq.cache_truncate' op keeps a negative number of tokens (-1)}}
  kvq.cache_truncate %c, %n : !cache
  return
}

// -----

!cache = !kvq.cache<layers = 1, kv_heads = 1, head_dim = 64, element_type = f16, config = <method = kivi, key_bits = 2, value_bits = 2>>

func.func @not_i64(%c: !cache, %n: i32) {
  // expected-error @below {{'kvq.cache_truncate' op operand #1 must be 64-bit signless integer, but got 'i32'}}
  "kvq.cache_truncate"(%c, %n) : (!cache, i32) -> ()
  return
}

// -----

func.func @not_a_cache(%c: memref<4xf32>, %n: i64) {
  // expected-error @below {{'kvq.cache_truncate' op operand #0 must be}}
  "kvq.cache_truncate"(%c, %n) : (memref<4xf32>, i64) -> ()
  return
}
