// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// dump_kv: run stories260K (llama2.c format) in float, generate T tokens
// from BOS (greedy, or sampled with llama2.c's xorshift sampler at
// temperature 1), and write per layer post-RoPE K, V [T, kv_heads, head_dim],
// Q [T, heads, head_dim] and the keys before RoPE (kpre, [T, kv_heads,
// head_dim]) as little-endian f32 .npy files.
// usage: dump_kv model.bin tok.bin outdir T seed(0=greedy) [layers]
// How test/data/stories260K/*.npy were made: see README.md there.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

static void writeNpy(const std::string &path, const std::vector<int64_t> &shape,
                     const std::vector<float> &data) {
  std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < shape.size(); ++i)
    dict += std::to_string(shape[i]) +
            (shape.size() == 1 ? "," : (i + 1 < shape.size() ? ", " : ""));
  dict += "), }";
  size_t total = 10 + dict.size() + 1;
  dict.append((64 - total % 64) % 64, ' ');
  dict += '\n';
  FILE *f = std::fopen(path.c_str(), "wb");
  if (!f) {
    std::perror(path.c_str());
    std::exit(1);
  }
  const unsigned char head[10] = {0x93,
                                  'N',
                                  'U',
                                  'M',
                                  'P',
                                  'Y',
                                  1,
                                  0,
                                  (unsigned char)(dict.size() & 0xff),
                                  (unsigned char)(dict.size() >> 8)};
  std::fwrite(head, 1, 10, f);
  std::fwrite(dict.data(), 1, dict.size(), f);
  std::fwrite(data.data(), 4, data.size(), f); // x86_64/aarch64: little-endian
  std::fclose(f);
}

static void rmsnorm(float *o, const float *x, const float *w, int n) {
  double ss = 0;
  for (int i = 0; i < n; ++i)
    ss += (double)x[i] * x[i];
  float s = 1.0f / std::sqrt((float)(ss / n) + 1e-5f);
  for (int i = 0; i < n; ++i)
    o[i] = w[i] * (s * x[i]);
}
static void matmul(float *o, const float *x, const float *w, int n, int d) {
  for (int i = 0; i < d; ++i) {
    float v = 0;
    for (int j = 0; j < n; ++j)
      v += w[(size_t)i * n + j] * x[j];
    o[i] = v;
  }
}

int main(int argc, char **argv) {
  if (argc < 6) {
    std::fprintf(stderr,
                 "usage: dump_kv model.bin tok.bin outdir T seed [layers]\n");
    return 2;
  }
  std::string outdir = argv[3];
  int T = std::atoi(argv[4]);
  unsigned long long seed = std::strtoull(argv[5], nullptr, 10);
  FILE *f = std::fopen(argv[1], "rb");
  if (!f) {
    std::perror(argv[1]);
    return 1;
  }
  int32_t hdr[7];
  if (std::fread(hdr, 4, 7, f) != 7)
    return 1;
  int dim = hdr[0], hidden = hdr[1], L = hdr[2], nh = hdr[3], nkv = hdr[4],
      seqlen = hdr[6];
  bool shared = hdr[5] > 0;
  int vocab = std::abs(hdr[5]);
  int hd = dim / nh, kvdim = nkv * hd;
  std::fseek(f, 0, SEEK_END);
  long bytes = std::ftell(f);
  std::fseek(f, 28, SEEK_SET);
  std::vector<float> W((bytes - 28) / 4);
  if (std::fread(W.data(), 4, W.size(), f) != W.size())
    return 1;
  std::fclose(f);
  float *p = W.data();
  float *emb = p;
  p += (size_t)vocab * dim;
  float *rmsAtt = p;
  p += (size_t)L * dim;
  float *wq = p;
  p += (size_t)L * dim * dim;
  float *wk = p;
  p += (size_t)L * kvdim * dim;
  float *wv = p;
  p += (size_t)L * kvdim * dim;
  float *wo = p;
  p += (size_t)L * dim * dim;
  float *rmsFfn = p;
  p += (size_t)L * dim;
  float *w1 = p;
  p += (size_t)L * hidden * dim;
  float *w2 = p;
  p += (size_t)L * dim * hidden;
  float *w3 = p;
  p += (size_t)L * hidden * dim;
  float *rmsFinal = p;
  p += dim;
  p += (size_t)seqlen * hd; // legacy RoPE tables
  float *wcls = shared ? emb : p;
  int layersOut = argc > 6 ? std::atoi(argv[6]) : L;
  if (T > seqlen) {
    std::fprintf(stderr, "T > seq_len %d\n", seqlen);
    return 2;
  }

  // tokenizer, for printing the text
  std::vector<std::string> vocabStr(vocab);
  {
    FILE *tf = std::fopen(argv[2], "rb");
    int32_t maxLen;
    float score;
    int32_t len;
    if (!tf || std::fread(&maxLen, 4, 1, tf) != 1)
      return 1;
    for (int i = 0; i < vocab; ++i) {
      if (std::fread(&score, 4, 1, tf) != 1 || std::fread(&len, 4, 1, tf) != 1)
        return 1;
      vocabStr[i].resize(len);
      if (std::fread(&vocabStr[i][0], 1, len, tf) != (size_t)len)
        return 1;
    }
    std::fclose(tf);
  }

  std::vector<float> kc((size_t)L * T * kvdim), vc(kc.size()), kpc(kc.size()),
      qc((size_t)L * T * dim);
  std::vector<float> x(dim), xb(dim), xb2(dim), hb(hidden), hb2(hidden), q(dim),
      k(kvdim), v(kvdim), att(T), logits(vocab);
  unsigned long long rng = seed;
  auto randomU32 = [&]() {
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return (unsigned)((rng * 0x2545F4914F6CDD1Dull) >> 32);
  };
  std::vector<int> tokens;
  int token = 1; // BOS
  for (int pos = 0; pos < T; ++pos) {
    tokens.push_back(token);
    std::memcpy(x.data(), emb + (size_t)token * dim, dim * 4);
    for (int l = 0; l < L; ++l) {
      rmsnorm(xb.data(), x.data(), rmsAtt + (size_t)l * dim, dim);
      matmul(q.data(), xb.data(), wq + (size_t)l * dim * dim, dim, dim);
      matmul(k.data(), xb.data(), wk + (size_t)l * kvdim * dim, dim, kvdim);
      matmul(v.data(), xb.data(), wv + (size_t)l * kvdim * dim, dim, kvdim);
      std::memcpy(&kpc[((size_t)l * T + pos) * kvdim], k.data(), kvdim * 4);
      for (int i = 0; i < dim; i += 2) { // interleaved RoPE
        int hdi = i % hd;
        float freq = 1.0f / std::pow(10000.0f, hdi / (float)hd);
        float val = pos * freq, fcr = std::cos(val), fci = std::sin(val);
        for (int which = 0; which < (i < kvdim ? 2 : 1); ++which) {
          float *vec = which == 0 ? q.data() : k.data();
          float v0 = vec[i], v1 = vec[i + 1];
          vec[i] = v0 * fcr - v1 * fci;
          vec[i + 1] = v0 * fci + v1 * fcr;
        }
      }
      float *kl = &kc[((size_t)l * T) * kvdim],
            *vl = &vc[((size_t)l * T) * kvdim];
      std::memcpy(kl + (size_t)pos * kvdim, k.data(), kvdim * 4);
      std::memcpy(vl + (size_t)pos * kvdim, v.data(), kvdim * 4);
      std::memcpy(&qc[((size_t)l * T + pos) * dim], q.data(), dim * 4);
      int kvmul = nh / nkv;
      for (int h = 0; h < nh; ++h) {
        const float *qh = q.data() + h * hd;
        float mx = -1e30f;
        for (int t = 0; t <= pos; ++t) {
          const float *kt = kl + (size_t)t * kvdim + (h / kvmul) * hd;
          float s = 0;
          for (int i = 0; i < hd; ++i)
            s += qh[i] * kt[i];
          att[t] = s / std::sqrt((float)hd);
          if (att[t] > mx)
            mx = att[t];
        }
        float sum = 0;
        for (int t = 0; t <= pos; ++t) {
          att[t] = std::exp(att[t] - mx);
          sum += att[t];
        }
        float *o = xb.data() + h * hd;
        for (int i = 0; i < hd; ++i)
          o[i] = 0;
        for (int t = 0; t <= pos; ++t) {
          const float *vt = vl + (size_t)t * kvdim + (h / kvmul) * hd;
          for (int i = 0; i < hd; ++i)
            o[i] += att[t] / sum * vt[i];
        }
      }
      matmul(xb2.data(), xb.data(), wo + (size_t)l * dim * dim, dim, dim);
      for (int i = 0; i < dim; ++i)
        x[i] += xb2[i];
      rmsnorm(xb.data(), x.data(), rmsFfn + (size_t)l * dim, dim);
      matmul(hb.data(), xb.data(), w1 + (size_t)l * hidden * dim, dim, hidden);
      matmul(hb2.data(), xb.data(), w3 + (size_t)l * hidden * dim, dim, hidden);
      for (int i = 0; i < hidden; ++i) {
        float s = hb[i];
        hb[i] = s / (1.0f + std::exp(-s)) * hb2[i];
      }
      matmul(xb.data(), hb.data(), w2 + (size_t)l * dim * hidden, hidden, dim);
      for (int i = 0; i < dim; ++i)
        x[i] += xb[i];
    }
    rmsnorm(x.data(), x.data(), rmsFinal, dim);
    matmul(logits.data(), x.data(), wcls, dim, vocab);
    int next = 0;
    if (seed == 0) {
      for (int i = 1; i < vocab; ++i)
        if (logits[i] > logits[next])
          next = i;
    } else { // temperature 1, llama2.c sample_mult
      float mx = logits[0];
      for (int i = 1; i < vocab; ++i)
        mx = std::max(mx, logits[i]);
      float sum = 0;
      for (int i = 0; i < vocab; ++i) {
        logits[i] = std::exp(logits[i] - mx);
        sum += logits[i];
      }
      float coin = (randomU32() >> 8) / 16777216.0f, cdf = 0;
      next = vocab - 1;
      for (int i = 0; i < vocab; ++i) {
        cdf += logits[i] / sum;
        if (coin < cdf) {
          next = i;
          break;
        }
      }
    }
    token = next;
  }
  for (int l = 0; l < layersOut; ++l) {
    std::vector<float> kl(kc.begin() + (size_t)l * T * kvdim,
                          kc.begin() + (size_t)(l + 1) * T * kvdim);
    std::vector<float> vl(vc.begin() + (size_t)l * T * kvdim,
                          vc.begin() + (size_t)(l + 1) * T * kvdim);
    std::vector<float> ql(qc.begin() + (size_t)l * T * dim,
                          qc.begin() + (size_t)(l + 1) * T * dim);
    std::vector<float> kpl(kpc.begin() + (size_t)l * T * kvdim,
                           kpc.begin() + (size_t)(l + 1) * T * kvdim);
    std::string s = std::to_string(l);
    writeNpy(outdir + "/k" + s + ".npy", {T, nkv, hd}, kl);
    writeNpy(outdir + "/v" + s + ".npy", {T, nkv, hd}, vl);
    writeNpy(outdir + "/q" + s + ".npy", {T, nh, hd}, ql);
    writeNpy(outdir + "/kpre" + s + ".npy", {T, nkv, hd}, kpl);
  }
  std::string text;
  for (size_t i = 0; i < tokens.size(); ++i) {
    std::string piece = vocabStr[tokens[i]];
    if (tokens[i] == 1)
      piece = "<s>";
    else if (tokens[i] == 2)
      piece = "</s>";
    else if (i > 0 && tokens[i - 1] == 1 && !piece.empty() && piece[0] == ' ')
      piece = piece.substr(1);
    unsigned b;
    if (std::sscanf(piece.c_str(), "<0x%02X>", &b) == 1)
      piece = std::string(1, (char)b);
    text += piece;
  }
  std::printf("%s\n", text.c_str());
  return 0;
}
