#include "http2/memory.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "core/spares.h"

namespace peregrine::http2 {
namespace {

// Every block starts with a header naming its size class (kLarge: straight from malloc), so
// that free() and realloc(), which get no size, know where it goes back.
constexpr size_t kHeader = 16;    // keeps the payload 16-byte aligned
constexpr uint32_t kClasses = 9;  // 64 B .. 16 KB
constexpr uint32_t kLarge = 0xffffffff;
constexpr uint32_t kKeepPerClass[kClasses] = {4096, 4096, 4096, 2048, 1024, 512, 128, 64, 64};

constexpr size_t class_size(uint32_t c) {
  return size_t{64} << c;
}

uint32_t class_of(size_t size) {
  if (size > class_size(kClasses - 1)) return kLarge;
  uint32_t c = 0;
  while (class_size(c) < size) ++c;
  return c;
}

struct FreeBlock {
  FreeBlock* next;
};

struct Cache {
  FreeBlock* head[kClasses] = {};
  uint32_t count[kClasses] = {};
  ~Cache() {
    for (uint32_t c = 0; c < kClasses; ++c) {
      while (FreeBlock* b = head[c]) {
        head[c] = b->next;
        std::free(reinterpret_cast<char*>(b) - kHeader);
      }
    }
  }
};

thread_local Cache cache;

uint32_t& class_field(void* payload) {
  return *reinterpret_cast<uint32_t*>(static_cast<char*>(payload) - kHeader);
}

void* allocate(size_t size, void*) {
  const uint32_t c = class_of(size);
  if (c != kLarge) {
    if (FreeBlock* b = cache.head[c]) {
      cache.head[c] = b->next;
      --cache.count[c];
      return b;
    }
    size = class_size(c);
  }
  char* raw = static_cast<char*>(std::malloc(size + kHeader));
  if (!raw) return nullptr;
  *reinterpret_cast<uint32_t*>(raw) = c;
  return raw + kHeader;
}

void release(void* payload, void*) {
  if (!payload) return;
  const uint32_t c = class_field(payload);
  if (c != kLarge && cache.count[c] < kKeepPerClass[c]) {
    auto* b = static_cast<FreeBlock*>(payload);
    b->next = cache.head[c];
    cache.head[c] = b;
    ++cache.count[c];
    return;
  }
  std::free(static_cast<char*>(payload) - kHeader);
}

void* allocate_zeroed(size_t count, size_t size, void* user) {
  const size_t total = count * size;
  if (size && total / size != count) return nullptr;
  void* p = allocate(total, user);
  if (p) std::memset(p, 0, total);
  return p;
}

void* reallocate(void* payload, size_t size, void* user) {
  if (!payload) return allocate(size, user);
  if (size == 0) {
    release(payload, user);
    return nullptr;
  }
  const uint32_t c = class_field(payload);
  if (c != kLarge && size <= class_size(c)) return payload;
  // A large block's old size is unknown here (malloc_usable_size would tie us to glibc): realloc
  // itself moves it.
  if (c == kLarge) {
    char* raw =
        static_cast<char*>(std::realloc(static_cast<char*>(payload) - kHeader, size + kHeader));
    return raw ? raw + kHeader : nullptr;
  }
  void* fresh = allocate(size, user);
  if (!fresh) return nullptr;
  std::memcpy(fresh, payload, class_size(c));
  release(payload, user);
  return fresh;
}

void* plain_malloc(size_t size, void*) {
  return std::malloc(size);
}
void plain_free(void* p, void*) {
  std::free(p);
}
void* plain_calloc(size_t n, size_t size, void*) {
  // The same answer to an overflowing request as the cache's (ASan would abort instead).
  if (size && n > SIZE_MAX / size) return nullptr;
  return std::calloc(n, size);
}
void* plain_realloc(void* p, size_t size, void*) {
  return std::realloc(p, size);
}

}  // namespace

nghttp2_mem* thread_memory() {
  static nghttp2_mem cached = {nullptr, allocate, release, allocate_zeroed, reallocate};
  static nghttp2_mem plain = {nullptr, plain_malloc, plain_free, plain_calloc, plain_realloc};
  return kRecycleAllocations ? &cached : &plain;
}

}  // namespace peregrine::http2
