//===- config_limits.h - limits of a kvq cache configuration ---*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The bounds the runtime accepts, with their reasons, in one dependency-free
// C++ header: the runtime's checks (runtime/base/config.h) and the
// dialect's verifiers (dialect/) both read them, so the dialect rejects
// exactly the sizes the runtime would, and nothing it accepts can be
// truncated by the i32 fields of the C ABI.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_CONFIG_LIMITS_H
#define KVQ_CONFIG_LIMITS_H

#include <cstdint>

namespace kvq {

/// Defaults of a configuration, the seeds' values unless said otherwise.
/// kvq_config_init, the dialect's #kvq.config parameters and the pass
/// options' help all read them here.
/// Code width of kivi / kivi_sink (keys and values).
constexpr int32_t kDefaultKiviBits = 2;
/// Code width of kvquant (keys and values).
constexpr int32_t kDefaultKvquantBits = 3;
/// The code width of method fp16 (it stores keys and values unquantized):
/// what #kvq.config implies when key_bits / value_bits are left out, so
/// #kvq.config<method = fp16> is complete (fp16 reads neither field).
constexpr int32_t kFp16Bits = 16;
/// KIVI's group size G and fp16 residual window R.
constexpr int32_t kDefaultGroupSize = 32;
constexpr int32_t kDefaultResidualLength = 32;
/// kvquant's outlier fraction (a double: the dialect keeps it exactly; the
/// runtime's float field holds it rounded).
constexpr double kDefaultOutlierFraction = 0.01;
/// kvquant's Lloyd-Max sweeps.
constexpr int32_t kDefaultLloydIters = 8;
/// kvquant refits key levels every 128 decoded tokens: not the seeds' 0
/// (levels frozen at prefill), which post-RoPE decode keys leave
/// (docs/RUNTIME.md); equal to KVQ_DEFAULT_REFIT_INTERVAL of runtime.h
/// (static_assert in runtime/base/config.cpp).
constexpr int32_t kDefaultRefitInterval = 128;
/// kvquant's leading prefill tokens kept fp16.
constexpr int32_t kDefaultKvquantNSink = 1;
/// kivi_sink's n_sink_tokens unless set (the seed's 5); the other methods
/// default to 0 (kvq_config_init, and the dialect's #kvq.config).
constexpr int32_t kDefaultKiviSinkTokens = 5;

/// The one rule for n_sink_tokens on plain KIVI, which keeps no sinks: a
/// value other than 0 is refused (kvq_config_validate and the dialect's
/// verifier both call this and print its message), where silently keeping
/// no sinks would hide a wrong method. fp16 and kvquant ignore the field.
/// Returns the reason, or null when the value is allowed.
inline const char *plainKiviSinkTokensRule(long long nSinkTokens) {
  return nSinkTokens != 0 ? "needs method kivi_sink" : nullptr;
}

/// RoPE base of a cache that stores pre-RoPE keys, unless set (llama2.c's
/// and Llama 2's).
constexpr float kDefaultRopeTheta = 10000.0f;

/// Bounds of a RoPE cache's theta: (kRopeThetaAbove, kRopeThetaMax].
/// Frequencies theta^(-2i/d) must decrease with i, and the largest base in
/// use is 5e5 (Llama 3).
constexpr double kRopeThetaAbove = 1.0;
constexpr double kRopeThetaMax = 1e9;

/// The one rule for a RoPE cache's theta and head_dim (kvq_config_validate
/// and the dialect's verifier print its message). theta must be finite and
/// in (1, 1e9]; pairs need an even head_dim. Returns the reason, or null
/// when allowed.
inline const char *ropeRule(double theta, long long headDim) {
  if (!(theta > kRopeThetaAbove && theta <= kRopeThetaMax))
    return "rope theta must be in (1, 1e9]";
  if (headDim % 2 != 0)
    return "rope needs an even head_dim";
  return nullptr;
}

/// The only accepted kvquant_group_size (see docs/RUNTIME.md).
constexpr int32_t kKvquantGroupSize = 32;

/// Outlier positions are stored as 16-bit channel indices within a token
/// row, which bounds the channels per layer.
constexpr int64_t kMaxChannels = 65535;

/// Upper bounds of the configuration and of the shapes the entry points
/// accept. Each is far above any model in use, and together they keep
/// every size the runtime derives inside int64 with a wide margin (the
/// static_asserts below), so that past the entry-point checks (checked.h)
/// no product can wrap. docs/RUNTIME.md "Limits" gives the reasons.
namespace limits {
/// Layers per cache: the largest public models have ~128; each layer costs
/// its bookkeeping at create, so INT32_MAX would be hundreds of GiB.
constexpr int32_t kLayers = 1024;
/// KV heads per layer (MHA models have up to ~128).
constexpr int32_t kKvHeads = 1024;
/// Channels per head (models use 64..256; an fp16 cache of one wide head
/// is a bulk fp16 converter). kv_heads * head_dim <= kMaxChannels binds
/// the two together.
constexpr int32_t kHeadDim = static_cast<int32_t>(kMaxChannels);
/// Query heads of an attend call (q_heads; a multiple of num_kv_heads).
constexpr int32_t kQHeads = 4096;
/// kivi_sink's n_sink_tokens and kvquant's kvquant_n_sink: fp16 rows kept
/// for good (the seeds use 5 and 1); the sink top-k is reserved at create.
constexpr int32_t kSinkTokens = 4096;
/// Lloyd-Max sweeps (kvquant's lloyd_iters, kvq_nuq_fit's iters): the fit
/// converges in tens of sweeps (the seeds use 8) and each sweep is a pass
/// over the fitted tokens, so more is only a hang.
constexpr int32_t kLloydIters = 1000;
/// residual_length (KIVI) and refit_interval (kvquant): tokens that wait
/// fp16; 2^20 is longer than any context in use.
constexpr int32_t kWaitTokens = 1 << 20;
/// Tokens one layer may hold (and so n_tokens of one update): 2^32 is
/// ~400x the longest contexts in use.
constexpr int64_t kLayerTokens = int64_t{1} << 32;
/// Largest |query element| attend accepts: with it every score (a sum of at
/// most kHeadDim products of a query element and a key element, which is
/// below 2^18 even for 8-bit KIVI codes times their scale) stays below
/// 2^16 * 2^64 * 2^18 = 2^98, far from float overflow (2^128), so the
/// softmax never sees Inf or NaN. No activation is near 2^64.
constexpr float kQueryMagnitude = 18446744073709551616.0f; // 2^64
/// Elements (rows * cols) of a stateless kernel's matrix: 2^48 elements of
/// f32 are 1 PiB, more than any address space in use, and every derived
/// size (up to 512 bytes of level table per element at group 1) stays
/// below 2^57.
constexpr int64_t kKernelElements = int64_t{1} << 48;
} // namespace limits

static_assert(limits::kLayers <= INT32_MAX && limits::kKvHeads <= INT32_MAX &&
                  limits::kHeadDim <= INT32_MAX &&
                  limits::kSinkTokens <= INT32_MAX &&
                  limits::kLloydIters <= INT32_MAX &&
                  limits::kWaitTokens <= INT32_MAX,
              "every configuration field fits the int32 the C ABI carries");

} // namespace kvq

#endif // KVQ_CONFIG_LIMITS_H
