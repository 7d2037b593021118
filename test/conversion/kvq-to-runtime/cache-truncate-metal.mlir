// RUN: kvq-opt %s --convert-kvq-to-runtime="target=metal" -verify-diagnostics
// RUN: kvq-opt %s --kvq-to-metal -verify-diagnostics

// The Metal runtime has no truncate yet: lowering kvq.cache_truncate for it
// is one clear error, not a missing symbol at link time.

!cache = !kvq.cache<layers = 1, kv_heads = 2, head_dim = 64, element_type = f16,
    config = <method = kvquant, key_bits = 3, value_bits = 3>>

func.func @truncate(%c: !cache, %n: i64) {
  // expected-error @below {{'kvq.cache_truncate' op has no runtime entry point on the metal target (the Metal runtime cannot truncate a cache yet)}}
  kvq.cache_truncate %c, %n : !cache
  return
}
