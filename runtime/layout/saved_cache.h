//===- saved_cache.h - Framing of a saved cache, for every backend -*- C++
//-*-===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The parts of the saved cache format (docs/RUNTIME.md, "Saved cache
// format") that do not depend on how a backend holds its layers: magic,
// format version, kvq version, configuration, the layer sections' sizes,
// the checksum, and the buffer conventions of the save and load entry
// points. kvq_cache_save/load (lifecycle.cpp) and kvq_metal_cache_save/load
// (runtime/metal/host/cache.cpp) frame their layers here; each layer
// section is written and read through layer_section.h.
//
//===----------------------------------------------------------------------===//
#ifndef KVQ_RUNTIME_LAYOUT_SAVED_CACHE_H
#define KVQ_RUNTIME_LAYOUT_SAVED_CACHE_H

#include "kvq/runtime.h"

#include <cstdint>
#include <functional>

namespace kvq {

class ByteReader;
class ByteWriter;

/// Re-issue the last error of a failed step as "entry: layer l: message".
kvq_status failInLayer(kvq_status s, const char *entry, int32_t layer);

/// Writes layer l's section; called more than once per layer (to size,
/// then to write), it must write the same bytes each time.
using SaveLayerFn = std::function<void(int32_t layer, ByteWriter &w)>;

/// The saved cache of configuration cfg (cfg.num_layers layers) into out,
/// or only its size when out is null. Returns the size.
int64_t writeSavedCache(const kvq_config &cfg, const SaveLayerFn &saveLayer,
                        uint8_t *out);

/// The body of a save entry point (its cache already checked non-null):
/// size null is KVQ_ERR_NULL_POINTER; buffer null is a size query;
/// capacity too small is KVQ_ERR_BUFFER_TOO_SMALL with *size set.
kvq_status saveSavedCache(const char *entry, const kvq_config &cfg,
                          const SaveLayerFn &saveLayer, void *buffer,
                          int64_t capacity, int64_t *size);

/// Called with the file's configuration once the framing checks pass
/// (validated by validateConfig, backend set to KVQ_BACKEND_CPU, no
/// allocator): creates the empty cache the layers load into.
using CreateFn = std::function<kvq_status(const kvq_config &cfg)>;
/// Loads layer l from its section (which it must consume exactly); its
/// failure status is returned with the entry point and layer prefixed.
using LoadLayerFn = std::function<kvq_status(int32_t layer, ByteReader &r)>;

/// The argument checks of a load entry point: data null with size > 0 or
/// out null is KVQ_ERR_NULL_POINTER, size < 0 KVQ_ERR_INVALID_ARGUMENT.
kvq_status checkLoadArguments(const char *entry, const void *data, int64_t size,
                              const void *out);

/// Checks the framing of [data, data + size) (size, magic, version,
/// reserved field, body size, checksum, configuration), then create(cfg),
/// then loadLayer for every layer section. Every framing failure is
/// KVQ_ERR_CORRUPT_DATA with a one-line message; nothing outside the data
/// is read.
kvq_status readSavedCache(const char *entry, const uint8_t *data, int64_t size,
                          const CreateFn &create, const LoadLayerFn &loadLayer);

} // namespace kvq

#endif // KVQ_RUNTIME_LAYOUT_SAVED_CACHE_H
