//===- kvq_eval_test.cpp - The kvq-eval tool end to end -------------------===//
//
// Writes .npy files with the project's writer, runs the kvq-eval binary and
// checks its JSON/table output and its exit status 2 on every kind of bad
// input.
//
//===----------------------------------------------------------------------===//
#include "npy.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
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
  std::string owner = test ? std::string(test->test_suite_name()) + "." +
                                 test->name()
                           : "global";
  return std::string(KVQ_EVAL_TMP) + "/kvq_eval_test_" + owner + "_" + name;
}

struct RunResult {
  int status = -1;
  std::string out;
};

/// Run kvq-eval with `args`, stdout and stderr captured together.
RunResult runTool(const std::string &args) {
  RunResult r;
  std::string cmd = std::string(KVQ_EVAL_PATH) + " " + args + " 2>&1";
  FILE *p = popen(cmd.c_str(), "r");
  if (!p)
    return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0)
    r.out.append(buf, n);
  int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
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

/// Number following "key": in a one-line JSON object.
double field(const std::string &obj, const std::string &key) {
  size_t at = obj.find("\"" + key + "\": ");
  if (at == std::string::npos)
    return NAN;
  return std::strtod(obj.c_str() + at + key.size() + 4, nullptr);
}

/// The one-line JSON object of `method` in kvq-eval --json output.
std::string object(const std::string &out, const std::string &method) {
  size_t at = out.find("{\"method\": \"" + method + "\"");
  if (at == std::string::npos)
    return "";
  return out.substr(at, out.find('\n', at) - at);
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

} // namespace

TEST_F(KvqEval, JsonReportsEveryFieldForEveryMethod) {
  RunResult r = runTool(inputs() + " --queries " + tmp("q.npy") +
              " --method fp16,kivi,kivi_sink,kvquant --group-size 16"
              " --residual 16 --sinks 2 --prefill 64 --json");
  ASSERT_EQ(r.status, 0) << r.out;
  for (const char *m : {"fp16", "kivi", "kivi_sink", "kvquant"}) {
    std::string o = object(r.out, m);
    ASSERT_FALSE(o.empty()) << m << "\n" << r.out;
    for (const char *key :
         {"key_bits", "value_bits", "key_mse", "value_mse", "attn_rel_err",
          "effective_bits", "fp16_bytes", "codes", "scale_zero",
          "level_tables", "outliers", "sinks", "residual", "total"})
      EXPECT_FALSE(std::isnan(field(o, key))) << m << " " << key;
    EXPECT_EQ(field(o, "fp16_bytes"), 96 * 64 * 2 * 2) << m;
    EXPECT_EQ(o.find("sink_positions") != std::string::npos,
              std::string(m) == "kivi_sink");
  }
  std::string fp16 = object(r.out, "fp16"), kivi = object(r.out, "kivi"),
              sink = object(r.out, "kivi_sink"), kvq = object(r.out, "kvquant");
  EXPECT_EQ(field(fp16, "key_mse"), 0.0);
  EXPECT_EQ(field(fp16, "attn_rel_err"), 0.0);
  EXPECT_EQ(field(fp16, "effective_bits"), 16.0);
  EXPECT_EQ(field(kivi, "key_bits"), 2);
  EXPECT_EQ(field(kvq, "key_bits"), 3);
  EXPECT_GT(field(kivi, "attn_rel_err"), 0.0);
  EXPECT_LT(field(kivi, "attn_rel_err"), 1.0);
  EXPECT_LT(field(kivi, "total"), field(kivi, "fp16_bytes"));
  EXPECT_LT(field(sink, "key_mse"), field(kivi, "key_mse"));
  const std::string positions = sink.substr(sink.find("sink_positions"));
  EXPECT_TRUE(positions.find("[50,") != std::string::npos ||
              positions.find(", 50]") != std::string::npos)
      << sink;
}

TEST_F(KvqEval, TableByDefaultAndBitsFlag) {
  RunResult r = runTool(inputs() + " --method kivi,kvquant --bits 4 --group-size 32");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("method"), std::string::npos);
  EXPECT_NE(r.out.find("kvquant"), std::string::npos);
  EXPECT_NE(r.out.find("    4     4"), std::string::npos) << r.out;
  RunResult j = runTool(inputs() + " --method kivi --residual-mode block --residual 32 "
                         "--group-size 16 --json");
  ASSERT_EQ(j.status, 0) << j.out;
  EXPECT_EQ(j.out.find("attn_rel_err"), std::string::npos); // no queries
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
    std::string o = object(r.out, m);
    ASSERT_FALSE(o.empty()) << m << "\n" << r.out;
    EXPECT_EQ(field(o, "prefill_tokens"), 128) << o;
    EXPECT_EQ(field(o, "decoded_tokens"), 172) << o;
    for (const char *key :
         {"key_mse_prefill", "key_mse_decode", "value_mse_prefill",
          "value_mse_decode", "attn_rel_err_prefill", "attn_rel_err_decode"})
      EXPECT_FALSE(std::isnan(field(o, key))) << m << " " << key;
    // The whole is the token-weighted mean of the parts.
    EXPECT_NEAR(field(o, "key_mse"),
                (128 * field(o, "key_mse_prefill") +
                 172 * field(o, "key_mse_decode")) / 300,
                1e-6 * (1 + field(o, "key_mse")))
        << o;
    EXPECT_NEAR(field(o, "value_mse"),
                (128 * field(o, "value_mse_prefill") +
                 172 * field(o, "value_mse_decode")) / 300,
                1e-6 * (1 + field(o, "value_mse")))
        << o;
  }
  // fp16 only rounds the f32 input.
  EXPECT_LT(field(object(r.out, "fp16"), "attn_rel_err_decode"), 1e-3);
  // The library's default kvquant keeps decoded keys in line with the
  // prefill's on drifting keys; the seed's frozen levels do not.
  std::string kvq = object(r.out, "kvquant");
  EXPECT_EQ(field(kvq, "refit_interval"), 128) << kvq;
  EXPECT_LE(field(kvq, "key_mse_decode"), 2 * field(kvq, "key_mse_prefill"))
      << kvq;
  EXPECT_EQ(object(r.out, "kivi").find("refit_interval"), std::string::npos);
  RunResult frozen =
      runTool(in + " --method kvquant --refit-interval 0 --json");
  ASSERT_EQ(frozen.status, 0) << frozen.out;
  std::string fz = object(frozen.out, "kvquant");
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
  std::string o = object(r.out, "kivi");
  EXPECT_EQ(field(o, "prefill_tokens"), 200) << o;
  EXPECT_EQ(field(o, "decoded_tokens"), 100) << o;
  // --fit-all: one update of everything, the old protocol; no decode part.
  RunResult a = runTool(in + " --method kvquant --fit-all --json");
  ASSERT_EQ(a.status, 0) << a.out;
  std::string fa = object(a.out, "kvquant");
  EXPECT_EQ(field(fa, "prefill_tokens"), 300) << fa;
  EXPECT_EQ(field(fa, "decoded_tokens"), 0) << fa;
  EXPECT_NE(fa.find("\"key_mse_decode\": null"), std::string::npos) << fa;
  EXPECT_NE(fa.find("\"attn_rel_err_decode\": null"), std::string::npos)
      << fa;
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
  EXPECT_EQ(field(object(s.out, "fp16"), "prefill_tokens"), 4) << s.out;
  EXPECT_EQ(field(object(s.out, "fp16"), "decoded_tokens"), 1) << s.out;
}

TEST_F(KvqEval, BadInputExitsTwoWithOneLine) {
  auto expectTwo = [&](const std::string &args, const std::string &word) {
    RunResult r = runTool(args);
    EXPECT_EQ(r.status, 2) << args << "\n" << r.out;
    EXPECT_EQ(r.out.rfind("kvq-eval: ", 0), 0u) << r.out;
    EXPECT_NE(r.out.find(word), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << "one line: " << r.out;
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
    const char head[] = {'\x93', 'N', 'U', 'M', 'P', 'Y', 1, 0,
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
  raw("twod.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (96, 64), }",
      96 * 64 * 4);
  std::ofstream(tmp("junk.npy")) << "not numpy";
  const std::string v = " --values " + tmp("v.npy") + " --method kivi";
  expectTwo("--keys " + tmp("fortran.npy") + v, "fortran");
  expectTwo("--keys " + tmp("big.npy") + v, "big-endian");
  expectTwo("--keys " + tmp("int.npy") + v, "'<i4'");
  expectTwo("--keys " + tmp("short.npy") + v, "truncated");
  expectTwo("--keys " + tmp("twod.npy") + v, "3-D");
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
  expectTwo(inputs() + " --method kivi --residual-mode ring", "sliding or block");
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
      EXPECT_EQ(a.data[i], half ? kvq::npy::halfToFloat(
                                      kvq::npy::floatToHalf(data[i]))
                                : data[i]);
    // NumPy aligns the data to 64 bytes.
    std::ifstream f(tmp("rt.npy"), std::ios::binary | std::ios::ate);
    EXPECT_EQ((static_cast<size_t>(f.tellg()) - data.size() * (half ? 2 : 4)) %
                  64,
              0u);
  }
  // A version 2.0 header (4-byte length) parses too.
  std::string dict = "{'descr': '<f2', 'fortran_order': False, 'shape': (2,), }";
  std::vector<uint8_t> bytes = {0x93, 'N', 'U', 'M', 'P', 'Y', 2, 0,
                                static_cast<uint8_t>(dict.size()), 0, 0, 0};
  bytes.insert(bytes.end(), dict.begin(), dict.end());
  for (uint8_t b : {0x00, 0x3c, 0x00, 0xc0}) // 1.0, -2.0
    bytes.push_back(b);
  kvq::npy::Array a;
  ASSERT_TRUE(kvq::npy::parse(bytes, a, err)) << err;
  EXPECT_EQ(a.data, (std::vector<float>{1.0f, -2.0f}));
}
