//===- blocks_test.cpp - Byte layouts of the payload blocks ---------------===//
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The layouts of blocks.h against sizes computed by hand from
// docs/RUNTIME.md (the saved caches of test/data/lifecycle pin the same
// bytes end to end), and the views' field order.
//
//===----------------------------------------------------------------------===//
#include "blocks.h"

#include <gtest/gtest.h>

#include <vector>

using namespace kvq;

namespace {
kvq_config config(kvq_method m, int heads, int dim, int kb, int vb, int G) {
  kvq_config c;
  kvq_config_init(&c, m);
  c.num_kv_heads = heads;
  c.head_dim = dim;
  c.key_bits = kb;
  c.value_bits = vb;
  c.group_size = G;
  return c;
}
} // namespace

TEST(Blocks, KiviLayoutsAreScalesZerosThenCodes) {
  // C = 2 * 64 = 128 channels, G = 32, 2-bit keys, 4-bit values.
  kvq_config c = config(KVQ_METHOD_KIVI, 2, 64, 2, 4, 32);
  UniformLayout key = kiviKeyGroupLayout(c, 30); // two sink rows of 32
  EXPECT_EQ(key.pairs, 128);
  EXPECT_EQ(key.codesOffset(), 512);              // 128 scales + 128 zeros
  EXPECT_EQ(key.bytes(), 512 + 30 * 128 * 2 / 8); // 960 codes bytes
  UniformLayout value = kiviValueRowLayout(c);
  EXPECT_EQ(value.pairs, 4);
  EXPECT_EQ(value.bytes(), 16 + 128 * 4 / 8);
}

TEST(Blocks, KvquantLayouts) {
  kvq_config c = config(KVQ_METHOD_KVQUANT, 2, 64, 3, 4, 32);
  c.refit_interval = 0;
  KvquantKeyRowLayout key = kvquantKeyRowLayout(c);
  EXPECT_EQ(key.codeBytes, 48); // 128 x 3 bits
  EXPECT_EQ(key.bytes(5), 48 + 20);
  KvquantValueRowLayout value = kvquantValueRowLayout(c);
  EXPECT_EQ(value.levels(), 32); // 2 heads x 16 levels
  EXPECT_EQ(value.codesOffset(), 64);
  EXPECT_EQ(value.outliersOffset(), 64 + 64);
  EXPECT_EQ(value.bytes(2), 128 + 8);
  KvquantTableLayout frozen = kvquantTableLayout(c);
  EXPECT_EQ(frozen.levelAt(1, 3), 8 + 3);
  EXPECT_EQ(frozen.thresholdAt(2), 128 * 8 + 2);
  EXPECT_EQ(frozen.bytes(), 2 * 128 * 8 + 2 * 128);
  c.refit_interval = 64; // refitted segments screen no decode keys
  EXPECT_EQ(kvquantTableLayout(c).bytes(), 2 * 128 * 8);
}

TEST(Blocks, ViewsNameTheFieldsInOrder) {
  std::vector<uint8_t> bytes(4 * 3 + 2);
  const UniformBlock<uint8_t> blk{bytes.data(), 3};
  blk.setScale(2, 0x1234);
  blk.setZero(0, 0xabcd);
  EXPECT_EQ(blk.scale(2), 0x1234);
  EXPECT_EQ(blk.zero(0), 0xabcd);
  EXPECT_EQ(blk.codes(), bytes.data() + 12);
  uint16_t raw;
  std::memcpy(&raw, bytes.data() + 6, 2); // zeros start after 3 scales
  EXPECT_EQ(raw, 0xabcd);

  std::vector<uint8_t> list(8);
  OutlierList<uint8_t>{list.data()}.set(1, {0x3c00, 77});
  const OutlierEntry e = OutlierList<const uint8_t>{list.data()}.at(1);
  EXPECT_EQ(e.value, 0x3c00);
  EXPECT_EQ(e.channel, 77);
  std::memcpy(&raw, list.data() + 6, 2); // value, then channel
  EXPECT_EQ(raw, 77);
}
