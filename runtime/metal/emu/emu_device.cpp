//===- emu_device.cpp - The Linux device: MSL kernels run on the CPU ------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Implements host/device.h with malloc'd buffers and the shim's grid
// executor, so the portable entry points run the real kernels. Buffers are
// exact-size heap blocks: under AddressSanitizer an out-of-bounds kernel
// access is reported like any host bug.
//
//===----------------------------------------------------------------------===//
#include "../host/device.h"
#include "launch.h"

#include "status.h"

#include <cstdlib>
#include <cstring>
#include <vector>

using namespace kvq;
using namespace kvq::metal;

namespace {

std::vector<emu::KernelEntry> &registry() {
  static std::vector<emu::KernelEntry> entries;
  return entries;
}

void addEntry(const emu::KernelEntry &e) { registry().push_back(e); }

class EmuDevice final : public Device {
public:
  EmuDevice() {
    emu::uniformKernels(addEntry);
    emu::nuqKernels(addEntry);
    emu::outlierKernels(addEntry);
    emu::sinkKernels(addEntry);
    emu::attentionKernels(addEntry);
    emu::kvquantKernels(addEntry);
  }
  const char *name() const override { return "emulated (CPU shim)"; }

  bool allocate(size_t size, Buffer &out) override {
    void *p = std::calloc(size ? size : 1, 1);
    if (!p)
      return false;
    out.data = p;
    out.size = size;
    out.handle = p;
    return true;
  }

  void release(Buffer &b) override {
    std::free(b.handle);
    b = Buffer();
  }

  kvq_status run(const char *kernel, const Arg *args, size_t nargs,
                 uint32_t threads, uint32_t tg) override {
    for (const emu::KernelEntry &e : registry()) {
      if (std::strcmp(e.name, kernel) != 0)
        continue;
      if (threads == 0)
        return KVQ_OK;
      if (!e.run(args, nargs, threads, tg, e.cooperative))
        return fail(KVQ_ERR_INVALID_ARGUMENT,
                    "metal emu: arguments of %s do not match the kernel",
                    kernel);
      return KVQ_OK;
    }
    return fail(KVQ_ERR_INVALID_ARGUMENT, "metal emu: no kernel named %s",
                kernel);
  }
};

} // namespace

Device *kvq::metal::defaultDevice() {
  static EmuDevice device; // registry is filled once, thread-safely
  return &device;
}
