//===- kvq-run.cpp - compile a llama2.c model with kvq and run it ---------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//   kvq-run MODEL.bin [--prompt TEXT] [--steps N] [--method LIST] ...
//   kvq-run MODEL.bin --perplexity FILE [--method LIST] [--json]
//   kvq-run MODEL.bin --tokens IDS_FILE [--method LIST] [--json]
//
// Each method compiles the model in process (kvq-import, then
// --kvq-quantize-kv-cache unless the method is `none`, --kvq-to-llvm, JIT).
// The perplexity protocol is in docs/MODEL.md.
//
// main() reads as the table of contents: the options (Options), the model
// and what the run reads (Load), one of the modes -- --bench (Bench),
// --dump-kv and generation (Generate), perplexity (Perplexity) -- and
// what it prints (Report).
//===----------------------------------------------------------------------===//
#include "tools/kvq-run/Bench.h"
#include "tools/kvq-run/Common.h"
#include "tools/kvq-run/Generate.h"
#include "tools/kvq-run/Load.h"
#include "tools/kvq-run/Options.h"
#include "tools/kvq-run/Perplexity.h"
#include "tools/kvq-run/Report.h"

#include "progress.h"
#include "thread_pool.h"

#include "llvm/Support/InitLLVM.h"

#include <memory>
#include <optional>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

using namespace kvq::run;

namespace {

/// The compiled graph allocates every intermediate buffer per call (a
/// 512-token prefill: tens of MB each). glibc would map and unmap those,
/// so every call faulted its pages in again (a third of a prefill's time
/// on the CI box); keep freed memory for reuse instead.
void keepFreedMemory() {
#if defined(__GLIBC__)
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
}

/// Every cache the compiled models create, and every kvq_matmul call, uses
/// the pool (same bytes as one thread); none is set up for one thread.
/// False after the one-line error.
bool lendThreads(int64_t threads, std::unique_ptr<kvqbench::ThreadPool> &pool) {
  if (threads <= 1)
    return true;
  pool = std::make_unique<kvqbench::ThreadPool>(static_cast<int>(threads));
  kvq_parallel handle = pool->handle();
  if (kvq_set_default_parallel(&handle) != KVQ_OK) {
    fail(std::string("--threads: ") + kvq_last_error());
    return false;
  }
  return true;
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  keepFreedMemory();
  const Options opt = parseOptions(argc, argv);
  const kvq::cli::Progress progress("kvq-run", opt.quiet);
  std::unique_ptr<kvqbench::ThreadPool> pool;
  if (!lendThreads(opt.threads, pool))
    return kFailed;
  const std::unique_ptr<LoadedModel> model = loadModel(opt);
  if (!model || !checkDumpKv(opt))
    return kFailed;
  if (opt.bench)
    return runBench(opt, *model, progress);
  const std::optional<Inputs> in = loadInputs(opt, *model);
  if (!in)
    return kFailed;
  if (!opt.dumpKv.empty())
    return runDumpKv(opt, *model, *in);
  if (in->evalFile.empty())
    return runGeneration(opt, *model, *in, progress);
  const std::optional<PerplexityRun> run =
      runPerplexity(opt, *model, *in, progress);
  if (!run)
    return kFailed;
  reportPerplexity(opt, *model, *in, *run);
  return 0;
}
