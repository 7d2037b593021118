//===- eval_configs.cpp - The configurations kvq-eval evaluates -----------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//===----------------------------------------------------------------------===//
#include "eval_configs.h"

#include <algorithm>
#include <cstdio>
#include <map>

namespace kvq::eval {

namespace {

/// Which flags each method uses; a flag given for a method that ignores
/// it is a warning (fp16 is exempt when it is only the baseline).
void warnIgnoredFlags(const Options &opt, Warnings &warn) {
  std::map<std::string, std::vector<std::string>> applies = {
      {"--bits", {"kivi", "kivi_sink", "kvquant"}},
      {"--residual-mode", {"kivi", "kivi_sink"}}};
  for (const Sweep &sw : sweeps())
    applies[sw.flag] = sw.methods;
  const bool onlyFp16 = opt.methods.size() == 1 && opt.methods[0] == "fp16";
  for (const auto &[flag, users] : applies) {
    if (!given(opt, flag.c_str()))
      continue;
    std::string ignored;
    for (const std::string &m : opt.methods)
      if (std::find(users.begin(), users.end(), m) == users.end() &&
          (m != "fp16" || onlyFp16))
        ignored += (ignored.empty() ? "" : ", ") + m;
    if (ignored.empty())
      continue;
    std::string users_;
    for (const std::string &u : users)
      users_ += (users_.empty() ? "" : ", ") + u;
    std::string hint;
    if (flag == "--sinks")
      hint = "; kvquant's sinks are --kvquant-sinks";
    warn(flag + " does not apply to " + ignored + " (only to " + users_ +
         "): ignored there" + hint);
  }
}

} // namespace

std::vector<Config> planConfigs(const Options &opt, const Inputs &in,
                                Warnings &warn) {
  warnIgnoredFlags(opt, warn);
  const int64_t H = in.H, D = in.D;
  const float ropeTheta = in.ropeTheta;
  std::vector<Config> configs;
  for (const std::string &m : opt.methods) {
    const kvq_method method = m == "fp16"        ? KVQ_METHOD_FP16
                              : m == "kivi"      ? KVQ_METHOD_KIVI
                              : m == "kivi_sink" ? KVQ_METHOD_KIVI_SINK
                                                 : KVQ_METHOD_KVQUANT;
    std::vector<int> widths = opt.bits;
    if (widths.empty() || method == KVQ_METHOD_FP16)
      widths = {-1};
    // The flags with values for this method; a flag the method does not
    // use does not multiply its configurations.
    std::vector<std::pair<const Sweep *, const std::vector<double> *>> axes;
    for (const Sweep &sw : sweeps()) {
      auto it = opt.lists.find(sw.flag);
      if (it != opt.lists.end() &&
          std::find(sw.methods.begin(), sw.methods.end(), m) !=
              sw.methods.end())
        axes.push_back({&sw, &it->second});
    }
    for (int bits : widths) {
      // Every combination of the axes' values (an odometer, last axis
      // fastest).
      std::vector<size_t> at(axes.size(), 0);
      while (true) {
        Config c;
        c.method = m;
        kvq_config &cfg = c.cfg;
        kvq_config_init(&cfg, method);
        cfg.num_layers = 1;
        cfg.num_kv_heads = static_cast<int32_t>(H);
        cfg.head_dim = static_cast<int32_t>(D);
        if (bits > 0)
          cfg.key_bits = cfg.value_bits = bits;
        if (cfg.head_dim % cfg.group_size != 0)
          cfg.group_size = cfg.head_dim < 32 ? cfg.head_dim : cfg.group_size;
        if (opt.residualMode >= 0)
          cfg.residual_mode = opt.residualMode;
        for (size_t i = 0; i < axes.size(); ++i) {
          const double x = (*axes[i].second)[at[i]];
          axes[i].first->set(cfg, x);
          if (axes[i].second->size() > 1) {
            char buf[64];
            std::snprintf(buf, sizeof(buf), " %s=%g", axes[i].first->shortName,
                          x);
            c.swept += buf;
          }
        }
        if (method != KVQ_METHOD_FP16) {
          c.keyBits = cfg.key_bits;
          c.valueBits = cfg.value_bits;
        }
        if (opt.preRope) {
          cfg.rope_style = opt.ropeStyle;
          cfg.rope_theta = ropeTheta;
          c.rope = " pre-RoPE";
        }
        configs.push_back(c);
        if (opt.ropeCompare) { // its twin on the rotated keys, next to it
          c.cfg.rope_style = KVQ_ROPE_NONE;
          c.rope = " post-RoPE";
          configs.push_back(c);
        }
        size_t i = axes.size();
        while (i > 0 && ++at[i - 1] == axes[i - 1].second->size())
          at[--i] = 0;
        if (i == 0)
          break;
      }
    }
  }

  return configs;
}

} // namespace kvq::eval
