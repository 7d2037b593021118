//===- attention.metal ---===//
#include <metal_stdlib>
#include "kvq_common.h"
