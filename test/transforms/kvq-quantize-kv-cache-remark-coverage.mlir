// RUN: %python %S/Inputs/remark_coverage.py %S/../../passes/transforms %S | FileCheck %s

// Every "not adopted" remark kvq-quantize-kv-cache can emit has a lit test
// (an expected-remark in this directory) on a graph where it is true.
// CHECK: remarks have a lit test
