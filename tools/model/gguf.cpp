//===- gguf.cpp - GGUF model files ----------------------------------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Every length read from the file is bounded before it is used; reads go
// through tio::FileSource (regular files only, exact reads).
//
//===----------------------------------------------------------------------===//
#include "tools/model/gguf.h"
#include "tools/model/tokenizer.h"

#include "flags.h"
#include "npy.h"
#include "tensor_io.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <set>

using kvq::cli::printable;

namespace kvq::model {

namespace {

// Bounds far above real files, low enough that nothing overflows.
constexpr uint64_t kMaxString = 1u << 20;
constexpr uint64_t kMaxArray = 1u << 26;
constexpr uint64_t kMaxKeys = 1u << 16;
constexpr uint64_t kMaxTensors = 1u << 20;

enum ValueType : uint32_t {
  U8,
  I8,
  U16,
  I16,
  U32,
  I32,
  F32,
  BOOL,
  STRING,
  ARRAY,
  U64,
  I64,
  F64,
  kValueTypes
};

/// A scalar metadata value; an array's elements are kept only when asked
/// (the tokenizer's), else skipped with their type kept.
struct Value {
  uint32_t type = 0;
  double number = 0;
  std::string text;
  uint32_t elementType = 0; ///< arrays
  std::vector<double> numbers;
  std::vector<std::string> strings;
};

enum TensorType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ8_0 = 8,
  kBF16 = 30
};

struct Info {
  std::string name;
  std::vector<uint64_t> dims; ///< ne[0] first: the innermost
  uint32_t type = 0;
  uint64_t offset = 0, bytes = 0, elements = 0;
};

class Reader {
public:
  Reader(tio::Source &src, std::string &err) : src(src), err(err) {}
  uint64_t at = 0;

  bool bytes(void *dst, size_t n) {
    if (!src.read(at, dst, n, err))
      return false;
    at += n;
    return true;
  }
  template <typename T> bool num(T &v) { return bytes(&v, sizeof(T)); }
  bool string(std::string &s) {
    uint64_t n;
    if (!num(n))
      return false;
    if (n > kMaxString)
      return fail("a string of " + std::to_string(n) + " bytes");
    s.assign(size_t(n), '\0');
    return bytes(s.data(), size_t(n));
  }
  bool fail(const std::string &m) {
    err = m;
    return false;
  }
  /// A value of `type`; scalars into v, arrays walked over.
  bool value(uint32_t type, Value &v, int depth = 0, bool keep = false) {
    v.type = type;
    switch (type) {
    case U8: {
      uint8_t x;
      return num(x) && (v.number = x, true);
    }
    case I8: {
      int8_t x;
      return num(x) && (v.number = x, true);
    }
    case U16: {
      uint16_t x;
      return num(x) && (v.number = x, true);
    }
    case I16: {
      int16_t x;
      return num(x) && (v.number = x, true);
    }
    case U32: {
      uint32_t x;
      return num(x) && (v.number = x, true);
    }
    case I32: {
      int32_t x;
      return num(x) && (v.number = x, true);
    }
    case F32: {
      float x;
      return num(x) && (v.number = x, true);
    }
    case BOOL: {
      uint8_t x;
      if (!num(x))
        return false;
      if (x > 1)
        return fail("a bool of value " + std::to_string(x));
      v.number = x;
      return true;
    }
    case STRING:
      return string(v.text);
    case U64: {
      uint64_t x;
      return num(x) && (v.number = double(x), true);
    }
    case I64: {
      int64_t x;
      return num(x) && (v.number = double(x), true);
    }
    case F64: {
      double x;
      return num(x) && (v.number = x, true);
    }
    case ARRAY: {
      uint32_t el;
      uint64_t count;
      if (!num(el) || !num(count))
        return false;
      if (el >= kValueTypes || (el == ARRAY && depth > 0))
        return fail("an array of element type " + std::to_string(el));
      if (count > kMaxArray)
        return fail("an array of " + std::to_string(count) + " elements");
      static const uint8_t width[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
      v.elementType = el;
      if (keep && el != ARRAY) {
        // Element by element: each read is checked against the file, so
        // what is kept is bounded by the file's size.
        Value inner;
        for (uint64_t i = 0; i < count; ++i) {
          if (width[el] && at + width[el] > src.size())
            return fail("an array runs past the end of the file");
          if (!value(el, inner, depth + 1))
            return false;
          if (el == STRING)
            v.strings.push_back(std::move(inner.text));
          else
            v.numbers.push_back(inner.number);
        }
        return true;
      }
      if (width[el] && el != BOOL) {
        at += count * width[el]; // checked by the next read or the end
        if (at > src.size())
          return fail("an array runs past the end of the file");
        return true;
      }
      Value inner;
      for (uint64_t i = 0; i < count; ++i)
        if (!value(el, inner, depth + 1))
          return false;
      return true;
    }
    default:
      return fail("a value of unknown type " + std::to_string(type));
    }
  }

private:
  tio::Source &src;
  std::string &err;
};

uint64_t blockElements(uint32_t type) {
  return type == kQ4_0 || type == kQ8_0 ? 32 : 1;
}
uint64_t blockBytes(uint32_t type) {
  switch (type) {
  case kF32:
    return 4;
  case kF16:
  case kBF16:
    return 2;
  case kQ8_0:
    return 34;
  case kQ4_0:
    return 18;
  default:
    return 0;
  }
}

float halfAt(const uint8_t *p) {
  return npy::halfToFloat(uint16_t(p[0] | p[1] << 8));
}

/// Tensor data of `n` elements of `type` to floats.
void dequantize(uint32_t type, const uint8_t *p, uint64_t n, float *out) {
  switch (type) {
  case kF32:
    std::memcpy(out, p, size_t(n) * 4);
    break;
  case kF16:
    for (uint64_t i = 0; i < n; ++i)
      out[i] = halfAt(p + 2 * i);
    break;
  case kBF16:
    for (uint64_t i = 0; i < n; ++i)
      out[i] = tio::bf16ToFloat(uint16_t(p[2 * i] | p[2 * i + 1] << 8));
    break;
  case kQ8_0: // per 32: f16 scale, 32 int8 codes
    for (uint64_t b = 0; b < n / 32; ++b) {
      const uint8_t *blk = p + 34 * b;
      float d = halfAt(blk);
      for (int j = 0; j < 32; ++j)
        out[32 * b + j] = d * float(int8_t(blk[2 + j]));
    }
    break;
  case kQ4_0: // per 32: f16 scale, 16 bytes: low nibbles 0..15, high 16..31
    for (uint64_t b = 0; b < n / 32; ++b) {
      const uint8_t *blk = p + 18 * b;
      float d = halfAt(blk);
      for (int j = 0; j < 16; ++j) {
        out[32 * b + j] = d * float(int(blk[2 + j] & 0xF) - 8);
        out[32 * b + j + 16] = d * float(int(blk[2 + j] >> 4) - 8);
      }
    }
    break;
  }
}

const char *typeName(uint32_t t) {
  switch (t) {
  case kF32:
    return "F32";
  case kF16:
    return "F16";
  case kBF16:
    return "BF16";
  case kQ8_0:
    return "Q8_0";
  case kQ4_0:
    return "Q4_0";
  default:
    return nullptr;
  }
}

/// The header and the metadata; r is left at the tensor table. On failure
/// `msg` says why (without the path).
bool readMetadata(Reader &r, std::map<std::string, Value> &meta,
                  uint64_t &tensorCount, std::string &msg) {
  std::string &err = msg;
  auto fail = [&](const std::string &m) {
    msg = m;
    return false;
  };
  char magic[4];
  uint32_t version;
  uint64_t keyCount;
  if (!r.bytes(magic, 4) || std::memcmp(magic, "GGUF", 4) != 0)
    return fail("not a GGUF file");
  if (!r.num(version) || !r.num(tensorCount) || !r.num(keyCount))
    return fail("GGUF header: " + err);
  if (version != 2 && version != 3)
    return fail("GGUF version " + std::to_string(version) +
                " is not supported (2, 3)");
  if (keyCount > kMaxKeys || tensorCount > kMaxTensors)
    return fail("GGUF header: " + std::to_string(keyCount) + " keys, " +
                std::to_string(tensorCount) + " tensors: too many");
  for (uint64_t i = 0; i < keyCount; ++i) {
    std::string key;
    uint32_t type;
    Value v;
    if (!r.string(key) || !r.num(type) ||
        !r.value(type, v, 0, key.rfind("tokenizer.ggml.", 0) == 0))
      return fail("metadata entry " + std::to_string(i) +
                  (key.empty() ? "" : " ('" + printable(key, 60) + "')") +
                  ": " + err);
    if (meta.count(key))
      return fail("metadata key '" + printable(key, 60) + "' appears twice");
    meta[key] = std::move(v);
  }
  return true;
}

} // namespace

bool isGguf(const std::string &path) {
  tio::FileSource src;
  std::string err;
  char magic[4];
  return src.open(path, err) && src.size() >= 4 && src.read(0, magic, 4, err) &&
         std::memcmp(magic, "GGUF", 4) == 0;
}

std::optional<Llama2cCheckpoint> openGguf(const std::string &path,
                                          std::string *error) {
  std::string err;
  auto fail = [&](const std::string &m) {
    if (error)
      *error = path + ": " + m;
    return std::nullopt;
  };
  tio::FileSource src;
  if (!src.open(path, err)) {
    if (error)
      *error = err;
    return std::nullopt;
  }
  Reader r(src, err);
  std::map<std::string, Value> meta;
  uint64_t tensorCount = 0;
  if (!readMetadata(r, meta, tensorCount, err))
    return fail(err);
  auto str = [&](const std::string &k) -> std::string {
    auto it = meta.find(k);
    return it != meta.end() && it->second.type == STRING ? it->second.text
                                                         : std::string();
  };
  const std::string arch = str("general.architecture");
  if (arch != "llama" && arch != "qwen2")
    return fail("general.architecture '" + printable(arch, 40) +
                "' is not supported (llama, qwen2)");
  auto it = meta.find("split.count");
  if (it != meta.end() && it->second.number > 1)
    return fail("a split GGUF (split.count " +
                std::to_string(int64_t(it->second.number)) +
                ") is not supported: merge it into one file");

  // The ARCH.* keys: read, ignored, or refused by name.
  std::set<std::string> used;
  auto number = [&](const std::string &k, double &out, bool required) -> bool {
    const std::string key = arch + "." + k;
    used.insert(key);
    auto f = meta.find(key);
    if (f == meta.end()) {
      if (required)
        err = "metadata key '" + key + "' is missing";
      return !required;
    }
    if (f->second.type == STRING || f->second.type == ARRAY ||
        !std::isfinite(f->second.number)) {
      err = "metadata key '" + key + "' is not a number";
      return false;
    }
    out = f->second.number;
    return true;
  };
  double context = 0, dim = 0, layers = 0, hidden = 0, heads = 0, kvHeads = -1,
         eps = 0, theta = 10000, ropeDims = -1, keyLen = -1, valueLen = -1,
         vocab = -1, factor = 1;
  if (!number("context_length", context, true) ||
      !number("embedding_length", dim, true) ||
      !number("block_count", layers, true) ||
      !number("feed_forward_length", hidden, true) ||
      !number("attention.head_count", heads, true) ||
      !number("attention.head_count_kv", kvHeads, false) ||
      !number("attention.layer_norm_rms_epsilon", eps, true) ||
      !number("rope.freq_base", theta, false) ||
      !number("rope.dimension_count", ropeDims, false) ||
      !number("attention.key_length", keyLen, false) ||
      !number("attention.value_length", valueLen, false) ||
      !number("vocab_size", vocab, false) ||
      !number("rope.scaling.factor", factor, false))
    return fail(err);
  const std::string scaling = str(arch + ".rope.scaling.type");
  used.insert(arch + ".rope.scaling.type");
  for (const auto &[key, v] : meta)
    if (key.compare(0, arch.size() + 1, arch + ".") == 0 && !used.count(key))
      return fail("metadata key '" + printable(key, 60) +
                  "' is not supported (kvq does not know how it changes the "
                  "model)");
  auto whole = [](double v) {
    return v >= 0 && v <= double(1 << 30) && v == std::floor(v);
  };
  for (double v : {context, dim, layers, hidden, heads})
    if (!whole(v))
      return fail("a shape key of " + arch + ".* is not a whole number");
  Llama2cConfig c;
  c.dim = int32_t(dim);
  c.hiddenDim = int32_t(hidden);
  c.layers = int32_t(layers);
  c.heads = int32_t(heads);
  c.kvHeads = int32_t(kvHeads < 0 ? heads : whole(kvHeads) ? kvHeads : -1);
  c.seqLen = int32_t(context);
  c.legacyRopeTables = false;
  c.ropePairs = arch == "llama" ? RopePairs::Interleaved : RopePairs::Half;
  c.qkvBias = arch == "qwen2";
  if (keyLen >= 0) {
    if (!whole(keyLen) || keyLen != (valueLen < 0 ? keyLen : valueLen))
      return fail(arch + ".attention.key_length and value_length differ");
    if (heads > 0 && keyLen * heads != dim)
      c.explicitHeadDim = int32_t(keyLen);
  }
  if (!(eps < 1 && float(eps) >= std::numeric_limits<float>::min()) ||
      !(theta > 1 && theta < 1e12))
    return fail(arch + ".attention.layer_norm_rms_epsilon or " + arch +
                ".rope.freq_base is out of range");
  c.normEps = float(eps);
  c.ropeTheta = float(theta);
  if (scaling == "linear") {
    if (!(factor > 0))
      return fail(arch + ".rope.scaling.factor must be positive");
    c.ropeScaling.kind = RopeScaling::Kind::Linear;
    c.ropeScaling.factor = factor;
  } else if (!scaling.empty() && scaling != "none") {
    return fail(arch + ".rope.scaling.type '" + printable(scaling, 40) +
                "' is not supported (none, linear)");
  }

  // The tensor table.
  std::vector<Info> infos(static_cast<size_t>(tensorCount));
  for (Info &t : infos) {
    uint32_t nd;
    if (!r.string(t.name) || !r.num(nd))
      return fail("tensor table: " + err);
    if (nd < 1 || nd > 4)
      return fail("tensor '" + printable(t.name, 60) + "' has " +
                  std::to_string(nd) + " dimensions");
    t.dims.resize(nd);
    t.elements = 1;
    for (uint64_t &d : t.dims) {
      if (!r.num(d))
        return fail("tensor table: " + err);
      if (d == 0 || d > (uint64_t(1) << 32) ||
          __builtin_mul_overflow(t.elements, d, &t.elements) ||
          t.elements > (uint64_t(1) << 40))
        return fail("tensor '" + printable(t.name, 60) +
                    "' has a dimension of 0 or too many elements");
    }
    if (!r.num(t.type) || !r.num(t.offset))
      return fail("tensor table: " + err);
    if (!typeName(t.type))
      return fail("tensor '" + printable(t.name, 60) + "' has type " +
                  std::to_string(t.type) +
                  " (supported: F32, F16, BF16, Q8_0, Q4_0)");
    if (t.dims[0] % blockElements(t.type))
      return fail("tensor '" + printable(t.name, 60) + "' of " +
                  typeName(t.type) + " has rows of " +
                  std::to_string(t.dims[0]) + ", not whole blocks of 32");
    t.bytes = t.elements / blockElements(t.type) * blockBytes(t.type);
  }
  uint64_t alignment = 32;
  if (meta.count("general.alignment")) {
    double a = meta["general.alignment"].number;
    if (meta["general.alignment"].type != U32 || a < 1 || a > 65536 ||
        (uint64_t(a) & (uint64_t(a) - 1)))
      return fail("general.alignment is not a power of two up to 65536");
    alignment = uint64_t(a);
  }
  const uint64_t dataStart = (r.at + alignment - 1) / alignment * alignment;
  if (dataStart > src.size())
    return fail("the tensor data section starts past the end of the file");
  const uint64_t dataBytes = src.size() - dataStart;
  std::vector<const Info *> byOffset;
  std::map<std::string, const Info *> byName;
  for (const Info &t : infos) {
    if (t.offset % alignment || t.offset > dataBytes ||
        t.bytes > dataBytes - t.offset)
      return fail("tensor '" + printable(t.name, 60) + "' at offset " +
                  std::to_string(t.offset) + " (" + std::to_string(t.bytes) +
                  " bytes) is misaligned or outside the " +
                  std::to_string(dataBytes) + " data bytes");
    if (!byName.emplace(t.name, &t).second)
      return fail("tensor '" + printable(t.name, 60) + "' appears twice");
    byOffset.push_back(&t);
  }
  std::sort(byOffset.begin(), byOffset.end(),
            [](const Info *a, const Info *b) { return a->offset < b->offset; });
  for (size_t i = 1; i < byOffset.size(); ++i)
    if (byOffset[i]->offset < byOffset[i - 1]->offset + byOffset[i - 1]->bytes)
      return fail("tensors '" + printable(byOffset[i - 1]->name, 60) +
                  "' and '" + printable(byOffset[i]->name, 60) + "' overlap");

  // The vocabulary: the key, else the embedding's rows.
  auto embd = byName.find("token_embd.weight");
  if (embd == byName.end())
    return fail("tensor 'token_embd.weight' is missing");
  c.vocab = int32_t(vocab >= 0 && whole(vocab)
                        ? vocab
                        : std::min<double>(double(embd->second->dims.back()),
                                           double(INT32_MAX)));
  c.sharedClassifier = !byName.count("output.weight");
  static const ShapeFieldNames names = {
      "GGUF",        "embedding_length",     "feed_forward_length",
      "block_count", "attention.head_count", "attention.head_count_kv",
      "vocab_size",  "context_length"};
  if (!checkModelShape(c, names, &err))
    return fail(err.substr(6)); // without "GGUF: "
  if (ropeDims >= 0 && ropeDims != c.headDim())
    return fail(arch + ".rope.dimension_count " +
                std::to_string(int64_t(ropeDims)) + " is not head_dim " +
                std::to_string(c.headDim()) + " (partial RoPE)");

  // What the model reads; GGUF lists dims innermost first.
  struct Want {
    std::string name;
    std::vector<uint64_t> dims;
    int64_t offset;
  };
  const Llama2cLayout l = llama2cLayout(c);
  const uint64_t d = uint64_t(c.dim), h = uint64_t(c.hiddenDim),
                 q = uint64_t(c.qDim()), kv = uint64_t(c.kvDim()),
                 v = uint64_t(c.vocab);
  std::vector<Want> want = {{"token_embd.weight", {d, v}, l.embedding},
                            {"output_norm.weight", {d}, l.finalNorm}};
  if (!c.sharedClassifier)
    want.push_back({"output.weight", {d, v}, l.classifier});
  for (int64_t i = 0; i < c.layers; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    want.push_back({p + "attn_norm.weight", {d}, l.attnNorm + i * int64_t(d)});
    want.push_back({p + "attn_q.weight", {d, q}, l.wq + i * int64_t(q * d)});
    want.push_back({p + "attn_k.weight", {d, kv}, l.wk + i * int64_t(kv * d)});
    want.push_back({p + "attn_v.weight", {d, kv}, l.wv + i * int64_t(kv * d)});
    want.push_back(
        {p + "attn_output.weight", {q, d}, l.wo + i * int64_t(d * q)});
    if (c.qkvBias) {
      want.push_back({p + "attn_q.bias", {q}, l.bq + i * int64_t(q)});
      want.push_back({p + "attn_k.bias", {kv}, l.bk + i * int64_t(kv)});
      want.push_back({p + "attn_v.bias", {kv}, l.bv + i * int64_t(kv)});
    }
    want.push_back({p + "ffn_norm.weight", {d}, l.ffnNorm + i * int64_t(d)});
    want.push_back({p + "ffn_gate.weight", {d, h}, l.w1 + i * int64_t(h * d)});
    want.push_back({p + "ffn_down.weight", {h, d}, l.w2 + i * int64_t(d * h)});
    want.push_back({p + "ffn_up.weight", {d, h}, l.w3 + i * int64_t(h * d)});
  }
  std::set<std::string> wanted;
  for (const Want &w : want)
    wanted.insert(w.name);
  for (const Info &t : infos)
    if (!wanted.count(t.name))
      return fail("tensor '" + printable(t.name, 60) +
                  "' is not part of the model kvq reads" +
                  (t.name == "rope_freqs.weight"
                       ? " (llama3 RoPE scaling in GGUF is not supported)"
                       : ""));
  for (const Want &w : want) {
    auto f = byName.find(w.name);
    if (f == byName.end())
      return fail("tensor '" + w.name + "' is missing");
    if (f->second->dims != w.dims) {
      std::string got, expect;
      for (uint64_t x : f->second->dims)
        got += (got.empty() ? "" : ", ") + std::to_string(x);
      for (uint64_t x : w.dims)
        expect += (expect.empty() ? "" : ", ") + std::to_string(x);
      return fail("tensor '" + w.name + "' has dims [" + got +
                  "], the metadata gives [" + expect + "]");
    }
  }

  // When every matrix is F16 (or every one BF16) the weights are kept in
  // that type, any vector of another type rounded to it; else (F32, Q8_0,
  // Q4_0 or a mix) widened or dequantized to f32.
  bool allF16 = true, allBf16 = true;
  for (const Want &w : want)
    if (w.dims.size() == 2) {
      allF16 = allF16 && byName[w.name]->type == kF16;
      allBf16 = allBf16 && byName[w.name]->type == kBF16;
    }
  std::vector<uint8_t> raw;
  if (allF16 || allBf16) {
    const uint32_t kept = allF16 ? kF16 : kBF16;
    const uint16_t expMask = allBf16 ? 0x7f80 : 0x7c00;
    std::vector<uint16_t> bits(size_t(l.total), 0);
    std::vector<float> wide;
    for (const Want &w : want) {
      const Info &t = *byName[w.name];
      raw.resize(size_t(t.bytes));
      if (!src.read(dataStart + t.offset, raw.data(), raw.size(), err))
        return fail("tensor '" + w.name + "': " + err);
      uint16_t *out = bits.data() + w.offset;
      if (t.type == kept) {
        std::memcpy(out, raw.data(), size_t(t.elements) * 2);
      } else {
        wide.resize(size_t(t.elements));
        dequantize(t.type, raw.data(), t.elements, wide.data());
        for (uint64_t i = 0; i < t.elements; ++i)
          out[i] = allBf16 ? tio::floatToBf16(wide[i])
                           : npy::floatToHalf(wide[i]);
      }
      for (uint64_t i = 0; i < t.elements; ++i)
        if ((out[i] & expMask) == expMask)
          return fail("tensor '" + w.name + "', element " + std::to_string(i) +
                      " is " +
                      ((out[i] & (allBf16 ? 0x7f : 0x3ff)) ? "NaN"
                                                           : "infinite") +
                      " in " + (allBf16 ? "bf16" : "f16") +
                      " (every weight must be finite)");
    }
    return Llama2cCheckpoint::fromNarrowWeights(
        c, std::move(bits),
        allBf16 ? Llama2cCheckpoint::Storage::BF16
                : Llama2cCheckpoint::Storage::F16);
  }
  std::vector<float> weights(size_t(l.total), 0.0f);
  for (const Want &w : want) {
    const Info &t = *byName[w.name];
    raw.resize(size_t(t.bytes));
    if (!src.read(dataStart + t.offset, raw.data(), raw.size(), err))
      return fail("tensor '" + w.name + "': " + err);
    float *out = weights.data() + w.offset;
    dequantize(t.type, raw.data(), t.elements, out);
    for (uint64_t i = 0; i < t.elements; ++i)
      if (!std::isfinite(out[i]))
        return fail("tensor '" + w.name + "', element " + std::to_string(i) +
                    " is " + (std::isnan(out[i]) ? "NaN" : "infinite") +
                    " (every weight must be finite)");
  }
  return Llama2cCheckpoint::fromWeights(c, std::move(weights));
}

std::optional<Tokenizer> openGgufTokenizer(const std::string &path,
                                          int32_t modelVocab, bool *present,
                                          std::string *error) {
  std::string err;
  *present = false;
  tio::FileSource src;
  if (!src.open(path, err)) {
    *error = err;
    return std::nullopt;
  }
  Reader r(src, err);
  std::map<std::string, Value> meta;
  uint64_t tensorCount = 0;
  if (!readMetadata(r, meta, tensorCount, err)) {
    *error = path + ": " + err;
    return std::nullopt;
  }
  if (!meta.count("tokenizer.ggml.model"))
    return std::nullopt;
  *present = true;
  auto bad = [&](const std::string &key, const char *what) {
    *error = path + ": " + key + " is not " + what;
    return std::nullopt;
  };
  VocabularyTables v;
  auto text = [&](const char *key, std::string &out) {
    auto it = meta.find(key);
    if (it == meta.end())
      return true;
    if (it->second.type != STRING)
      return false;
    out = it->second.text;
    return true;
  };
  auto strings = [&](const char *key, std::vector<std::string> &out) {
    auto it = meta.find(key);
    if (it == meta.end())
      return true;
    if (it->second.type != ARRAY || it->second.elementType != STRING)
      return false;
    out = it->second.strings;
    return true;
  };
  if (!text("tokenizer.ggml.model", v.model) || v.model.empty())
    return bad("tokenizer.ggml.model", "a non-empty string");
  if (!text("tokenizer.ggml.pre", v.pre))
    return bad("tokenizer.ggml.pre", "a string");
  if (!strings("tokenizer.ggml.tokens", v.tokens))
    return bad("tokenizer.ggml.tokens", "an array of strings");
  if (!strings("tokenizer.ggml.merges", v.merges))
    return bad("tokenizer.ggml.merges", "an array of strings");
  if (auto it = meta.find("tokenizer.ggml.scores"); it != meta.end()) {
    if (it->second.type != ARRAY || it->second.elementType != F32)
      return bad("tokenizer.ggml.scores", "an array of f32");
    for (double x : it->second.numbers)
      v.scores.push_back(float(x));
  }
  if (auto it = meta.find("tokenizer.ggml.token_type"); it != meta.end()) {
    if (it->second.type != ARRAY || it->second.elementType != I32)
      return bad("tokenizer.ggml.token_type", "an array of i32");
    for (double x : it->second.numbers)
      v.tokenTypes.push_back(int32_t(x));
  }
  for (auto [key, out] :
       {std::pair<const char *, int64_t *>{"tokenizer.ggml.bos_token_id",
                                           &v.bos},
        {"tokenizer.ggml.eos_token_id", &v.eos},
        {"tokenizer.ggml.unknown_token_id", &v.unk}}) {
    auto it = meta.find(key);
    if (it == meta.end())
      continue;
    uint32_t t = it->second.type;
    if (t == STRING || t == ARRAY || t == F32 || t == F64 || t == BOOL ||
        it->second.number < 0 || it->second.number > double(INT32_MAX))
      return bad(key, "a token id (a non-negative integer)");
    *out = int64_t(it->second.number);
  }
  if (auto it = meta.find("tokenizer.ggml.add_bos_token"); it != meta.end()) {
    if (it->second.type != BOOL)
      return bad("tokenizer.ggml.add_bos_token", "a bool");
    v.addBos = it->second.number > 0;
  }
  return Tokenizer::fromTables(v, modelVocab, path, error);
}

} // namespace kvq::model
