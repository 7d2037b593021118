//===- version.cpp - the kvq version the tools print ----------------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//===----------------------------------------------------------------------===//
#include "version.h"

const char *kvq::cli::versionString() { return KVQ_VERSION_STRING; }
