#include "tls/record_buffers.h"

#include <malloc.h>
#include <openssl/crypto.h>

#include <cstdlib>

#include "core/spares.h"

namespace peregrine::tls {

namespace {

// OpenSSL asks for ~16.7 KB (a write buffer: 16 KB of plaintext plus the record's overhead) and
// ~17.7 KB (a read buffer, room for a whole encrypted record): one block size serves both.
constexpr size_t kSmallestKept = 16 * 1024;
constexpr size_t kBlockBytes = 20 * 1024;
// A keep-alive request needs one block at a time; a few more cover connections caught with a
// record half read or half written. 8 x 20 KB per worker.
constexpr size_t kKeptPerThread = 8;

size_t g_block_usable = 0;  // malloc_usable_size() of a kBlockBytes block

struct Kept {
  void* blocks[kKeptPerThread];
  size_t count = 0;
  ~Kept();
};

// True once the thread's Kept is destroyed: OpenSSL frees its per-thread state at thread exit,
// possibly after Kept, and those blocks then go straight to the heap. A bool has no destructor,
// so it stays readable until the thread ends.
thread_local bool t_gone = false;
thread_local Kept t_kept;

Kept::~Kept() {
  while (count > 0) std::free(blocks[--count]);
  t_gone = true;
}

void* allocate(size_t size, const char* /*file*/, int /*line*/) {
  if (size < kSmallestKept || size > kBlockBytes || t_gone) return std::malloc(size);
  Kept& kept = t_kept;
  return kept.count > 0 ? kept.blocks[--kept.count] : std::malloc(kBlockBytes);
}

void* reallocate(void* block, size_t size, const char* /*file*/, int /*line*/) {
  return std::realloc(block, size);
}

// Any block of the kept blocks' usable size can be handed out again for a request up to
// kBlockBytes, whoever asked for it first.
void release(void* block, const char* /*file*/, int /*line*/) {
  if (block != nullptr && !t_gone && malloc_usable_size(block) == g_block_usable) {
    Kept& kept = t_kept;
    if (kept.count < kKeptPerThread) {
      kept.blocks[kept.count++] = block;
      return;
    }
  }
  std::free(block);
}

}  // namespace

bool keep_record_buffers() {
  if (!kRecycleAllocations) return false;
  void* probe = std::malloc(kBlockBytes);
  if (probe == nullptr) return false;
  g_block_usable = malloc_usable_size(probe);
  std::free(probe);
  return CRYPTO_set_mem_functions(allocate, reallocate, release) == 1;
}

size_t record_buffers_kept() {
  return t_gone ? 0 : t_kept.count;
}

}  // namespace peregrine::tls
