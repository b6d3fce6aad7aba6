// Recycling for what is allocated and freed at request rate on one thread (the FastCGI and proxy
// exchanges and their buffers): at tens of thousands of requests per second, malloc and free of
// the same few blocks were a tenth of a request's instructions. Everything here is per thread, so
// an object must be freed on the thread that allocated it (exchanges live and die on their
// worker's thread).
#pragma once

#include <cstddef>
#include <new>
#include <string>
#include <utility>
#include <vector>

namespace peregrine {

// Under AddressSanitizer every object gets fresh memory, so that a use after free is still caught.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kRecycleAllocations = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kRecycleAllocations = false;
#else
inline constexpr bool kRecycleAllocations = true;
#endif
#else
inline constexpr bool kRecycleAllocations = true;
#endif

// Derive from RecycledAllocation<T> to take T's memory from a per-thread free list.
template <class T>
class RecycledAllocation {
 public:
  static void* operator new(size_t size) {
    if (!kRecycleAllocations || list_gone()) return ::operator new(size);
    std::vector<void*>& blocks = free_list().blocks;
    if (size != sizeof(T) || blocks.empty()) return ::operator new(size);
    void* p = blocks.back();
    blocks.pop_back();
    return p;
  }
  static void operator delete(void* p, size_t size) {
    if (!kRecycleAllocations || list_gone()) {
      ::operator delete(p);
      return;
    }
    std::vector<void*>& blocks = free_list().blocks;
    if (size != sizeof(T) || blocks.size() >= kKeep) {
      ::operator delete(p);
      return;
    }
    blocks.push_back(p);
  }

 private:
  static constexpr size_t kKeep = 256;
  struct FreeList {
    std::vector<void*> blocks;
    ~FreeList() {
      for (void* p : blocks) ::operator delete(p);
      list_gone() = true;
    }
  };
  // True once the thread's list is destroyed: another thread_local destroyed later (a spare
  // HTTP/2 stream holding a compressing decorator) may still delete a T, which then goes
  // straight to the heap. A bool has no destructor, so it stays readable until the thread ends.
  static bool& list_gone() {
    thread_local bool gone = false;
    return gone;
  }
  static FreeList& free_list() {
    thread_local FreeList list;
    return list;
  }
};

// Spares<T>: objects with a clear() and a capacity() (std::string, Response), handed with their
// capacity from a finished request to the next one. take() swaps a spare into an empty object;
// give() keeps the object's buffers (cleared) unless they are very large or the thread's budget
// is spent. Buffers of different roles and sizes (a 4 KB request, a 64 KB body) keep apart with
// a Tag, so that each comes back with the capacity its role needs.
template <class T, class Tag = void>
class Spares {
 public:
  static void take(T& object) {
    Kept& kept = spares();
    if (kept.list.empty()) return;
    std::swap(object, kept.list.back());
    kept.list.pop_back();
    kept.bytes -= object.capacity();
  }
  static void give(T& object) {
    Kept& kept = spares();
    const size_t capacity = object.capacity();
    // Nothing worth keeping (an empty string), too large, or over the budget.
    if (capacity < kMinCapacity || capacity > kMaxCapacity || kept.bytes + capacity > kBudget)
      return;
    object.clear();
    kept.list.push_back(std::move(object));
    kept.bytes += capacity;
  }

 private:
  // A response body that outgrew the FastCGI buffer is worth keeping (it would grow again,
  // copying itself, on the next large response); a budget bounds what a thread holds.
  static constexpr size_t kMinCapacity = 64;
  static constexpr size_t kMaxCapacity = 256 * 1024;
  static constexpr size_t kBudget = 4 * 1024 * 1024;  // per type and thread
  struct Kept {
    std::vector<T> list;
    size_t bytes = 0;
  };
  static Kept& spares() {
    thread_local Kept kept;
    return kept;
  }
};

}  // namespace peregrine
