//===- CompiledModel.cpp - a llama2.c model compiled in process -----------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include "tools/kvq-run/CompiledModel.h"

#include "kvq/dialect/KvqDialect.h"
#include "kvq/passes/Passes.h"
#include "kvq/passes/Registration.h"

#include "kvq/runtime.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Target/TargetMachine.h"

#include <cstdlib>
#include <cstring>
#include <mutex>

namespace kvq::run {

namespace {

/// A strided memref descriptor of rank R as the C interface lays it out:
/// allocated, aligned, offset, sizes[R], strides[R], all 8-byte words.
struct Descriptor {
  std::vector<int64_t> words;
  Descriptor() = default;
  Descriptor(const void *data, std::vector<int64_t> sizes) {
    words.push_back(reinterpret_cast<int64_t>(data));
    words.push_back(reinterpret_cast<int64_t>(data));
    words.push_back(0);
    words.insert(words.end(), sizes.begin(), sizes.end());
    std::vector<int64_t> strides(sizes.size(), 1);
    for (size_t i = sizes.size(); i-- > 1;)
      strides[i - 1] = strides[i] * sizes[i];
    words.insert(words.end(), strides.begin(), strides.end());
  }
  void *ptr() { return words.data(); }
};

void initLLVMOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });
}

/// f32 -> binary16 bits, to nearest, ties to even (the compiler's
/// conversion).
uint16_t toHalf(float v) {
  _Float16 h = static_cast<_Float16>(v);
  uint16_t bits;
  std::memcpy(&bits, &h, sizeof(bits));
  return bits;
}

/// f32 -> bfloat16 bits, to nearest, ties to even; NaN stays a quiet NaN.
uint16_t toBf16(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof(bits));
  if ((bits & 0x7fffffffu) > 0x7f800000u)
    return static_cast<uint16_t>((bits >> 16) | 0x40u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

/// The configuration a !kvq.cache type carries, every default filled in.
CacheSummary summarize(mlir::kvq::CacheType type) {
  CacheSummary s;
  mlir::kvq::CacheConfigAttr c = type.getConfig();
  s.method = mlir::kvq::stringifyMethod(c.getMethod()).str();
  std::string element;
  llvm::raw_string_ostream os(element);
  type.getElementType().print(os);
  s.elementType = os.str();
  s.layers = type.getLayers();
  s.kvHeads = type.getKvHeads();
  s.headDim = type.getHeadDim();
  s.keyBits = c.getKeyBits();
  s.valueBits = c.getValueBits();
  s.groupSize = c.getGroupSize();
  s.residualLength = c.getResidualLength();
  s.residualMode = mlir::kvq::stringifyResidualMode(c.getResidualMode()).str();
  s.sinks = c.getSinkTokens();
  s.outlierFraction = c.getOutlierFractionValue();
  s.lloydIters = c.getLloydIters();
  s.refitInterval = c.getRefitInterval();
  s.kvquantSinks = c.getKvquantNSink();
  if (mlir::kvq::RopeAttr rope = c.getRope()) {
    s.preRope = true;
    s.ropeStyle = mlir::kvq::stringifyRopeStyle(rope.getStyle()).str();
    s.ropeTheta = rope.getThetaValue();
  }
  return s;
}

/// Words of a descriptor of rank `rank`.
constexpr size_t descriptorWords(size_t rank) { return 3 + 2 * rank; }

} // namespace

struct CompiledModel::Impl {
  mlir::MLIRContext context;
  std::unique_ptr<llvm::TargetMachine> hostMachine; // outlives the engine
  std::unique_ptr<mlir::ExecutionEngine> engine;
  model::Llama2cConfig config;
  int64_t contextLength = 0;
  Descriptor weights;
  const void *weightData = nullptr;
  kvq_weight_type weightType = KVQ_WEIGHT_F32;
  std::vector<uint16_t> narrowWeights; // f16 / bf16 copies
  // Plain model: the graph's own cache tensors (f32-sized elements, so an
  // f16 cache fits too).
  std::vector<float> kcache, vcache;
  // kvq model: the runtime cache handle.
  void *cache = nullptr;
  std::vector<float> logits;
  // The packed entry points, looked up once: an ORC lookup per call cost
  // more than a small model's whole decode step spends outside the graph.
  using Packed = void (*)(void **);
  llvm::StringMap<Packed> entries;
  // Descriptors rebuilt per call only where a pointer or size changes.
  Descriptor kDesc, vDesc;

  Impl() : context(mlir::MLIRContext::Threading::DISABLED) {}
  ~Impl() {
    if (cache)
      kvq_cache_destroy(static_cast<kvq_cache_t *>(cache));
  }
};

CompiledModel::~CompiledModel() = default;

std::unique_ptr<CompiledModel>
CompiledModel::compile(const model::Llama2cCheckpoint &ckpt,
                       int64_t prefillTokens, const std::string &passOptions,
                       std::string *error,
                       const import::ImportOptions &spelling,
                       const CompileOptions &compileOptions) {
  initLLVMOnce();
  std::unique_ptr<CompiledModel> m(new CompiledModel());
  m->impl_ = std::make_unique<Impl>();
  Impl &impl = *m->impl_;
  m->prefillTokens_ = prefillTokens;
  m->quantized_ = !passOptions.empty();
  impl.config = ckpt.config();
  impl.contextLength = ckpt.config().seqLen;

  // What the import, the kvq passes, the lowering and the translation to
  // LLVM IR need: the embedders' entry point.
  mlir::DialectRegistry registry;
  mlir::kvq::registerAllKvq(registry);
  impl.context.appendDialectRegistry(registry);
  impl.context.loadAllAvailableDialects();

  // Collect diagnostics (the pass's remarks say why a cache was refused),
  // each once (the pass runs twice on a refused configuration), on one
  // line.
  std::string diagnostics;
  mlir::ScopedDiagnosticHandler handler(
      &impl.context, [&](mlir::Diagnostic &d) {
        std::string line = d.str();
        for (char &c : line)
          if (c == '\n' || c == '\r')
            c = ' ';
        if (diagnostics.find(line) == std::string::npos)
          diagnostics += (diagnostics.empty() ? "" : "; ") + line;
        return mlir::success();
      });
  import::ImportOptions options = spelling;
  options.prefillTokens = prefillTokens;
  options.contextLength = 0;
  if (!m->quantized_ &&
      options.cacheLayout != import::ImportOptions::CacheLayout::Stacked) {
    *error = "the plain model is driven with a stacked cache";
    return nullptr;
  }
  m->cacheF16_ = options.cacheF16;
  if (!m->quantized_) {
    const auto &c = ckpt.config();
    m->summary_.method = "none";
    m->summary_.elementType = options.cacheF16 ? "f16" : "f32";
    m->summary_.layers = c.layers;
    m->summary_.kvHeads = c.kvHeads;
    m->summary_.headDim = c.headDim();
  }
  auto module = import::importLlama2c(impl.context, ckpt.config(), options);
  if (!module) {
    *error = "kvq-import failed: " + diagnostics;
    return nullptr;
  }
  // Pass lists for a module-anchored pass manager (no anchor in the text).
  // A failed runtime call is recorded, not fatal: call() reads the pending
  // status after every entry point and reports it.
  const std::string lowering =
      std::string("kvq-to-llvm{on-error=report matmul-kernels=") +
      (compileOptions.matmulKernels ? "true" : "false") + "}";
  std::string pipeline;
  if (m->quantized_)
    pipeline += "kvq-quantize-kv-cache{" + passOptions + "},";
  pipeline += lowering;
  mlir::PassManager pm(&impl.context, mlir::ModuleOp::getOperationName());
  std::string parseErrors;
  llvm::raw_string_ostream errs(parseErrors);
  if (mlir::failed(mlir::parsePassPipeline(pipeline, pm, errs))) {
    *error = "bad pass options '" + passOptions + "': " + parseErrors;
    return nullptr;
  }
  if (m->quantized_) {
    // Check the cache was adopted before lowering hides it.
    mlir::PassManager quantize(&impl.context,
                               mlir::ModuleOp::getOperationName());
    if (mlir::failed(mlir::parsePassPipeline(
            "kvq-quantize-kv-cache{" + passOptions + "}", quantize, errs)) ||
        mlir::failed(quantize.run(*module))) {
      *error = "kvq-quantize-kv-cache failed: " + diagnostics;
      return nullptr;
    }
    auto decode = module->lookupSymbol<mlir::func::FuncOp>("decode");
    mlir::kvq::CacheType cacheType;
    if (decode)
      for (mlir::Type t : decode.getArgumentTypes())
        if (auto c = mlir::dyn_cast<mlir::kvq::CacheType>(t))
          cacheType = c;
    if (!cacheType) {
      *error = "kvq-quantize-kv-cache did not adopt the cache: " + diagnostics;
      return nullptr;
    }
    m->summary_ = summarize(cacheType);
    pm.clear();
    if (mlir::failed(mlir::parsePassPipeline(lowering, pm, errs))) {
      *error = parseErrors;
      return nullptr;
    }
  }
  if (mlir::failed(pm.run(*module))) {
    *error = "lowering failed: " + diagnostics;
    return nullptr;
  }
  if (std::getenv("KVQ_RUN_DUMP")) {
    pm.printAsTextualPipeline(llvm::errs());
    module->print(llvm::errs());
  }
  mlir::ExecutionEngineOptions engineOptions;
  // The host's target machine gives the optimizer the host's vector
  // widths and costs; without one, LLVM's loop and SLP vectorizers see no
  // vector registers and the JIT's elementwise loops (norms, RoPE, the
  // plain model's attention) stay scalar. Vectorizing them reorders no
  // floating-point operation (no fast-math flags), so the bits are those
  // of the scalar loops.
  if (auto builder = llvm::orc::JITTargetMachineBuilder::detectHost()) {
    if (auto tm = builder->createTargetMachine())
      impl.hostMachine = std::move(*tm);
    else
      llvm::consumeError(tm.takeError());
  } else {
    llvm::consumeError(builder.takeError());
  }
  auto transformer =
      mlir::makeOptimizingTransformer(3, 0, impl.hostMachine.get());
  engineOptions.transformer = transformer;
  auto engine = mlir::ExecutionEngine::create(*module, engineOptions);
  if (!engine) {
    *error = "JIT: " + llvm::toString(engine.takeError()) + "\n" + diagnostics;
    return nullptr;
  }
  impl.engine = std::move(*engine);
  if (options.weightType == import::storedWeightType(ckpt) &&
      ckpt.narrowWeights()) {
    // The checkpoint's own f16 / bf16 weights, read in place.
    bool half = options.weightType == import::ImportOptions::WeightType::F16;
    impl.weightType = half ? KVQ_WEIGHT_F16 : KVQ_WEIGHT_BF16;
    impl.weightData = ckpt.narrowWeights();
  } else if (options.weightType == import::ImportOptions::WeightType::F32) {
    impl.weightData = ckpt.weights();
  } else {
    bool half = options.weightType == import::ImportOptions::WeightType::F16;
    impl.weightType = half ? KVQ_WEIGHT_F16 : KVQ_WEIGHT_BF16;
    const float *w = ckpt.weights();
    impl.narrowWeights.resize(size_t(ckpt.layout().total));
    for (size_t i = 0; i < impl.narrowWeights.size(); ++i)
      impl.narrowWeights[i] = half ? toHalf(w[i]) : toBf16(w[i]);
    impl.weightData = impl.narrowWeights.data();
  }
  impl.weights = Descriptor(impl.weightData, {ckpt.layout().total});
  const auto &c = impl.config;
  impl.logits.assign(c.vocab, 0.0f);
  if (!m->reset(error))
    return nullptr;
  return m;
}

bool CompiledModel::reset(std::string *error) {
  Impl &impl = *impl_;
  const auto &c = impl.config;
  if (!quantized_) {
    size_t n = size_t(c.layers) * impl.contextLength * c.kvDim();
    impl.kcache.assign(n, 0.0f);
    impl.vcache.assign(n, 0.0f);
    return true;
  }
  if (impl.cache)
    kvq_cache_destroy(static_cast<kvq_cache_t *>(impl.cache));
  impl.cache = nullptr;
  impl.cache = newCache(error);
  return impl.cache != nullptr;
}

void *CompiledModel::cacheHandle() const { return impl_->cache; }

void *CompiledModel::newCache(std::string *error) const {
  if (!quantized_) {
    *error = "the plain model has no runtime cache";
    return nullptr;
  }
  void *created = nullptr;
  llvm::SmallVector<void *> args = {&created};
  if (auto err =
          impl_->engine->invokePacked("_mlir_ciface_kv_cache_create", args)) {
    *error = "kv_cache_create: " + llvm::toString(std::move(err));
    return nullptr;
  }
  if (!created)
    *error = "kv_cache_create returned no cache";
  return created;
}

const float *CompiledModel::call(const char *entry, const int32_t *tokens,
                                 int64_t n, int64_t pos) {
  Impl &impl = *impl_;
  const auto &c = impl.config;
  auto found = impl.entries.find(entry);
  if (found == impl.entries.end()) {
    impl.engine->initialize(); // as invokePacked does; runs once
    auto fn = impl.engine->lookupPacked(std::string("_mlir_ciface_") + entry);
    if (!fn) {
      error_ = "@" + std::string(entry) + ": " + llvm::toString(fn.takeError());
      return nullptr;
    }
    found = impl.entries.try_emplace(entry, *fn).first;
  }
  // A strided memref of rank 1 over the tokens.
  int64_t tokenDesc[descriptorWords(1)] = {
      reinterpret_cast<int64_t>(tokens), reinterpret_cast<int64_t>(tokens), 0,
      n, 1};
  // The result: the logits (the caches are updated in place: the pipeline
  // drops results equal to an argument).
  int64_t result[descriptorWords(1)] = {};
  void *resultPtr = result;
  void *wPtr = impl.weights.ptr();
  void *tPtr = tokenDesc;
  void *kPtr = nullptr, *vPtr = nullptr;
  llvm::SmallVector<void *, 8> args = {&resultPtr, &wPtr};
  if (quantized_) {
    args.push_back(&impl.cache);
  } else {
    if (impl.kDesc.words.empty() ||
        impl.kDesc.words[0] != reinterpret_cast<int64_t>(impl.kcache.data()) ||
        impl.vDesc.words[0] != reinterpret_cast<int64_t>(impl.vcache.data())) {
      const std::vector<int64_t> cacheShape = {c.layers, impl.contextLength,
                                               c.kvHeads, c.headDim()};
      impl.kDesc = Descriptor(impl.kcache.data(), cacheShape);
      impl.vDesc = Descriptor(impl.vcache.data(), cacheShape);
    }
    kPtr = impl.kDesc.ptr();
    vPtr = impl.vDesc.ptr();
    args.push_back(&kPtr);
    args.push_back(&vPtr);
  }
  args.push_back(&tPtr);
  args.push_back(&pos);
  // The graph's runtime failures are recorded on this thread, not printed:
  // the first one becomes this call's error.
  kvq_take_pending_status();
  kvq_set_status_echo(0);
  found->second(args.data());
  std::string runtimeError = kvq_pending_error(); // "" (no allocation) if none
  kvq_status status = kvq_take_pending_status();
  kvq_set_status_echo(1);
  auto *alloc = reinterpret_cast<float *>(result[0]);
  auto *aligned = reinterpret_cast<float *>(result[1]);
  if (status == KVQ_OK)
    std::memcpy(impl.logits.data(), aligned + result[2],
                sizeof(float) * c.vocab);
  std::free(alloc);
  if (status != KVQ_OK) {
    error_ = "@" + std::string(entry) + " at position " + std::to_string(pos) +
             ": " + runtimeError;
    return nullptr;
  }
  return impl.logits.data();
}

const float *CompiledModel::prefill(const int32_t *tokens, int64_t pos) {
  return call("prefill", tokens, prefillTokens_, pos);
}

const float *CompiledModel::decode(int32_t token, int64_t pos) {
  return call("decode", &token, 1, pos);
}

const void *CompiledModel::weights() const { return impl_->weightData; }

kvq_weight_type CompiledModel::weightType() const { return impl_->weightType; }

int64_t CompiledModel::ownWeightBytes() const {
  return int64_t(impl_->narrowWeights.size()) * 2;
}

CacheStats CompiledModel::stats() const {
  CacheStats s;
  if (!quantized_ || !impl_->cache)
    return s;
  kvq_stats st;
  if (kvq_cache_stats(static_cast<kvq_cache_t *>(impl_->cache), -1, &st) ==
      KVQ_OK) {
    s.tokens = st.tokens;
    s.totalBytes = st.total_bytes;
    s.fp16Bytes = st.fp16_bytes;
  }
  return s;
}

bool CompiledModel::fetchLayer(int64_t layer, std::vector<float> &k,
                               std::vector<float> &v, int64_t *tokens,
                               std::string *error) const {
  const Impl &impl = *impl_;
  const auto &c = impl.config;
  size_t row = size_t(c.kvDim());
  if (!quantized_ && cacheF16_) {
    *error = "fetching an f16 plain cache is not supported";
    return false;
  }
  if (!quantized_) {
    // The plain cache does not know its length; the caller passes it in.
    size_t n = size_t(*tokens) * row;
    size_t base = size_t(layer) * impl.contextLength * row;
    k.assign(impl.kcache.begin() + base, impl.kcache.begin() + base + n);
    v.assign(impl.vcache.begin() + base, impl.vcache.begin() + base + n);
    return true;
  }
  auto *cache = static_cast<const kvq_cache_t *>(impl.cache);
  if (kvq_cache_length(cache, int32_t(layer), tokens) != KVQ_OK) {
    *error = kvq_last_error();
    return false;
  }
  k.assign(size_t(*tokens) * row, 0.0f);
  v.assign(size_t(*tokens) * row, 0.0f);
  if (*tokens > 0 && kvq_cache_fetch(cache, int32_t(layer), k.data(), v.data(),
                                     *tokens, KVQ_DTYPE_F32) != KVQ_OK) {
    *error = kvq_last_error();
    return false;
  }
  return true;
}

} // namespace kvq::run
