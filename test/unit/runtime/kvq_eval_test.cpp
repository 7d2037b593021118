//===- kvq_eval_test.cpp - The kvq-eval tool end to end -------------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Writes .npy, .npz and .safetensors files with the project's writers (and
// hand-made bytes for bad ones), runs the kvq-eval binary and checks its
// JSON/table output, that every layout and format gives the numbers of the
// equivalent [tokens, heads, dim] .npy, and exit status 2 with a one-line
// message for every kind of bad input.
//
//===----------------------------------------------------------------------===//
#include "npy.h"
#include "tensor_io.h"
#include "test_util.h"

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <sys/wait.h>
#include <vector>

namespace {

/// A scratch path private to the running test: ctest runs the tests of
/// this file as parallel processes, which must not share input files.
std::string tmp(const std::string &name) {
  const ::testing::TestInfo *test =
      ::testing::UnitTest::GetInstance()->current_test_info();
  std::string owner =
      test ? std::string(test->test_suite_name()) + "." + test->name()
           : "global";
  return std::string(KVQ_EVAL_TMP) + "/kvq_eval_test_" + owner + "_" + name;
}

/// A file of test/data/kvq-eval, made by NumPy itself (np.save,
/// np.savez_compressed: make_npz_compressed.py there), found in the source
/// tree (KVQ_SOURCE_ROOT).
std::string numpyFile(const std::string &name) {
  return std::string(KVQ_SOURCE_ROOT) + "/test/data/kvq-eval/" + name;
}

using json = nlohmann::json;

struct RunResult {
  int status = -1;
  std::string out;    ///< stdout and stderr together
  std::string stdOut; ///< stdout alone
  std::string stdErr; ///< stderr alone
};

/// Run kvq-eval with `args`.
RunResult runTool(const std::string &args) {
  RunResult r;
  const std::string errFile = tmp("stderr.txt");
  std::string cmd = std::string(KVQ_EVAL_PATH) + " " + args + " 2>" + errFile;
  FILE *p = popen(cmd.c_str(), "r");
  if (!p)
    return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0)
    r.stdOut.append(buf, n);
  int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  std::ifstream e(errFile, std::ios::binary);
  r.stdErr.assign(std::istreambuf_iterator<char>(e),
                  std::istreambuf_iterator<char>());
  r.out = r.stdOut + r.stdErr;
  return r;
}

/// The JSON document of a --json run (null when it does not parse).
json parse(const RunResult &r) {
  json j = json::parse(r.stdOut, nullptr, false);
  return j.is_discarded() ? json() : j;
}

std::vector<float> randomData(uint64_t seed, size_t n, double scale = 1.0) {
  std::mt19937_64 gen(seed);
  std::vector<float> v(n);
  for (float &f : v) {
    double u1 = (static_cast<double>(gen() >> 11) + 0.5) / 9007199254740992.0;
    double u2 = (static_cast<double>(gen() >> 11) + 0.5) / 9007199254740992.0;
    f = static_cast<float>(scale * std::sqrt(-2 * std::log(u1)) *
                           std::cos(6.283185307179586 * u2));
  }
  return v;
}

void writeOrDie(const std::string &path, std::vector<int64_t> shape,
                const std::vector<float> &data, bool half) {
  std::string err;
  ASSERT_TRUE(kvq::npy::write(path, shape, data, half, err)) << err;
}

/// A number of a row (nested keys with '.'), NaN when absent or null.
double field(const json &obj, const std::string &key) {
  const json *at = &obj;
  size_t start = 0;
  while (true) {
    size_t dot = key.find('.', start);
    std::string k = key.substr(
        start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!at->is_object() || !at->contains(k))
      return NAN;
    at = &(*at)[k];
    if (dot == std::string::npos)
      break;
    start = dot + 1;
  }
  return at->is_number() ? at->get<double>() : NAN;
}

/// The first row of `method` (layer 0) in kvq-eval --json output.
json object(const RunResult &r, const std::string &method, int bits = -1,
            int64_t layer = 0) {
  json doc = parse(r);
  if (!doc.is_object() || !doc.contains("rows"))
    return json();
  for (const json &row : doc["rows"])
    if (row["method"] == method && row["layer"] == layer &&
        (bits < 0 || row["key_bits"] == bits))
      return row;
  return json();
}

class KvqEval : public ::testing::Test {
protected:
  void SetUp() override {
    // 96 tokens, 2 KV heads, head_dim 32; a planted high-norm token at 50.
    std::vector<float> k = randomData(1, 96 * 64), v = randomData(2, 96 * 64);
    for (int i = 0; i < 64; ++i)
      k[50 * 64 + i] *= 25.0f;
    writeOrDie(tmp("k.npy"), {96, 2, 32}, k, true);
    writeOrDie(tmp("v.npy"), {96, 2, 32}, v, true);
    writeOrDie(tmp("q.npy"), {96, 4, 32}, randomData(3, 96 * 128, 0.3), true);
  }
  std::string inputs() const {
    return "--keys " + tmp("k.npy") + " --values " + tmp("v.npy");
  }
};

/// What kvq-eval must report for one method on the fixture's K/V, found
/// without the tool: the same cache driven through the C ABI (a 64-token
/// prefill, then one token per update), its fetch compared in float64 with
/// the fp16 input, and its stats.
struct Direct {
  double keyMse = 0, valueMse = 0;
  int64_t totalBytes = 0;
};

Direct direct(kvq_method m) {
  std::vector<float> k = randomData(1, 96 * 64), v = randomData(2, 96 * 64);
  for (int i = 0; i < 64; ++i)
    k[50 * 64 + i] *= 25.0f;
  for (auto *x : {&k, &v})
    for (float &f : *x)
      f = kvqtest::fromHalf(kvqtest::toHalf(f)); // the .npy files are fp16
  kvq_config c = kvqtest::config(m, 2, 32);
  if (m != KVQ_METHOD_KVQUANT) {
    c.group_size = 16;
    c.residual_length = 16;
  }
  if (m == KVQ_METHOD_KIVI_SINK)
    c.n_sink_tokens = 2;
  kvqtest::Cache cache(c);
  for (int64_t t = 0; t < 96; t = t ? t + 1 : 64)
    EXPECT_EQ(kvq_cache_update(cache.h, 0, k.data() + t * 64, v.data() + t * 64,
                               t ? 1 : 64, KVQ_DTYPE_F32),
              KVQ_OK);
  kvqtest::Fetched f = kvqtest::fetch(cache.h);
  Direct d;
  d.keyMse = kvqtest::mse(k, f.k);
  d.valueMse = kvqtest::mse(v, f.v);
  d.totalBytes = kvqtest::stats(cache.h).total_bytes;
  return d;
}

} // namespace

TEST_F(KvqEval, JsonReportsEveryFieldForEveryMethod) {
  RunResult r = runTool(inputs() + " --queries " + tmp("q.npy") +
                        " --method fp16,kivi,kivi_sink,kvquant --group-size 16"
                        " --residual-length 16 --sinks 2 --prefill 64 --json");
  ASSERT_EQ(r.status, 0) << r.out;
  for (const char *m : {"fp16", "kivi", "kivi_sink", "kvquant"}) {
    json o = object(r, m);
    ASSERT_FALSE(o.is_null()) << m << "\n" << r.out;
    for (const char *key :
         {"key_bits", "value_bits", "key_mse", "value_mse", "attn_rel_err",
          "effective_bits", "fp16_bytes", "bytes.codes", "bytes.scale_zero",
          "bytes.level_tables", "bytes.outliers", "bytes.sinks",
          "bytes.residual", "bytes.total", "key_rel_err", "value_rel_err",
          "config.key_bits"})
      EXPECT_FALSE(std::isnan(field(o, key))) << m << " " << key;
    EXPECT_EQ(field(o, "fp16_bytes"), 96 * 64 * 2 * 2) << m;
    EXPECT_EQ(o.contains("sink_positions"), std::string(m) == "kivi_sink");
    // SNR is infinite (JSON null) only where nothing was lost.
    EXPECT_EQ(std::isnan(field(o, "key_snr_db")), std::string(m) == "fp16");
  }
  json fp16 = object(r, "fp16"), kivi = object(r, "kivi"),
       sink = object(r, "kivi_sink"), kvq = object(r, "kvquant");
  EXPECT_EQ(field(fp16, "key_mse"), 0.0);
  EXPECT_EQ(field(fp16, "attn_rel_err"), 0.0);
  EXPECT_EQ(field(fp16, "effective_bits"), 16.0);
  EXPECT_EQ(field(kivi, "key_bits"), 2);
  EXPECT_EQ(field(kvq, "key_bits"), 3);
  // The tool's numbers are the cache's, measured independently above.
  for (auto [name, m] : {std::pair{"kivi", KVQ_METHOD_KIVI},
                         std::pair{"kivi_sink", KVQ_METHOD_KIVI_SINK},
                         std::pair{"kvquant", KVQ_METHOD_KVQUANT}}) {
    json o = object(r, name);
    Direct d = direct(m);
    EXPECT_NEAR(field(o, "key_mse"), d.keyMse, 1e-9 * d.keyMse) << name;
    EXPECT_NEAR(field(o, "value_mse"), d.valueMse, 1e-9 * d.valueMse) << name;
    EXPECT_EQ(field(o, "bytes.total"), d.totalBytes) << name;
    EXPECT_DOUBLE_EQ(field(o, "effective_bits"),
                     8.0 * d.totalBytes / (96 * 64 * 2))
        << name;
  }
  EXPECT_GT(field(kivi, "attn_rel_err"), 0.0);
  EXPECT_LT(field(kivi, "bytes.total"), field(kivi, "fp16_bytes"));
  EXPECT_LT(field(sink, "key_mse"), field(kivi, "key_mse"));
  const std::vector<int64_t> positions = sink["sink_positions"];
  EXPECT_NE(std::find(positions.begin(), positions.end(), 50), positions.end())
      << sink;
  // What was measured is recorded: inputs, layout, configuration, version;
  // flags that do not apply to a method are warnings.
  json doc = parse(r);
  EXPECT_EQ(doc["tool"], "kvq-eval");
  EXPECT_TRUE(doc["kvq_version"].is_string());
  EXPECT_EQ(doc["layout"], "thd");
  EXPECT_EQ(doc["inputs"]["keys"]["shape"], json({96, 2, 32}));
  EXPECT_EQ(doc["inputs"]["keys"]["dtype"], "float16");
  EXPECT_EQ(doc["inputs"]["queries"]["format"], "npy");
  EXPECT_EQ(kivi["config"]["group_size"], 16);
  EXPECT_EQ(kivi["config"]["residual_length"], 16);
  EXPECT_EQ(sink["config"]["n_sink_tokens"], 2);
  EXPECT_EQ(kvq["config"]["refit_interval"], 128);
  EXPECT_EQ(doc["summary"].size(), 4u);
  std::string warnings = doc["warnings"].dump();
  EXPECT_NE(warnings.find("--sinks does not apply to kivi, kvquant"),
            std::string::npos)
      << warnings;
  EXPECT_NE(warnings.find("--group-size does not apply to kvquant"),
            std::string::npos)
      << warnings;
  EXPECT_NE(r.stdErr.find("kvq-eval: warning: --sinks"), std::string::npos);
}

TEST_F(KvqEval, TableByDefaultAndBitsFlag) {
  RunResult r =
      runTool(inputs() + " --method kivi,kvquant --bits 4 --group-size 32");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("method"), std::string::npos);
  EXPECT_NE(r.out.find("kvquant"), std::string::npos);
  EXPECT_NE(r.out.find("    4     4"), std::string::npos) << r.out;
  RunResult j =
      runTool(inputs() + " --method kivi --residual-mode block --residual-length 32 "
                         "--group-size 16 --json");
  ASSERT_EQ(j.status, 0) << j.out;
  EXPECT_EQ(j.out.find("attn_rel_err"), std::string::npos); // no queries
  // --flag=value is the same as --flag value.
  RunResult e = runTool(inputs() + " --method=kivi --residual-mode=block "
                                   "--residual-length=32 --group-size=16 --json");
  ASSERT_EQ(e.status, 0) << e.out;
  EXPECT_EQ(parse(e)["rows"], parse(j)["rows"]);
}

/// 300 tokens whose keys drift after position 128: every channel moves
/// from around +2 to around -2 (as RoPE turns a slow channel pair away from
/// where the prompt left it), inside the prefill's largest magnitude.
void writeDrifting(const std::string &k, const std::string &v,
                   const std::string &q) {
  std::vector<float> keys = randomData(11, 300 * 64, 0.5);
  for (size_t i = 0; i < keys.size(); ++i)
    keys[i] += i < 128 * 64 ? 2.0f : -2.0f;
  writeOrDie(k, {300, 2, 32}, keys, false);
  writeOrDie(v, {300, 2, 32}, randomData(12, 300 * 64), false);
  writeOrDie(q, {300, 4, 32}, randomData(13, 300 * 128, 0.3), false);
}

TEST(KvqEvalProtocol, DefaultIsPromptPrefillThenDecodeWithSplitErrors) {
  writeDrifting(tmp("k.npy"), tmp("v.npy"), tmp("q.npy"));
  const std::string in = "--keys " + tmp("k.npy") + " --values " +
                         tmp("v.npy") + " --queries " + tmp("q.npy");
  RunResult r = runTool(in + " --method fp16,kivi,kivi_sink,kvquant --json");
  ASSERT_EQ(r.status, 0) << r.out;
  for (const char *m : {"fp16", "kivi", "kivi_sink", "kvquant"}) {
    json o = object(r, m);
    ASSERT_FALSE(o.is_null()) << m << "\n" << r.out;
    EXPECT_EQ(field(o, "prefill_tokens"), 128) << o;
    EXPECT_EQ(field(o, "decoded_tokens"), 172) << o;
    for (const char *key :
         {"key_mse_prefill", "key_mse_decode", "value_mse_prefill",
          "value_mse_decode", "attn_rel_err_prefill", "attn_rel_err_decode"})
      EXPECT_FALSE(std::isnan(field(o, key))) << m << " " << key;
    // The whole is the token-weighted mean of the parts.
    EXPECT_NEAR(
        field(o, "key_mse"),
        (128 * field(o, "key_mse_prefill") + 172 * field(o, "key_mse_decode")) /
            300,
        1e-6 * (1 + field(o, "key_mse")))
        << o;
    EXPECT_NEAR(field(o, "value_mse"),
                (128 * field(o, "value_mse_prefill") +
                 172 * field(o, "value_mse_decode")) /
                    300,
                1e-6 * (1 + field(o, "value_mse")))
        << o;
  }
  // fp16 only rounds the f32 input.
  EXPECT_LT(field(object(r, "fp16"), "attn_rel_err_decode"), 1e-3);
  // The library's default kvquant keeps decoded keys in line with the
  // prefill's on drifting keys; the seed's frozen levels do not.
  json kvq = object(r, "kvquant");
  EXPECT_EQ(field(kvq, "refit_interval"), 128) << kvq;
  EXPECT_LE(field(kvq, "key_mse_decode"), 2 * field(kvq, "key_mse_prefill"))
      << kvq;
  EXPECT_FALSE(object(r, "kivi").contains("refit_interval"));
  RunResult frozen =
      runTool(in + " --method kvquant --refit-interval 0 --json");
  ASSERT_EQ(frozen.status, 0) << frozen.out;
  json fz = object(frozen, "kvquant");
  EXPECT_EQ(field(fz, "refit_interval"), 0) << fz;
  EXPECT_GT(field(fz, "key_mse_decode"), 4 * field(fz, "key_mse_prefill"))
      << fz;

  // The table names the protocol, shows both parts and warns about the
  // frozen levels without being asked.
  RunResult t = runTool(in + " --method kvquant --refit-interval 0");
  ASSERT_EQ(t.status, 0) << t.out;
  EXPECT_NE(t.out.find("a 128-token prefill, then 172 decode steps"),
            std::string::npos)
      << t.out;
  EXPECT_NE(t.out.find(" prefill "), std::string::npos) << t.out;
  EXPECT_NE(t.out.find(" decode "), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("warning: kvquant: key MSE of the decoded tokens is"),
            std::string::npos)
      << t.out;
  RunResult d = runTool(in + " --method kvquant");
  ASSERT_EQ(d.status, 0) << d.out;
  EXPECT_EQ(d.out.find("warning"), std::string::npos) << d.out;
}

TEST(KvqEvalProtocol, PrefillFlagAndFitAll) {
  writeDrifting(tmp("k.npy"), tmp("v.npy"), tmp("q.npy"));
  const std::string in = "--keys " + tmp("k.npy") + " --values " +
                         tmp("v.npy") + " --queries " + tmp("q.npy");
  RunResult r = runTool(in + " --method kivi --prefill 200 --json");
  ASSERT_EQ(r.status, 0) << r.out;
  json o = object(r, "kivi");
  EXPECT_EQ(field(o, "prefill_tokens"), 200) << o;
  EXPECT_EQ(field(o, "decoded_tokens"), 100) << o;
  // --fit-all: one update of everything, the old protocol; no decode part.
  RunResult a = runTool(in + " --method kvquant --fit-all --json");
  ASSERT_EQ(a.status, 0) << a.out;
  json fa = object(a, "kvquant");
  EXPECT_EQ(field(fa, "prefill_tokens"), 300) << fa;
  EXPECT_EQ(field(fa, "decoded_tokens"), 0) << fa;
  EXPECT_TRUE(fa["key_mse_decode"].is_null()) << fa;
  EXPECT_TRUE(fa["attn_rel_err_decode"].is_null()) << fa;
  EXPECT_EQ(field(fa, "key_mse"), field(fa, "key_mse_prefill")) << fa;
  RunResult at = runTool(in + " --method kvquant --fit-all");
  ASSERT_EQ(at.status, 0) << at.out;
  EXPECT_NE(at.out.find("one update of all of them (--fit-all)"),
            std::string::npos)
      << at.out;
  EXPECT_EQ(at.out.find("\n                       decode "), std::string::npos)
      << at.out; // no decode row
  // A dump shorter than the default prompt: all but one token prefill.
  writeOrDie(tmp("k5.npy"), {5, 2, 32}, randomData(14, 5 * 64), false);
  RunResult s = runTool("--keys " + tmp("k5.npy") + " --values " +
                        tmp("k5.npy") + " --method fp16 --json");
  ASSERT_EQ(s.status, 0) << s.out;
  EXPECT_EQ(field(object(s, "fp16"), "prefill_tokens"), 4) << s.out;
  EXPECT_EQ(field(object(s, "fp16"), "decoded_tokens"), 1) << s.out;
}

TEST_F(KvqEval, BadInputExitsTwoWithOneLine) {
  auto expectTwo = [&](const std::string &args, const std::string &word) {
    RunResult r = runTool(args);
    EXPECT_EQ(r.status, 2) << args << "\n" << r.out;
    EXPECT_EQ(r.out.rfind("kvq-eval: ", 0), 0u) << r.out;
    EXPECT_NE(r.out.find(word), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << "one line: " << r.out;
    EXPECT_TRUE(r.stdOut.empty()) << r.stdOut;
  };
  expectTwo("--keys " + tmp("missing.npy") + " --values " + tmp("v.npy") +
                " --method kivi",
            "cannot open");
  auto raw = [&](const std::string &name, const std::string &dict,
                 size_t dataBytes) {
    std::string h = dict;
    h.append((64 - (10 + h.size() + 1) % 64) % 64, ' ');
    h += '\n';
    std::ofstream f(tmp(name), std::ios::binary);
    const char head[] = {'\x93',
                         'N',
                         'U',
                         'M',
                         'P',
                         'Y',
                         1,
                         0,
                         static_cast<char>(h.size() & 0xff),
                         static_cast<char>(h.size() >> 8)};
    f.write(head, 10);
    f << h << std::string(dataBytes, '\0');
  };
  raw("fortran.npy",
      "{'descr': '<f4', 'fortran_order': True, 'shape': (96, 2, 32), }",
      96 * 64 * 4);
  raw("big.npy",
      "{'descr': '>f4', 'fortran_order': False, 'shape': (96, 2, 32), }",
      96 * 64 * 4);
  raw("int.npy",
      "{'descr': '<i4', 'fortran_order': False, 'shape': (96, 2, 32), }",
      96 * 64 * 4);
  raw("short.npy",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (96, 2, 32), }",
      96 * 64 * 4 - 1);
  raw("twod.npy",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (96, 64), }",
      96 * 64 * 4);
  std::ofstream(tmp("junk.npy")) << "not numpy";
  const std::string v = " --values " + tmp("v.npy") + " --method kivi";
  expectTwo("--keys " + tmp("fortran.npy") + v, "fortran");
  expectTwo("--keys " + tmp("big.npy") + v, "big-endian");
  expectTwo("--keys " + tmp("int.npy") + v, "'<i4'");
  expectTwo("--keys " + tmp("short.npy") + v, "truncated");
  expectTwo("--keys " + tmp("twod.npy") + v, "2-D");
  expectTwo("--keys " + tmp("junk.npy") + v, "magic");
  writeOrDie(tmp("v_other.npy"), {95, 2, 32}, randomData(4, 95 * 64), false);
  expectTwo("--keys " + tmp("k.npy") + " --values " + tmp("v_other.npy") +
                " --method kivi",
            "shapes differ");
  writeOrDie(tmp("q3.npy"), {96, 3, 32}, randomData(5, 96 * 96), false);
  expectTwo(inputs() + " --queries " + tmp("q3.npy") + " --method kivi",
            "multiple of kv_heads");
  expectTwo(inputs() + " --method kivi,zip", "unknown method");
  expectTwo(inputs() + " --method kivi --frobnicate", "unknown option");
  expectTwo(inputs() + " --method kivi --prefill 500", "exceeds");
  expectTwo(inputs() + " --method kivi --prefill 0", "at least 1");
  expectTwo(inputs() + " --method kivi --fit-all --prefill 8", "exclude");
  expectTwo(inputs() + " --method kivi --residual-mode ring",
            "sliding or block");
  expectTwo(inputs() + " --method kivi --bits 5", "bits");
  expectTwo(inputs() + " --method kivi --group-size 12", "does not divide");
}

TEST(Npy, WriterAndReaderRoundTrip) {
  std::vector<float> data = {0.5f, -1.25f, 3.0f, 65504.0f, 1e-3f, 0.0f};
  std::string err;
  for (bool half : {false, true}) {
    ASSERT_TRUE(kvq::npy::write(tmp("rt.npy"), {2, 3}, data, half, err));
    kvq::npy::Array a;
    ASSERT_TRUE(kvq::npy::read(tmp("rt.npy"), a, err)) << err;
    EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(a.wasHalf, half);
    for (size_t i = 0; i < data.size(); ++i)
      EXPECT_EQ(a.data[i],
                half ? kvq::npy::halfToFloat(kvq::npy::floatToHalf(data[i]))
                     : data[i]);
    // NumPy aligns the data to 64 bytes.
    std::ifstream f(tmp("rt.npy"), std::ios::binary | std::ios::ate);
    EXPECT_EQ((static_cast<size_t>(f.tellg()) - data.size() * (half ? 2 : 4)) %
                  64,
              0u);
  }
  // A version 2.0 header (4-byte length) parses too.
  std::string dict =
      "{'descr': '<f2', 'fortran_order': False, 'shape': (2,), }";
  std::vector<uint8_t> bytes = {
      0x93, 'N', 'U', 'M', 'P', 'Y', 2, 0, static_cast<uint8_t>(dict.size()),
      0,    0,   0};
  bytes.insert(bytes.end(), dict.begin(), dict.end());
  for (uint8_t b : {0x00, 0x3c, 0x00, 0xc0}) // 1.0, -2.0
    bytes.push_back(b);
  kvq::npy::Array a;
  ASSERT_TRUE(kvq::npy::parse(bytes, a, err)) << err;
  EXPECT_EQ(a.data, (std::vector<float>{1.0f, -2.0f}));
}

//===----------------------------------------------------------------------===//
// Formats and layouts: every one gives the numbers of the equivalent
// [tokens, heads, dim] .npy files.
//===----------------------------------------------------------------------===//

namespace {

using kvq::tio::DType;

constexpr int64_t kL = 2, kT = 40, kH = 2, kHq = 4, kD = 16;

/// Element (l, t, h, d) of a dump with `heads` heads.
float at(const std::vector<float> &x, int64_t heads, int64_t l, int64_t t,
         int64_t h, int64_t d) {
  return x[static_cast<size_t>(((l * kT + t) * heads + h) * kD + d)];
}

/// `x` ([L, T, heads, D]) rearranged to `layout` (letters of lbthd; b = 1).
std::vector<float> arrange(const std::vector<float> &x, int64_t heads,
                           const std::string &layout, int64_t layer,
                           std::vector<int64_t> &shape) {
  shape.clear();
  for (char c : layout)
    shape.push_back(c == 'l'   ? kL
                    : c == 'b' ? 1
                    : c == 't' ? kT
                    : c == 'h' ? heads
                               : kD);
  std::vector<float> out;
  int64_t idx[5] = {0, 0, 0, 0, 0};
  const size_t n = layout.size();
  while (true) {
    int64_t l = layer, t = 0, h = 0, d = 0;
    for (size_t i = 0; i < n; ++i) {
      char c = layout[i];
      if (c == 'l')
        l = idx[i];
      else if (c == 't')
        t = idx[i];
      else if (c == 'h')
        h = idx[i];
      else if (c == 'd')
        d = idx[i];
    }
    out.push_back(at(x, heads, l, t, h, d));
    size_t i = n;
    while (i-- > 0) {
      if (++idx[i] < shape[i])
        break;
      idx[i] = 0;
    }
    if (i == static_cast<size_t>(-1))
      break;
  }
  return out;
}

/// Values as the file stores them (rounded to the dtype), as float.
std::vector<float> rounded(std::vector<float> x, DType dt) {
  for (float &f : x)
    f = dt == DType::F16    ? kvq::npy::halfToFloat(kvq::npy::floatToHalf(f))
        : dt == DType::BF16 ? kvq::tio::bf16ToFloat(kvq::tio::floatToBf16(f))
                            : f;
  return x;
}

void writeBytes(const std::string &path, const std::vector<uint8_t> &b) {
  std::string err;
  ASSERT_TRUE(kvq::tio::writeFile(path, b, err)) << err;
}

const char *kCmp[] = {"key_mse",        "value_mse",    "key_rel_err",
                      "value_rel_err",  "attn_rel_err", "attn_rel_err_decode",
                      "effective_bits", "bytes.total"};

class KvqEvalFormats : public ::testing::Test {
protected:
  std::vector<float> k, v, q; ///< [L, T, H(q), D]
  void SetUp() override {
    k = randomData(21, kL * kT * kH * kD);
    v = randomData(22, kL * kT * kH * kD);
    q = randomData(23, kL * kT * kHq * kD, 0.3);
  }
  /// Reference: per-layer thd .npy files of the values as stored in dt.
  json reference(int64_t layer, DType dt) {
    std::vector<int64_t> s;
    const std::string tag = "ref" + std::to_string(layer) + dtName(dt);
    for (auto [name, x, heads] :
         {std::tuple<const char *, std::vector<float> *, int64_t>{"k", &k, kH},
          {"v", &v, kH},
          {"q", &q, kHq}}) {
      std::vector<float> a = rounded(arrange(*x, heads, "thd", layer, s), dt);
      writeBytes(tmp(tag + name + ".npy"),
                 kvq::tio::npyImage(s, a, DType::F32));
    }
    RunResult r = runTool("--keys " + tmp(tag + "k.npy") + " --values " +
                          tmp(tag + "v.npy") + " --queries " +
                          tmp(tag + "q.npy") + " " + kMethods + " --json");
    EXPECT_EQ(r.status, 0) << r.out;
    return parse(r);
  }
  static std::string dtName(DType dt) { return kvq::tio::dtypeName(dt); }
  void expectSame(const json &got, const json &ref, int64_t layer,
                  const std::string &what) {
    ASSERT_TRUE(got.is_object()) << what;
    ASSERT_TRUE(ref.is_object() && ref["rows"].size() == 5u) << what;
    for (const json &row : ref["rows"]) {
      const json *match = nullptr;
      for (const json &g : got["rows"])
        if (g["layer"] == layer && g["method"] == row["method"] &&
            g["key_bits"] == row["key_bits"])
          match = &g;
      ASSERT_NE(match, nullptr) << what << " " << row["method"];
      for (const char *key : kCmp)
        EXPECT_EQ(field(*match, key), field(row, key))
            << what << " layer " << layer << " " << row["method"] << " " << key;
    }
  }
  static constexpr const char *kMethods =
      "--method fp16,kivi,kvquant --bits 2,4 --group-size 16 --residual-length 16 "
      "--prefill 24";
};

} // namespace

TEST_F(KvqEvalFormats, EveryLayoutOfNpyMatchesThd) {
  for (DType dt : {DType::F32, DType::F16}) {
    const json ref0 = reference(0, dt), ref1 = reference(1, dt);
    for (const char *layout : {"thd", "htd", "bhtd", "tbhd", "lbhtd", "ltdh"}) {
      const std::string L = layout;
      const bool multi = L.find('l') != std::string::npos;
      std::string args;
      for (auto [name, x, heads] :
           {std::tuple<const char *, std::vector<float> *, int64_t>{"k", &k,
                                                                    kH},
            {"v", &v, kH},
            {"q", &q, kHq}}) {
        std::vector<int64_t> s;
        std::vector<float> a = arrange(*x, heads, L, 0, s);
        const std::string f = tmp(L + name + dtName(dt) + ".npy");
        writeBytes(f, kvq::tio::npyImage(s, a, dt));
        args += std::string(name[0] == 'k'   ? " --keys "
                            : name[0] == 'v' ? " --values "
                                             : " --queries ") +
                f;
      }
      RunResult r =
          runTool(args + " --layout " + L + " " + kMethods + " --json");
      ASSERT_EQ(r.status, 0) << L << "\n" << r.out;
      json doc = parse(r);
      EXPECT_EQ(doc["layout"], L);
      EXPECT_EQ(doc["layers"], multi ? kL : 1);
      expectSame(doc, ref0, 0, L + " " + dtName(dt));
      if (multi) {
        expectSame(doc, ref1, 1, L + " " + dtName(dt));
        // The summary of two equal-sized layers: MSE is their mean.
        for (const json &s : doc["summary"]) {
          double m0 = NAN, m1 = NAN;
          for (const json &row : doc["rows"])
            if (row["method"] == s["method"] &&
                row["key_bits"] == s["key_bits"])
              (row["layer"] == 0 ? m0 : m1) = field(row, "key_mse");
          EXPECT_NEAR(field(s, "key_mse"), (m0 + m1) / 2,
                      1e-12 * (1 + m0 + m1));
          EXPECT_EQ(field(s, "units"), 2);
        }
      }
    }
  }
}

TEST_F(KvqEvalFormats, NpzAndSafetensorsMatchNpy) {
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    const json ref0 = reference(0, dt), ref1 = reference(1, dt);
    const std::string L = "lbhtd";
    std::vector<int64_t> sk, sq;
    std::vector<float> ak = arrange(k, kH, L, 0, sk),
                       av = arrange(v, kH, L, 0, sk),
                       aq = arrange(q, kHq, L, 0, sq);
    const std::string st = tmp("kv" + dtName(dt) + ".safetensors");
    writeBytes(st, kvq::tio::safetensorsImage({{"model.k_cache", sk, ak, dt},
                                               {"keys", sk, ak, dt},
                                               {"values", sk, av, dt},
                                               {"queries", sq, aq, dt}}));
    // Default names: one archive serves all three flags; --values may be
    // left out.
    RunResult r = runTool("--keys " + st + " --queries " + st + " --layout " +
                          L + " " + kMethods + " --json");
    ASSERT_EQ(r.status, 0) << r.out;
    json doc = parse(r);
    EXPECT_EQ(doc["inputs"]["values"]["tensor"], "values");
    EXPECT_EQ(doc["inputs"]["keys"]["format"], "safetensors");
    EXPECT_EQ(doc["inputs"]["keys"]["dtype"], dtName(dt));
    expectSame(doc, ref0, 0, "safetensors " + dtName(dt));
    expectSame(doc, ref1, 1, "safetensors " + dtName(dt));
    // FILE:NAME picks a tensor.
    RunResult n = runTool("--keys " + st + ":model.k_cache --values " + st +
                          " --queries " + st + " --layout " + L + " " +
                          kMethods + " --json");
    ASSERT_EQ(n.status, 0) << n.out;
    expectSame(parse(n), ref1, 1, "safetensors by name");
    if (dt == DType::BF16)
      continue; // NumPy has no bfloat16
    // .npz with the short names k/v/q, as np.savez(f, k=..., v=..., q=...).
    const std::string npz = tmp("kv" + dtName(dt) + ".npz");
    std::string err;
    ASSERT_TRUE(kvq::tio::writeNpz(npz,
                                   {{"k", kvq::tio::npyImage(sk, ak, dt)},
                                    {"v", kvq::tio::npyImage(sk, av, dt)},
                                    {"q", kvq::tio::npyImage(sq, aq, dt)}},
                                   err))
        << err;
    RunResult z = runTool("--keys " + npz + " --values " + npz + " --queries " +
                          npz + " --layout " + L + " " + kMethods + " --json");
    ASSERT_EQ(z.status, 0) << z.out;
    json zd = parse(z);
    EXPECT_EQ(zd["inputs"]["queries"]["tensor"], "q");
    EXPECT_EQ(zd["inputs"]["keys"]["format"], "npz");
    expectSame(zd, ref0, 0, "npz " + dtName(dt));
    expectSame(zd, ref1, 1, "npz " + dtName(dt));
  }
}

TEST(KvqEvalNumpy, CompressedNpzMatchesNpy) {
  // np.savez_compressed (deflate) archives against np.save files of the
  // same arrays: f32 [tokens, heads, dim] with long names, and f16
  // [batch, heads, tokens, dim] with the short names k/v/q.
  const std::string flags = " --method fp16,kivi,kivi_sink,kvquant "
                            "--bits 2,4 --prefill 24 --json";
  for (const char *dt : {"", "_f16"}) {
    const std::string d = dt;
    RunResult plain =
        runTool("--keys " + numpyFile("k" + d + ".npy") + " --values " +
                numpyFile("v" + d + ".npy") + " --queries " +
                numpyFile("q" + d + ".npy") + flags);
    ASSERT_EQ(plain.status, 0) << plain.out;
    const std::string npz = numpyFile(
        d.empty() ? "kvq_compressed.npz" : "kvq_compressed_f16_bhtd.npz");
    RunResult packed = runTool("--keys " + npz + " --queries " + npz +
                               (d.empty() ? "" : " --layout bhtd") + flags);
    ASSERT_EQ(packed.status, 0) << packed.out;
    const json a = parse(plain), b = parse(packed);
    const json &in = b["inputs"]["keys"];
    EXPECT_EQ(in["format"], "npz");
    EXPECT_EQ(in["tensor"], d.empty() ? "keys" : "k");
    EXPECT_EQ(in["dtype"], d.empty() ? "float32" : "float16");
    EXPECT_EQ(in["shape"],
              d.empty() ? json({96, 2, 32}) : json({1, 2, 96, 32}));
    EXPECT_EQ(b["inputs"]["values"]["tensor"], d.empty() ? "values" : "v");
    EXPECT_EQ(b["inputs"]["queries"]["tensor"], d.empty() ? "queries" : "q");
    ASSERT_EQ(a["rows"].size(), 7u);
    ASSERT_EQ(b["rows"].size(), 7u);
    for (size_t i = 0; i < 7; ++i) {
      // (fp16 stores float16 input exactly)
      if (!(d == "_f16" && a["rows"][i]["method"] == "fp16"))
        EXPECT_GT(field(a["rows"][i], "attn_rel_err"), 0) << d << " row " << i;
      EXPECT_EQ(a["rows"][i], b["rows"][i]) << d << " row " << i;
    }
  }
}

TEST(KvqEvalNumpy, LayoutsAndLayersMatchNpy) {
  // NumPy-made htd files and a two-layer lbhtd np.savez archive against
  // np.save's [tokens, heads, dim] files of each layer.
  const std::string flags = " --method fp16,kivi,kivi_sink,kvquant "
                            "--bits 2,4 --prefill 24 --json";
  auto run = [&](const std::string &k, const std::string &v,
                 const std::string &q, const std::string &extra) {
    RunResult r =
        runTool("--keys " + numpyFile(k) + " --values " + numpyFile(v) +
                " --queries " + numpyFile(q) + extra + flags);
    EXPECT_EQ(r.status, 0) << r.out;
    return parse(r);
  };
  const json l0 = run("k.npy", "v.npy", "q.npy", ""),
             l1 = run("k1.npy", "v1.npy", "q1.npy", ""),
             htd = run("k_htd.npy", "v_htd.npy", "q_htd.npy", " --layout htd"),
             stacked = run("kvq_layers_lbhtd.npz", "kvq_layers_lbhtd.npz",
                           "kvq_layers_lbhtd.npz", " --layout lbhtd");
  ASSERT_EQ(l0["rows"].size(), 7u);
  ASSERT_EQ(l1["rows"].size(), 7u);
  ASSERT_EQ(htd["rows"].size(), 7u);
  ASSERT_EQ(stacked["rows"].size(), 14u);
  EXPECT_EQ(stacked["layers"], 2);
  EXPECT_EQ(stacked["inputs"]["keys"]["shape"], json({2, 1, 2, 96, 32}));
  for (size_t i = 0; i < 7; ++i) {
    EXPECT_EQ(htd["rows"][i], l0["rows"][i]) << "htd row " << i;
    EXPECT_EQ(stacked["rows"][i], l0["rows"][i]) << "layer 0 row " << i;
    json second = stacked["rows"][7 + i];
    EXPECT_EQ(second["layer"], 1);
    second["layer"] = 0;
    EXPECT_EQ(second, l1["rows"][i]) << "layer 1 row " << i;
    // The layers differ, so the comparison can tell them apart.
    EXPECT_NE(field(l0["rows"][i], "value_mse"),
              field(l1["rows"][i], "value_mse"));
  }
}

TEST_F(KvqEvalFormats, ThreadsAndQueryPositions) {
  std::vector<int64_t> s;
  std::vector<float> ak = arrange(k, kH, "thd", 0, s);
  writeBytes(tmp("k.npy"), kvq::tio::npyImage(s, ak, DType::F32));
  writeBytes(tmp("v.npy"),
             kvq::tio::npyImage(s, arrange(v, kH, "thd", 0, s), DType::F32));
  std::vector<float> aq = arrange(q, kHq, "thd", 0, s);
  writeBytes(tmp("q.npy"), kvq::tio::npyImage(s, aq, DType::F32));
  const std::string in = "--keys " + tmp("k.npy") + " --values " +
                         tmp("v.npy") + " --queries " + tmp("q.npy") + " " +
                         kMethods + " --json";
  RunResult one = runTool(in + " --threads 1"),
            four = runTool(in + " --threads 4");
  ASSERT_EQ(one.status, 0) << one.out;
  ASSERT_EQ(four.status, 0) << four.out;
  EXPECT_EQ(parse(one)["rows"], parse(four)["rows"]);
  RunResult last = runTool(in + " --query-positions last:16");
  ASSERT_EQ(last.status, 0) << last.out;
  json lj = parse(last);
  EXPECT_EQ(lj["query_positions"]["count"], 16);
  // The last 16 positions are all decoded (prefill 24 of 40): the decode
  // part's error is the same as with every position, the prefill part empty.
  const json a = object(one, "kivi", 2), b = object(last, "kivi", 2);
  EXPECT_EQ(field(a, "attn_rel_err_decode"), field(b, "attn_rel_err_decode"));
  EXPECT_TRUE(b["attn_rel_err_prefill"].is_null()) << b;
  EXPECT_EQ(field(a, "key_mse"), field(b, "key_mse"));
  RunResult s1 = runTool(in + " --query-positions sample:10 --seed 7"),
            s2 = runTool(in + " --query-positions=sample:10 --seed=7");
  ASSERT_EQ(s1.status, 0) << s1.out;
  EXPECT_EQ(parse(s1)["rows"], parse(s2)["rows"]);
  EXPECT_EQ(parse(s1)["query_positions"]["seed"], 7);
}

TEST_F(KvqEvalFormats, SweepPlotAndBudget) {
  std::vector<int64_t> s;
  std::vector<float> ak = arrange(k, kH, "thd", 0, s);
  writeBytes(tmp("k.npy"), kvq::tio::npyImage(s, ak, DType::F32));
  writeBytes(tmp("v.npy"),
             kvq::tio::npyImage(s, arrange(v, kH, "thd", 0, s), DType::F32));
  writeBytes(tmp("q.npy"),
             kvq::tio::npyImage(s, arrange(q, kHq, "thd", 0, s), DType::F32));
  const std::string in = "--keys " + tmp("k.npy") + " --values " +
                         tmp("v.npy") + " --queries " + tmp("q.npy") +
                         " --method kivi,kvquant --bits 2,3,4,8 "
                         "--group-size 16 --residual-length 16 --prefill 24";
  std::remove(tmp("sweep.png").c_str());
  RunResult r =
      runTool(in + " --budget 12 --plot " + tmp("sweep.png") + " --json");
  ASSERT_EQ(r.status, 0) << r.out;
  json doc = parse(r);
  EXPECT_EQ(doc["summary"].size(), 8u);
  for (const json &row : doc["summary"]) {
    EXPECT_GT(field(row, "key_snr_db"), 0) << row;
    EXPECT_GT(field(row, "value_rel_err"), 0) << row;
  }
  // Wider is better.
  EXPECT_LT(field(object(r, "kivi", 4), "attn_rel_err"),
            field(object(r, "kivi", 2), "attn_rel_err"));
  const json rec = doc["recommendation"];
  ASSERT_TRUE(rec.is_object()) << doc.dump();
  EXPECT_LE(field(rec, "effective_bits"), 12.0);
  EXPECT_EQ(rec["criterion"], "attn_rel_err");
  // The lowest error among those within the budget.
  for (const json &row : doc["summary"])
    if (field(row, "effective_bits") <= 12)
      EXPECT_LE(field(rec, "error"), field(row, "attn_rel_err"));
  ASSERT_TRUE(rec["kivi"].is_object());
  EXPECT_GE(field(rec, "kivi_error_ratio"), 1.0);
  std::ifstream png(tmp("sweep.png"), std::ios::binary);
  char magic[8] = {0};
  png.read(magic, 8);
  EXPECT_EQ(std::string(magic + 1, 3), "PNG");
  // The table says it too.
  RunResult t = runTool(in + " --budget 12");
  ASSERT_EQ(t.status, 0) << t.out;
  EXPECT_NE(t.out.find("recommendation for 12 bits: "), std::string::npos)
      << t.out;
  EXPECT_NE(t.out.find("plain KIVI in budget"), std::string::npos) << t.out;
}

//===----------------------------------------------------------------------===//
// No silent nonsense and hostile files: the issue's list, one test each.
//===----------------------------------------------------------------------===//

namespace {

/// A .npy with `dict` as its header and `dataBytes` zero bytes of data.
void rawNpy(const std::string &path, const std::string &dict, size_t dataBytes,
            int version = 1) {
  std::string h = dict;
  h.append((64 - (10 + h.size() + 1) % 64) % 64, ' ');
  h += '\n';
  std::ofstream f(path, std::ios::binary);
  if (version == 1) {
    const char head[] = {'\x93',
                         'N',
                         'U',
                         'M',
                         'P',
                         'Y',
                         1,
                         0,
                         static_cast<char>(h.size() & 0xff),
                         static_cast<char>(h.size() >> 8)};
    f.write(head, 10);
  } else {
    const char head[] = {'\x93',
                         'N',
                         'U',
                         'M',
                         'P',
                         'Y',
                         2,
                         0,
                         static_cast<char>(h.size() & 0xff),
                         static_cast<char>((h.size() >> 8) & 0xff),
                         0,
                         0};
    f.write(head, 12);
  }
  f << h << std::string(dataBytes, '\0');
}

void expectTwo(const std::string &args, const std::string &word) {
  RunResult r = runTool(args);
  EXPECT_EQ(r.status, 2) << args << "\n" << r.out;
  EXPECT_EQ(r.out.rfind("kvq-eval: ", 0), 0u) << r.out;
  EXPECT_NE(r.out.find(word), std::string::npos) << args << "\n" << r.out;
  EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << "one line: " << r.out;
  for (char c : r.out)
    EXPECT_TRUE(c == '\n' || (c >= 0x20 && c < 0x7f))
        << "raw byte " << static_cast<int>(static_cast<unsigned char>(c));
}

} // namespace

TEST_F(KvqEval, SilentMisreadsAreRefusedOrWarned) {
  // [8 heads, 256 tokens, 16]: read as thd it would be 8 tokens x 256 heads.
  writeOrDie(tmp("hf.npy"), {8, 256, 16}, randomData(31, 8 * 256 * 16), false);
  const std::string hf =
      "--keys " + tmp("hf.npy") + " --values " + tmp("hf.npy");
  expectTwo(hf + " --method kivi", "--layout htd");
  RunResult ok = runTool(hf + " --method kivi --layout htd --json");
  ASSERT_EQ(ok.status, 0) << ok.out;
  EXPECT_EQ(parse(ok)["tokens"], 256);
  EXPECT_EQ(parse(ok)["kv_heads"], 8);
  RunResult forced = runTool(hf + " --method kivi --layout thd --json");
  ASSERT_EQ(forced.status, 0) << forced.out;
  EXPECT_NE(parse(forced)["warnings"].dump().find("fewer tokens than heads"),
            std::string::npos);
  // A 4-D array needs a layout.
  writeOrDie(tmp("b.npy"), {1, 2, 96, 32}, randomData(32, 2 * 96 * 32), false);
  expectTwo("--keys " + tmp("b.npy") + " --values " + tmp("b.npy") +
                " --method kivi",
            "--layout");
  expectTwo("--keys " + tmp("b.npy") + " --values " + tmp("b.npy") +
                " --method kivi --layout thd",
            "names 3 axes");
  expectTwo(inputs() + " --method kivi --layout tthd", "--layout expects");
  // Nothing quantized: the whole dump fits in the residual window.
  RunResult res = runTool(inputs() + " --method kivi --residual-length 10000 --json");
  ASSERT_EQ(res.status, 0) << res.out;
  EXPECT_NE(parse(res)["warnings"].dump().find("no token was quantized"),
            std::string::npos)
      << res.out;
  EXPECT_NE(res.stdErr.find("kvq-eval: warning: kivi 2-bit: no token"),
            std::string::npos);
  // --sinks means nothing to kvquant; 8-bit kvquant costs more than fp16.
  RunResult kq =
      runTool(inputs() + " --method kvquant --bits 8 --sinks 4 --json");
  ASSERT_EQ(kq.status, 0) << kq.out;
  const std::string w = parse(kq)["warnings"].dump();
  EXPECT_NE(w.find("--sinks does not apply to kvquant"), std::string::npos)
      << w;
  EXPECT_NE(w.find("exceed fp16's 16"), std::string::npos) << w;
}

TEST_F(KvqEval, FlagsAreRangeCheckedBeforeNarrowing) {
  const std::string in = inputs() + " --method kivi,kvquant";
  expectTwo(in + " --bits 4294967298", "--bits expects an integer in [1, 16]");
  expectTwo(in + " --bits 2,x", "--bits expects");
  expectTwo(in + " --bits 2,,3", "empty item");
  expectTwo(in + " --group-size 4294967328", "--group-size expects");
  expectTwo(in + " --residual-length 2147483648", "--residual-length expects");
  expectTwo(in + " --sinks 2147483648", "--sinks expects");
  expectTwo(in + " --lloyd-iters 2147483648", "--lloyd-iters expects");
  expectTwo(in + " --lloyd-iters 1000000", "[0, 100]");
  expectTwo(in + " --refit-interval -1", "--refit-interval expects");
  expectTwo(in + " --prefill 99999999999999999999", "--prefill expects");
  expectTwo(in + " --threads 0", "--threads expects");
  expectTwo(in + " --outlier-fraction 1", "--outlier-fraction expects");
  expectTwo(in + " --outlier-fraction nan", "--outlier-fraction expects");
  expectTwo(in + " --budget 0", "--budget expects");
  expectTwo(in + " --json=yes", "takes no value");
  expectTwo(in + " --bits", "needs a value");
  expectTwo(in + " stray", "unexpected argument");
  expectTwo(in + " --query-positions first:3 --queries " + tmp("q.npy"),
            "--query-positions expects");
  expectTwo(in + " --plot out.svg", "FILE.png");
  // Output files whose directory is missing are refused before the run,
  // with the reason (not a guess about gnuplot).
  expectTwo(in + " --plot " + tmp("no/such/dir/x.png"),
            "its directory does not exist or is not writable");
  expectTwo(in + " --save " + tmp("no/such/dir/c.kvqc"),
            "its directory does not exist or is not writable");
  expectTwo(in + " --save " + std::string(KVQ_EVAL_TMP), "it is a directory");
  RunResult eq = runTool(inputs() + " --method=kivi --bits=3 --json");
  ASSERT_EQ(eq.status, 0) << eq.out;
  EXPECT_EQ(field(object(eq, "kivi"), "key_bits"), 3);
}

TEST_F(KvqEval, ListsOfMethodFlagsAreSwept) {
  // Every combination of the listed values of the flags a method uses; a
  // flag a method ignores does not multiply its rows.
  RunResult r = runTool(inputs() +
                        " --method fp16,kivi,kvquant --bits 2,3 "
                        "--group-size 16,32 --residual-length 16 "
                        "--refit-interval 0,32 --outlier-fraction 0.01 --json");
  ASSERT_EQ(r.status, 0) << r.out;
  const json doc = parse(r);
  ASSERT_EQ(doc["rows"].size(), 9u) << r.out; // fp16 + 2x2 kivi + 2x2 kvquant
  std::map<std::string, int> seen;
  for (const json &row : doc["rows"]) {
    const json &c = row["config"];
    const std::string m = row["method"];
    std::string single = inputs() + " --json --method " + m;
    std::string key = m;
    if (m == "kivi") {
      EXPECT_EQ(c["residual_length"], 16);
      single += " --bits " + std::to_string(int(row["key_bits"])) +
                " --residual-length 16 --group-size " +
                std::to_string(int(c["group_size"]));
      key += std::to_string(int(row["key_bits"])) + "g" +
             std::to_string(int(c["group_size"]));
    } else if (m == "kvquant") {
      EXPECT_FLOAT_EQ(double(c["outlier_fraction"]), 0.01);
      single += " --bits " + std::to_string(int(row["key_bits"])) +
                " --outlier-fraction 0.01 --refit-interval " +
                std::to_string(int(c["refit_interval"]));
      key += std::to_string(int(row["key_bits"])) + "r" +
             std::to_string(int(c["refit_interval"]));
    }
    ++seen[key];
    // The row equals a run with those single values.
    RunResult one = runTool(single);
    ASSERT_EQ(one.status, 0) << one.out;
    const json oneDoc = parse(one);
    ASSERT_EQ(oneDoc["rows"].size(), 1u) << one.out;
    const json &alone = oneDoc["rows"][0];
    EXPECT_EQ(field(alone, "key_mse"), field(row, "key_mse")) << single;
    EXPECT_EQ(field(alone, "value_mse"), field(row, "value_mse")) << single;
    EXPECT_EQ(field(alone, "bytes.total"), field(row, "bytes.total")) << single;
  }
  const std::map<std::string, int> want = {
      {"fp16", 1},        {"kivi2g16", 1},   {"kivi2g32", 1},
      {"kivi3g16", 1},    {"kivi3g32", 1},   {"kvquant2r0", 1},
      {"kvquant2r32", 1}, {"kvquant3r0", 1}, {"kvquant3r32", 1}};
  EXPECT_EQ(seen, want);
  // The table names each swept value.
  RunResult t = runTool(inputs() + " --method kivi --group-size 16,32");
  ASSERT_EQ(t.status, 0) << t.out;
  EXPECT_NE(t.stdOut.find("kivi G=16 "), std::string::npos) << t.stdOut;
  EXPECT_NE(t.stdOut.find("kivi G=32 "), std::string::npos) << t.stdOut;
  // Every value is range-checked.
  const std::string in = inputs() + " --method kivi,kvquant";
  expectTwo(in + " --group-size 32,4294967328", "--group-size expects");
  expectTwo(in + " --residual-length 16,-1", "--residual-length expects");
  expectTwo(in + " --lloyd-iters 5,101", "[0, 100]");
  expectTwo(in + " --outlier-fraction 0.01,1", "--outlier-fraction expects");
  expectTwo(in + " --refit-interval 0,,32", "empty item");
}

TEST(KvqEvalDocs, TheDocumentedRecommendationIsWhatTheToolPrints) {
  // docs/RUNTIME.md ("kvq-eval in one example") shows a sweep on
  // stories260K layer 0 and its --budget answer; that line must be the
  // current tool's.
  const std::string root = std::string(KVQ_SOURCE_ROOT) + "/";
  std::ifstream readme(root + "docs/RUNTIME.md");
  std::string line, shown;
  while (std::getline(readme, line))
    if (line.rfind("recommendation for 8 bits: ", 0) == 0)
      shown = line;
  ASSERT_FALSE(shown.empty()) << "no recommendation line in docs/RUNTIME.md";
  const std::string data = root + "test/data/stories260K/";
  RunResult r = runTool("--keys " + data + "k0.npy --values " + data +
                        "v0.npy --queries " + data +
                        "q0.npy --method kivi,kivi_sink,kvquant --bits 2,3,4 "
                        "--budget 8");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.stdOut.find(shown + "\n"), std::string::npos)
      << "docs/RUNTIME.md: " << shown << "\ntool:\n"
      << r.stdOut;
}

TEST_F(KvqEval, HostileFilesAreOneLineErrors) {
  const std::string v = " --values " + tmp("v.npy") + " --method kivi";
  // A directory and a device: clean errors, no exception, no endless read.
  expectTwo("--keys " + std::string(KVQ_EVAL_TMP) + v, "is a directory");
  expectTwo("--keys /dev/zero" + v, "not a regular file");
  // A shape whose product overflows 64 bits: (2**34, 2**30, 1) and more.
  rawNpy(tmp("ovf.npy"),
         "{'descr': '<f4', 'fortran_order': False, 'shape': (17179869184, "
         "1073741824, 1), }",
         64);
  expectTwo("--keys " + tmp("ovf.npy") + v, "overflows");
  rawNpy(tmp("ovf2.npy"),
         "{'descr': '<f4', 'fortran_order': False, 'shape': (2147483648, "
         "1073741824, 1), }",
         64);
  expectTwo("--keys " + tmp("ovf2.npy") + v, "too large");
  // No data but strides that overflow.
  rawNpy(tmp("ovf0.npy"),
         "{'descr': '<f4', 'fortran_order': False, 'shape': (0, "
         "4611686018427387904, 4), }",
         0);
  expectTwo("--keys " + tmp("ovf0.npy") + v, "overflows");
  // A shape far larger than the file: refused before any allocation.
  rawNpy(tmp("huge.npy"),
         "{'descr': '<f4', 'fortran_order': False, 'shape': (1000000000, 8, "
         "128), }",
         64);
  expectTwo("--keys " + tmp("huge.npy") + v, "truncated data");
  // Control bytes and newlines in a header are escaped in the message.
  rawNpy(tmp("esc.npy"),
         "{'descr': '<f4\x1b[31m\r', 'fortran_order': False, 'shape': (96, 2, "
         "32), }",
         96 * 64 * 4);
  expectTwo("--keys " + tmp("esc.npy") + v, "\\x1b[31m\\x0d");
  rawNpy(tmp("nl.npy"),
         "{'descr': '<f4',\n 'fortran_order': False, "
         "'shape': (96 2 32), }",
         96 * 64 * 4);
  expectTwo("--keys " + tmp("nl.npy") + v, "commas");
  // NumPy's dict rules: a repeated key takes the last value ...
  rawNpy(tmp("dup.npy"),
         "{'descr': '<f4', 'fortran_order': False, 'shape': (5, 2, 32), "
         "'shape': (96, 2, 32)}",
         96 * 64 * 4);
  RunResult dup = runTool("--keys " + tmp("dup.npy") + v + " --json");
  ASSERT_EQ(dup.status, 0) << dup.out;
  EXPECT_EQ(parse(dup)["tokens"], 96);
  // ... (n) is not a tuple, other keys are refused, all three are needed.
  rawNpy(tmp("paren.npy"),
         "{'descr': '<f4', 'fortran_order': False, 'shape': (96), }", 384);
  expectTwo("--keys " + tmp("paren.npy") + v, "write (n,)");
  rawNpy(tmp("extra.npy"),
         "{'descr': '<f4', 'fortran_order': False, 'shape': (96, 2, 32), "
         "'x': 1}",
         96 * 64 * 4);
  expectTwo("--keys " + tmp("extra.npy") + v, "exactly descr");
  rawNpy(tmp("lack.npy"), "{'descr': '<f4', 'shape': (96, 2, 32)}",
         96 * 64 * 4);
  expectTwo("--keys " + tmp("lack.npy") + v, "lacks 'fortran_order'");
  rawNpy(tmp("neg.npy"),
         "{'descr': '<f4', 'fortran_order': False, 'shape': (-96, 2, 32)}",
         96 * 64 * 4);
  expectTwo("--keys " + tmp("neg.npy") + v, "negative");
  rawNpy(tmp("list.npy"),
         "{'descr': '<f4', 'fortran_order': False, 'shape': [96, 2, 32]}",
         96 * 64 * 4);
  expectTwo("--keys " + tmp("list.npy") + v, "must be a tuple");
  // A header length far past the file (version 2: 4-byte length).
  {
    std::ofstream f(tmp("hlen.npy"), std::ios::binary);
    const char head[] = {'\x93', 'N', 'U',    'M',    'P',    'Y',
                         2,      0,   '\xff', '\xff', '\xff', '\x7f'};
    f.write(head, 12);
    f << "{'descr': '<f4'";
  }
  expectTwo("--keys " + tmp("hlen.npy") + v, "exceeds the 100000-byte limit");
  // NaN in the data.
  std::vector<float> nan = randomData(33, 96 * 64);
  nan[100] = NAN;
  writeOrDie(tmp("nan.npy"), {96, 2, 32}, nan, false);
  expectTwo("--keys " + tmp("nan.npy") + v, "NaN or Inf");
  // Archives: deflated members, missing names, bad offsets, a .npy:NAME.
  std::string err;
  ASSERT_TRUE(kvq::tio::writeNpz(
      tmp("defl.npz"),
      {{"keys",
        kvq::tio::npyImage({96, 2, 32}, randomData(34, 96 * 64), DType::F32)}},
      err, /*deflatedFlag=*/true))
      << err;
  // (the deflate flag on stored bytes: they do not inflate to a .npy)
  expectTwo("--keys " + tmp("defl.npz") + v, "deflated member 'keys.npy'");
  // np.savez_compressed's archive, damaged: a flipped byte in a member's
  // deflate stream, and the archive cut short.
  std::vector<uint8_t> packed;
  {
    std::ifstream f(numpyFile("kvq_compressed.npz"), std::ios::binary);
    packed.assign(std::istreambuf_iterator<char>(f),
                  std::istreambuf_iterator<char>());
  }
  ASSERT_GT(packed.size(), 20000u);
  for (size_t at : {size_t{100}, size_t{5000}, size_t{20000}}) {
    std::vector<uint8_t> flipped = packed;
    flipped[at] ^= 0x5a;
    writeBytes(tmp("flip.npz"), flipped);
    // (a bad code, a bad distance or bytes that fail the CRC-32)
    expectTwo("--keys " + tmp("flip.npz") + v, "member 'keys.npy'");
  }
  std::vector<uint8_t> cut(packed.begin(), packed.begin() + 30000);
  writeBytes(tmp("cut.npz"), cut);
  expectTwo("--keys " + tmp("cut.npz") + v, "zip");
  ASSERT_TRUE(kvq::tio::writeNpz(
      tmp("other.npz"),
      {{"x",
        kvq::tio::npyImage({96, 2, 32}, randomData(34, 96 * 64), DType::F32)}},
      err))
      << err;
  expectTwo("--keys " + tmp("other.npz") + v, "no tensor named 'keys' or 'k'");
  expectTwo("--keys " + tmp("other.npz") + ":y" + v, "(it has: x)");
  std::vector<uint8_t> zip;
  {
    std::ifstream f(tmp("other.npz"), std::ios::binary);
    zip.assign(std::istreambuf_iterator<char>(f),
               std::istreambuf_iterator<char>());
  }
  zip[200] ^= 0x55; // inside the member's data: CRC mismatch
  writeBytes(tmp("crc.npz"), zip);
  expectTwo("--keys " + tmp("crc.npz") + ":x" + v, "CRC-32");
  std::vector<uint8_t> st = kvq::tio::safetensorsImage(
      {{"keys", {96, 2, 32}, randomData(35, 96 * 64), DType::F32}});
  st.resize(st.size() - 4);
  writeBytes(tmp("short.safetensors"), st);
  expectTwo("--keys " + tmp("short.safetensors") + v, "outside the");
  std::vector<uint8_t> bad = {0xff, 0xff, 0xff, 0xff, 0xff,
                              0xff, 0xff, 0x7f, '{'};
  writeBytes(tmp("big.safetensors"), bad);
  expectTwo("--keys " + tmp("big.safetensors") + v, "100 MB limit");
  expectTwo("--keys " + tmp("k.npy") + ":keys" + v, "names nothing");
}

/// A .safetensors file written by hand: the 8-byte header length, the JSON
/// header as given, then `dataBytes` bytes of small floats.
void handSafetensors(const std::string &path, const std::string &header,
                     size_t dataBytes) {
  std::vector<uint8_t> b;
  for (int i = 0; i < 8; ++i)
    b.push_back(static_cast<uint8_t>((uint64_t{header.size()} >> (8 * i)) &
                                     0xff));
  b.insert(b.end(), header.begin(), header.end());
  std::vector<float> data = randomData(36, (dataBytes + 3) / 4);
  const auto *d = reinterpret_cast<const uint8_t *>(data.data());
  b.insert(b.end(), d, d + dataBytes);
  writeBytes(path, b);
}

// What the formats' reference readers refuse (the safetensors crate's
// validation; Python's zipfile, which np.load uses) kvq-eval refuses too,
// rather than read one tensor's bytes as another's.
TEST_F(KvqEval, SafetensorsThatLieAreRefused) {
  const std::string v = " --values " + tmp("v.npy") + " --method kivi";
  const std::string keys =
      R"("keys":{"dtype":"F32","shape":[96,2,32],"data_offsets":[0,24576]})";
  // The control: keys and a one-float tensor after it, listed last first,
  // with string metadata.
  handSafetensors(tmp("ok.safetensors"),
                  R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[24576,)"
                  R"(24580]},"__metadata__":{"format":"pt"},)" +
                      keys + "}",
                  24580);
  RunResult ok = runTool("--keys " + tmp("ok.safetensors") + v + " --json");
  ASSERT_EQ(ok.status, 0) << ok.out;
  EXPECT_EQ(parse(ok)["tokens"], 96);
  // Two tensors on the same bytes.
  handSafetensors(tmp("overlap.safetensors"),
                  "{" + keys +
                      R"(,"x":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                  24576);
  expectTwo("--keys " + tmp("overlap.safetensors") + v,
            "tensors 'keys' and 'x' overlap");
  // Bytes that belong to no tensor: before the first, between two.
  handSafetensors(
      tmp("gap0.safetensors"),
      R"({"keys":{"dtype":"F32","shape":[96,2,32],"data_offsets":[4,24580]}})",
      24580);
  expectTwo("--keys " + tmp("gap0.safetensors") + v,
            "data bytes [0, 4) belong to no tensor (before 'keys')");
  handSafetensors(tmp("gap.safetensors"),
                  "{" + keys +
                      R"(,"x":{"dtype":"F32","shape":[1],"data_offsets":[24580,)"
                      R"(24584]}})",
                  24584);
  expectTwo("--keys " + tmp("gap.safetensors") + v,
            "data bytes [24576, 24580) belong to no tensor (before 'x')");
  // Bytes after the last tensor.
  handSafetensors(tmp("trail.safetensors"), "{" + keys + "}", 24576 + 3);
  expectTwo("--keys " + tmp("trail.safetensors") + v,
            "has 3 bytes after the last tensor's data");
  // __metadata__ must map strings to strings.
  for (const char *meta : {R"({"format":1})", R"("pt")", R"({"a":null})",
                           R"({"a":{"b":"c"}})"}) {
    handSafetensors(tmp("meta.safetensors"),
                    std::string(R"({"__metadata__":)") + meta + "," + keys +
                        "}",
                    24576);
    expectTwo("--keys " + tmp("meta.safetensors") + v,
              "__metadata__ is not an object of strings");
  }
}

TEST_F(KvqEval, NpzThatLiesIsRefused) {
  const std::string v = " --values " + tmp("v.npy") + " --method kivi";
  std::string err;
  ASSERT_TRUE(kvq::tio::writeNpz(
      tmp("two.npz"),
      {{"keys",
        kvq::tio::npyImage({96, 2, 32}, randomData(37, 96 * 64), DType::F32)},
       {"kkkk",
        kvq::tio::npyImage({96, 2, 32}, randomData(38, 96 * 64), DType::F32)}},
      err))
      << err;
  std::vector<uint8_t> zip;
  {
    std::ifstream f(tmp("two.npz"), std::ios::binary);
    zip.assign(std::istreambuf_iterator<char>(f),
               std::istreambuf_iterator<char>());
  }
  RunResult ok = runTool("--keys " + tmp("two.npz") + ":kkkk" + v + " --json");
  ASSERT_EQ(ok.status, 0) << ok.out;
  // The zip format: central directory entries start PK\1\2, their sizes
  // at 20 (compressed) and 24, their name at 46, the member's local header
  // offset at 42; keys.npy's local header is at 0, its name at 30.
  std::vector<size_t> central;
  for (size_t i = 0; i + 4 <= zip.size(); ++i)
    if (zip[i] == 'P' && zip[i + 1] == 'K' && zip[i + 2] == 1 &&
        zip[i + 3] == 2)
      central.push_back(i);
  ASSERT_EQ(central.size(), 2u);
  ASSERT_EQ(std::string(zip.begin() + 30, zip.begin() + 38), "keys.npy");
  ASSERT_EQ(std::string(zip.begin() + central[1] + 46,
                        zip.begin() + central[1] + 54),
            "kkkk.npy");
  auto put32 = [](std::vector<uint8_t> &b, size_t at, uint32_t x) {
    for (int i = 0; i < 4; ++i)
      b[at + i] = static_cast<uint8_t>(x >> (8 * i));
  };
  auto get32 = [](const std::vector<uint8_t> &b, size_t at) {
    uint32_t x = 0;
    for (int i = 0; i < 4; ++i)
      x |= uint32_t{b[at + i]} << (8 * i);
    return x;
  };
  // kkkk.npy's directory entry points at keys.npy's member.
  std::vector<uint8_t> twice = zip;
  put32(twice, central[1] + 42, 0);
  writeBytes(tmp("twice.npz"), twice);
  expectTwo("--keys " + tmp("twice.npz") + ":kkkk" + v,
            "corrupt zip: the directory names a member 'kkkk.npy' whose "
            "local header says 'keys.npy'");
  // The same under the same name: two directory entries, one member.
  std::copy_n("keys", 4, twice.begin() + central[1] + 46);
  writeBytes(tmp("dup.npz"), twice);
  expectTwo("--keys " + tmp("dup.npz") + v,
            "corrupt zip: members 'keys.npy' and 'keys.npy' overlap");
  // keys.npy's directory sizes reach into kkkk.npy's local header.
  std::vector<uint8_t> grown = zip;
  put32(grown, central[0] + 20, get32(zip, central[0] + 20) + 8);
  put32(grown, central[0] + 24, get32(zip, central[0] + 24) + 8);
  writeBytes(tmp("grown.npz"), grown);
  expectTwo("--keys " + tmp("grown.npz") + ":kkkk" + v,
            "corrupt zip: members 'keys.npy' and 'kkkk.npy' overlap");
  // keys.npy's local header names another file.
  std::vector<uint8_t> renamed = zip;
  renamed[30] = 'j';
  writeBytes(tmp("renamed.npz"), renamed);
  expectTwo("--keys " + tmp("renamed.npz") + ":kkkk" + v,
            "corrupt zip: the directory names a member 'keys.npy' whose "
            "local header says 'jeys.npy'");
}

// --save writes the first configuration's cache with kvq_cache_save: for
// fp16 its size is known without the runtime (docs/RUNTIME.md, "Saved cache
// format"): the K and V payload, 108 bytes of header and checksum, and 16
// bytes of layer section size and token count.
TEST(KvqEvalSave, WritesTheFirstCacheAndPrintsItsSize) {
  writeOrDie(tmp("k.npy"), {40, 2, 32}, randomData(16, 40 * 64), false);
  RunResult r = runTool("--keys " + tmp("k.npy") + " --values " + tmp("k.npy") +
                        " --method fp16,kivi --prefill 20" + " --save " +
                        tmp("cache.kvqc"));
  ASSERT_EQ(r.status, 0) << r.out;
  const long long expected = 40LL * 64 * 2 * 2 + 108 + 16;
  std::ifstream in(tmp("cache.kvqc"), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)),
                    std::istreambuf_iterator<char>());
  EXPECT_EQ(static_cast<long long>(bytes.size()), expected);
  EXPECT_EQ(bytes.substr(0, 8), "KVQCACHE");
  EXPECT_NE(r.stdErr.find("saved the fp16 cache"), std::string::npos)
      << r.stdErr;
  EXPECT_NE(r.stdErr.find(std::to_string(expected) + " bytes"),
            std::string::npos)
      << r.stdErr;
  RunResult bad =
      runTool("--keys " + tmp("k.npy") + " --values " + tmp("k.npy") +
              " --method fp16 --save " + tmp("no/such/dir/cache.kvqc"));
  EXPECT_EQ(bad.status, 2) << bad.out;
  EXPECT_NE(bad.out.find("--save: cannot write"), std::string::npos) << bad.out;
}

//===----------------------------------------------------------------------===//
// --pre-rope: stories260K layer 0's keys before RoPE (kpre0.npy,
// written by test/data/stories260K/dump_kv.cpp with k0.npy, the same keys
// after llama2.c's interleaved RoPE, theta 10000, rotated in float).
//===----------------------------------------------------------------------===//

namespace {

std::string storiesFile(const std::string &name) {
  return std::string(KVQ_SOURCE_ROOT) + "/test/data/stories260K/" + name;
}

/// The stories260K layer 0 inputs, with the pre-RoPE keys when preRope.
std::string storiesInputs(bool preRope) {
  return "--keys " + storiesFile(preRope ? "kpre0.npy" : "k0.npy") +
         " --values " + storiesFile("v0.npy") + " --queries " +
         storiesFile("q0.npy") + (preRope ? " --pre-rope" : "");
}

/// The row of `method` at `bits` whose cache stored pre-RoPE keys or not.
json ropeRow(const RunResult &r, const std::string &method, int bits,
             bool preRope) {
  json doc = parse(r);
  if (!doc.is_object() || !doc.contains("rows"))
    return json();
  for (const json &row : doc["rows"])
    if (row["method"] == method && row["key_bits"] == bits &&
        row["pre_rope"] == preRope)
      return row;
  return json();
}

} // namespace

TEST(KvqEvalPreRope, TheDumpRotatedIsTheModelsPostRopeKeys) {
  // The data: kpre0 rotated here (double, llama2.c's pairs and theta)
  // gives k0 up to the model's float angles (~1e-5 at position 511).
  kvq::tio::Tensor pre, post;
  std::string err;
  ASSERT_TRUE(kvq::tio::load(storiesFile("kpre0.npy"), {}, pre, err)) << err;
  ASSERT_TRUE(kvq::tio::load(storiesFile("k0.npy"), {}, post, err)) << err;
  ASSERT_EQ(pre.shape, post.shape);
  ASSERT_EQ(pre.shape.size(), 3u);
  const int64_t T = pre.shape[0], H = pre.shape[1], D = pre.shape[2];
  double err2 = 0, ref2 = 0, unrotated2 = 0;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < D / 2; ++i) {
        const size_t at = static_cast<size_t>((t * H + h) * D + 2 * i);
        const double angle = t * std::pow(10000.0, -2.0 * i / D);
        const double a = pre.data[at], b = pre.data[at + 1];
        const double ra = a * std::cos(angle) - b * std::sin(angle),
                     rb = a * std::sin(angle) + b * std::cos(angle);
        err2 += (ra - post.data[at]) * (ra - post.data[at]) +
                (rb - post.data[at + 1]) * (rb - post.data[at + 1]);
        ref2 += double(post.data[at]) * post.data[at] +
                double(post.data[at + 1]) * post.data[at + 1];
        unrotated2 += (a - post.data[at]) * (a - post.data[at]) +
                      (b - post.data[at + 1]) * (b - post.data[at + 1]);
      }
  EXPECT_LT(std::sqrt(err2 / ref2), 1e-4);
  EXPECT_GT(std::sqrt(unrotated2 / ref2), 0.5); // the files differ
}

TEST(KvqEvalPreRope, PostRopeTwinsReproduceThePostRopeRun) {
  // --rope-compare's post-RoPE rows store kvq-eval's rotation of kpre0 and
  // are judged against the reference from it: they must give the numbers
  // of a plain run on k0 (the same keys rotated by the model) up to fp32
  // rounding, so the reference equals the post-RoPE run's.
  const std::string methods = " --method fp16,kivi,kvquant --bits 2 --json";
  RunResult post = runTool(storiesInputs(false) + methods);
  ASSERT_EQ(post.status, 0) << post.out;
  RunResult pre = runTool(storiesInputs(true) + " --rope-compare" + methods);
  ASSERT_EQ(pre.status, 0) << pre.out;
  for (const char *m : {"kivi", "kvquant"}) {
    const json want = object(post, m, 2), got = ropeRow(pre, m, 2, false);
    ASSERT_FALSE(want.is_null() || got.is_null()) << m << pre.out;
    for (const char *f : {"key_mse", "attn_rel_err", "attn_rel_err_decode"})
      EXPECT_NEAR(field(got, f), field(want, f), 1e-5 * field(want, f))
          << m << " " << f;
    EXPECT_EQ(field(got, "value_mse"), field(want, "value_mse")) << m;
    EXPECT_EQ(field(got, "bytes.total"), field(want, "bytes.total")) << m;
    EXPECT_TRUE(got["config"]["rope"].is_null()) << got.dump();
  }
  // fp16 measures the reference itself: its attention error is fp16's
  // rounding of K/V (~1.8e-3 here), so a reference that moved by more than
  // a few 1e-7 would show.
  EXPECT_NEAR(field(ropeRow(pre, "fp16", 16, false), "attn_rel_err"),
              field(object(post, "fp16"), "attn_rel_err"), 1e-6);
  // A wrong rotation is seen: theta 10001 (one part in 10^4) or the half
  // pairing move the kivi numbers far past the tolerance above.
  for (const char *wrong : {" --rope-theta 10001", " --rope-style half"}) {
    RunResult w =
        runTool(storiesInputs(true) + " --rope-compare" + wrong + methods);
    ASSERT_EQ(w.status, 0) << w.out;
    const double want = field(object(post, "kivi", 2), "attn_rel_err");
    EXPECT_GT(
        std::fabs(field(ropeRow(w, "kivi", 2, false), "attn_rel_err") - want),
        1e-3 * want)
        << wrong;
  }
}

TEST(KvqEvalPreRope, PreRopeStorageQuantizesTheRealKeysBetter) {
  // KVQuant's finding on the real keys: at the same bits, storing them
  // before RoPE gives a lower attention and key error. Measured (2026-12-01):
  // kvquant 2-bit frozen 0.930 -> 0.462, kivi 2-bit 0.628 -> 0.440.
  RunResult r = runTool(storiesInputs(true) +
                        " --rope-compare --method kivi,kvquant --bits 2"
                        " --refit-interval 0 --json");
  ASSERT_EQ(r.status, 0) << r.out;
  for (const char *m : {"kivi", "kvquant"}) {
    const json pre = ropeRow(r, m, 2, true), post = ropeRow(r, m, 2, false);
    ASSERT_FALSE(pre.is_null() || post.is_null()) << m << r.out;
    EXPECT_LT(field(pre, "attn_rel_err"), 0.9 * field(post, "attn_rel_err"))
        << m;
    EXPECT_LT(field(pre, "key_rel_err"), field(post, "key_rel_err")) << m;
    // Values are never rotated: the twins store the same values.
    EXPECT_EQ(field(pre, "value_mse"), field(post, "value_mse")) << m;
    EXPECT_EQ(pre["config"]["rope"]["style"], "interleaved");
    EXPECT_EQ(field(pre["config"]["rope"], "theta"), 10000);
  }
  const json doc = parse(r);
  EXPECT_EQ(doc["rope"]["style"], "interleaved") << doc["rope"].dump();
  EXPECT_EQ(field(doc["rope"], "theta"), 10000);
  EXPECT_EQ(doc["rope"]["compare"], true);
  ASSERT_EQ(doc["summary"].size(), 4u);
  EXPECT_EQ(doc["summary"][0]["pre_rope"], true);
  EXPECT_EQ(doc["summary"][1]["pre_rope"], false);
  // Without --rope-compare only the pre-RoPE rows.
  RunResult only =
      runTool(storiesInputs(true) + " --method kivi --bits 2 --json");
  ASSERT_EQ(only.status, 0) << only.out;
  ASSERT_EQ(parse(only)["rows"].size(), 1u) << only.out;
  EXPECT_EQ(field(ropeRow(only, "kivi", 2, true), "attn_rel_err"),
            field(ropeRow(r, "kivi", 2, true), "attn_rel_err"));
  // A run without --pre-rope says so.
  RunResult plain =
      runTool(storiesInputs(false) + " --method kivi --bits 2 --json");
  ASSERT_EQ(plain.status, 0) << plain.out;
  EXPECT_TRUE(parse(plain)["rope"].is_null());
  EXPECT_EQ(object(plain, "kivi")["pre_rope"], false);
  EXPECT_TRUE(object(plain, "kivi")["config"]["rope"].is_null());
}

TEST(KvqEvalPreRope, RuntimeRotationAgreesWithTheOracleForBothStyles) {
  // The fp16 pre-RoPE cache's fetched keys are rotated by the runtime
  // (runtime/kernels/rope/rope.cpp); kvq-eval's reference rotates on its own. They
  // agree up to fp16 rounding (key_rel_err ~2e-4) for both pairings and
  // another theta; a mismatched pairing would be an O(1) error.
  for (const char *opts : {"", " --rope-style half", " --rope-theta 500000",
                           " --rope-style half --rope-theta 1e6"}) {
    RunResult r = runTool(storiesInputs(true) + opts + " --method fp16 --json");
    ASSERT_EQ(r.status, 0) << r.out;
    const json row = ropeRow(r, "fp16", 16, true);
    EXPECT_LT(field(row, "key_rel_err"), 1e-3) << opts << row.dump();
    EXPECT_LT(field(row, "attn_rel_err"), 1e-2) << opts << row.dump();
  }
}

TEST_F(KvqEval, PreRopeTableLabelsTheRows) {
  RunResult t = runTool(inputs() + " --queries " + tmp("q.npy") +
                        " --pre-rope --rope-compare --rope-style half"
                        " --method kivi --group-size 16 --residual-length 16");
  ASSERT_EQ(t.status, 0) << t.out;
  EXPECT_NE(t.stdOut.find("pre-RoPE keys (half, theta 10000)"),
            std::string::npos)
      << t.stdOut;
  EXPECT_NE(t.stdOut.find("\nkivi pre-RoPE "), std::string::npos) << t.stdOut;
  EXPECT_NE(t.stdOut.find("\nkivi post-RoPE "), std::string::npos) << t.stdOut;
}

TEST_F(KvqEval, PreRopeFlagsAreChecked) {
  const std::string in = inputs() + " --method kivi";
  expectTwo(in + " --pre-rope --rope-theta 1",
            "--rope-theta expects a number in (1, 1e+09], got '1'");
  expectTwo(in + " --pre-rope --rope-theta 0.5", "--rope-theta expects");
  expectTwo(in + " --pre-rope --rope-theta 2e9", "--rope-theta expects");
  expectTwo(in + " --pre-rope --rope-theta nan", "--rope-theta expects");
  expectTwo(in + " --pre-rope --rope-theta=", "--rope-theta expects");
  // Above 1 as a double, 1 as the float the cache holds.
  expectTwo(in + " --pre-rope --rope-theta 1.00000001",
            "rope theta must be in (1, 1e9]");
  expectTwo(in + " --pre-rope --rope-style neox",
            "--rope-style expects interleaved or half, got 'neox'");
  expectTwo(in + " --pre-rope --rope-style", "needs a value");
  expectTwo(in + " --pre-rope=yes", "takes no value");
  expectTwo(in + " --rope-theta 500000", "--rope-theta needs --pre-rope");
  expectTwo(in + " --rope-style half", "--rope-style needs --pre-rope");
  expectTwo(in + " --rope-compare", "--rope-compare needs --pre-rope");
  writeOrDie(tmp("odd.npy"), {16, 2, 7}, randomData(40, 16 * 14), false);
  expectTwo("--keys " + tmp("odd.npy") + " --values " + tmp("odd.npy") +
                " --method fp16 --pre-rope",
            "rope needs an even head_dim");
  // The same odd dump is fine without --pre-rope.
  RunResult ok = runTool("--keys " + tmp("odd.npy") + " --values " +
                         tmp("odd.npy") + " --method fp16");
  EXPECT_EQ(ok.status, 0) << ok.out;
}
