//===- metal_device.mm - host/device.h on Metal.framework -----------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The Apple device under the kvq_metal_* entry points: one MTLDevice and
// command queue, the embedded MSL source compiled once with fast math off,
// a pipeline cache keyed by kernel name, shared-storage buffers (the GPU's
// own memory on Apple silicon, so the host reads and writes them in place),
// and synchronous dispatch (commit, wait, check the command buffer status).
//
// Built only on Apple platforms with KVQ_ENABLE_METAL; this project's Linux
// CI never compiles it (docs/METAL.md). The same entry points are exercised
// on Linux through emu/emu_device.cpp.
//
//===----------------------------------------------------------------------===//
#import <Foundation/Foundation.h>
#import <Metal/Metal.h>

#include "../host/device.h"

#include "status.h"

#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>

extern "C" const char kvq_metal_source[];

using namespace kvq;
using namespace kvq::metal;

namespace {

class MetalDevice final : public Device {
public:
  /// The system default GPU with the kernels compiled, or null with the
  /// reason in `why`.
  static MetalDevice *create(std::string &why) {
    @autoreleasepool {
      id<MTLDevice> device = MTLCreateSystemDefaultDevice();
      if (!device) {
        why = "no Metal device on this system";
        return nullptr;
      }
      // dispatchThreads with a partial last threadgroup needs non-uniform
      // threadgroups (every Apple-silicon GPU and Mac2-family GPU).
      if (![device supportsFamily:MTLGPUFamilyApple4] &&
          ![device supportsFamily:MTLGPUFamilyMac2]) {
        why = "the Metal device lacks non-uniform threadgroups";
        return nullptr;
      }
      MTLCompileOptions *options = [[MTLCompileOptions alloc] init];
      // Bit-exact results need IEEE float division and no contraction.
      if (@available(macOS 15.0, iOS 18.0, *)) {
        options.mathMode = MTLMathModeSafe;
        options.mathFloatingPointFunctions =
            MTLMathFloatingPointFunctionsPrecise;
      } else {
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wdeprecated-declarations"
        options.fastMathEnabled = NO;
#pragma clang diagnostic pop
      }
      NSError *error = nil;
      id<MTLLibrary> library = [device
          newLibraryWithSource:[NSString stringWithUTF8String:kvq_metal_source]
                       options:options
                         error:&error];
      if (!library) {
        why = std::string("the kvq MSL kernels failed to compile: ") +
              (error ? error.localizedDescription.UTF8String : "unknown");
        return nullptr;
      }
      id<MTLCommandQueue> queue = [device newCommandQueue];
      if (!queue) {
        why = "cannot create a Metal command queue";
        return nullptr;
      }
      return new MetalDevice(device, library, queue);
    }
  }

  const char *name() const override { return name_.c_str(); }

  bool allocate(size_t size, Buffer &out) override {
    @autoreleasepool {
      id<MTLBuffer> buffer =
          [device_ newBufferWithLength:(size ? size : 16)
                               options:MTLResourceStorageModeShared];
      if (!buffer)
        return false;
      std::memset(buffer.contents, 0, buffer.length);
      out.data = buffer.contents;
      out.size = size;
      out.handle = (__bridge_retained void *)buffer; // released in release()
      return true;
    }
  }

  void release(Buffer &buffer) override {
    if (buffer.handle) {
      id<MTLBuffer> owned = (__bridge_transfer id<MTLBuffer>)buffer.handle;
      owned = nil; // ARC frees it here
    }
    buffer = Buffer();
  }

  kvq_status run(const char *kernel, const Arg *args, size_t nargs,
                 uint32_t threads, uint32_t threadgroup) override {
    if (threads == 0)
      return KVQ_OK;
    id<MTLComputePipelineState> pipeline = nil;
    if (kvq_status s = pipelineFor(kernel, &pipeline))
      return s;
    const NSUInteger maxThreads = pipeline.maxTotalThreadsPerThreadgroup;
    NSUInteger tg = threadgroup;
    if (tg <= 32) {
      // Cooperative kernels are one simdgroup: it must be exactly that.
      if (pipeline.threadExecutionWidth != 32 || maxThreads < tg)
        return fail(KVQ_ERR_INVALID_ARGUMENT,
                    "metal: %s needs 32-wide simdgroups (width %lu, max "
                    "%lu threads)",
                    kernel,
                    static_cast<unsigned long>(pipeline.threadExecutionWidth),
                    static_cast<unsigned long>(maxThreads));
    } else if (tg > maxThreads) {
      tg = maxThreads; // plain kernels work with any threadgroup size
    }
    @autoreleasepool {
      id<MTLCommandBuffer> commands = [queue_ commandBuffer];
      id<MTLComputeCommandEncoder> encoder = [commands computeCommandEncoder];
      [encoder setComputePipelineState:pipeline];
      for (size_t i = 0; i < nargs; ++i) {
        const Arg &a = args[i];
        if (a.buffer)
          [encoder setBuffer:(__bridge id<MTLBuffer>)a.buffer->handle
                      offset:a.offset
                     atIndex:i];
        else
          [encoder setBytes:a.bytes length:a.size atIndex:i];
      }
      [encoder dispatchThreads:MTLSizeMake(threads, 1, 1)
          threadsPerThreadgroup:MTLSizeMake(tg, 1, 1)];
      [encoder endEncoding];
      [commands commit];
      [commands waitUntilCompleted];
      if (commands.status != MTLCommandBufferStatusCompleted)
        return fail(
            KVQ_ERR_INVALID_ARGUMENT, "metal: %s failed on the GPU: %s", kernel,
            commands.error ? commands.error.localizedDescription.UTF8String
                           : "unknown error");
    }
    return KVQ_OK;
  }

private:
  MetalDevice(id<MTLDevice> device, id<MTLLibrary> library,
              id<MTLCommandQueue> queue)
      : device_(device), library_(library), queue_(queue),
        name_(std::string("metal: ") + device.name.UTF8String) {}

  /// The cached pipeline of `kernel`, built on first use.
  kvq_status pipelineFor(const char *kernel, id<MTLComputePipelineState> *out) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = pipelines_.find(kernel);
    if (it != pipelines_.end()) {
      *out = it->second;
      return KVQ_OK;
    }
    @autoreleasepool {
      id<MTLFunction> function =
          [library_ newFunctionWithName:[NSString stringWithUTF8String:kernel]];
      if (!function)
        return fail(KVQ_ERR_INVALID_ARGUMENT, "metal: no kernel named %s",
                    kernel);
      NSError *error = nil;
      id<MTLComputePipelineState> pipeline =
          [device_ newComputePipelineStateWithFunction:function error:&error];
      if (!pipeline)
        return fail(KVQ_ERR_INVALID_ARGUMENT,
                    "metal: cannot build the pipeline of %s: %s", kernel,
                    error ? error.localizedDescription.UTF8String : "unknown");
      pipelines_.emplace(kernel, pipeline);
      *out = pipeline;
    }
    return KVQ_OK;
  }

  id<MTLDevice> device_;
  id<MTLLibrary> library_;
  id<MTLCommandQueue> queue_;
  std::string name_;
  std::mutex mutex_; ///< guards pipelines_ (the queue itself is thread-safe)
  std::unordered_map<std::string, id<MTLComputePipelineState>> pipelines_;
};

} // namespace

Device *kvq::metal::defaultDevice() {
  static std::string why;
  static MetalDevice *device = MetalDevice::create(why); // never freed
  if (!device)
    fail(KVQ_ERR_NULL_POINTER, "kvq metal: %s", why.c_str());
  return device;
}
