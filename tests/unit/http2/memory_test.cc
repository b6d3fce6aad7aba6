#include "http2/memory.h"

#include <gtest/gtest.h>

#include <cstring>

#include "core/spares.h"

namespace peregrine::http2 {
namespace {

TEST(Http2Memory, AllocateReallocateFree) {
  nghttp2_mem* mem = thread_memory();
  for (size_t size : {1u, 63u, 64u, 65u, 1000u, 16384u, 16385u, 100000u}) {
    auto* p = static_cast<unsigned char*>(mem->malloc(size, mem->mem_user_data));
    ASSERT_NE(p, nullptr);
    std::memset(p, 0xab, size);
    auto* q = static_cast<unsigned char*>(mem->realloc(p, size * 3, mem->mem_user_data));
    ASSERT_NE(q, nullptr);
    for (size_t i = 0; i < size; ++i) ASSERT_EQ(q[i], 0xab) << size;
    std::memset(q, 0xcd, size * 3);
    mem->free(q, mem->mem_user_data);
  }
  auto* z = static_cast<unsigned char*>(mem->calloc(10, 100, mem->mem_user_data));
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(z[i], 0);
  mem->free(z, mem->mem_user_data);
  mem->free(nullptr, mem->mem_user_data);
  EXPECT_EQ(mem->calloc(SIZE_MAX / 2, 4, mem->mem_user_data), nullptr) << "overflow";
}

TEST(Http2Memory, ReusesBlocks) {
  nghttp2_mem* mem = thread_memory();
  void* a = mem->malloc(100, mem->mem_user_data);
  mem->free(a, mem->mem_user_data);
  void* b = mem->malloc(120, mem->mem_user_data);  // the same size class
  if (kRecycleAllocations) {
    EXPECT_EQ(a, b);
  }
  mem->free(b, mem->mem_user_data);
}

}  // namespace
}  // namespace peregrine::http2
