#include "access/limit_table.h"

#include <sys/mman.h>

#include <algorithm>
#include <limits>
#include <new>
#include <random>

#include "core/hash.h"

namespace peregrine::access {

namespace {

uint32_t round_down_pow2(uint32_t n) {
  n = std::max(n, kProbe);
  uint32_t p = 1;
  while (p <= n / 2) p <<= 1;
  return p;
}

}  // namespace

LimitTable::LimitTable(uint32_t slots) {
  const uint32_t count = round_down_pow2(slots);
  mask_ = count - 1;
  bytes_ = static_cast<size_t>(count) * sizeof(Slot);
  // Zeroed pages on demand: all-zero slots are empty ones.
  void* memory = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) throw std::bad_alloc();
  slots_ = static_cast<Slot*>(memory);
  std::random_device random;
  seed_ = (static_cast<uint64_t>(random()) << 32) ^ random();
}

LimitTable::~LimitTable() {
  munmap(slots_, bytes_);
}

uint64_t LimitTable::hash(std::string_view key) const {
  uint64_t h = 0xcbf29ce484222325ULL ^ seed_;
  for (unsigned char c : key) h = (h ^ c) * 0x100000001b3ULL;
  h = mix64(h ^ seed_);
  return h == 0 ? 1 : h;
}

LimitTable::Slot& LimitTable::find(uint64_t key, int64_t now_us, bool connections) {
  const uint32_t base = static_cast<uint32_t>(key) & mask_;
  for (int attempt = 0; attempt < 4; ++attempt) {
    Slot* victim = nullptr;
    int64_t best = std::numeric_limits<int64_t>::max();
    uint64_t victim_key = 0;
    for (uint32_t i = 0; i < kProbe; ++i) {
      Slot& slot = slots_[(base + i) & mask_];
      const uint64_t k = slot.key.load(std::memory_order_relaxed);
      if (k == key) return slot;
      if (victim && victim_key == 0) continue;  // an empty slot is the best victim
      int64_t score;
      if (k == 0) {
        score = std::numeric_limits<int64_t>::min();
      } else if (connections) {
        // Keys with no connection open first, then the least recently used.
        const bool idle = slot.value.load(std::memory_order_relaxed) <= 0;
        score = slot.touched.load(std::memory_order_relaxed) -
                (idle ? std::numeric_limits<int64_t>::max() / 2 : 0);
      } else {
        score = slot.value.load(std::memory_order_relaxed);  // the earliest TAT refilled most
      }
      if (score < best) {
        best = score;
        victim = &slot;
        victim_key = k;
      }
    }
    // Another thread may claim the same slot at once: whoever loses looks again.
    if (victim->key.compare_exchange_strong(victim_key, key, std::memory_order_relaxed)) {
      victim->value.store(0, std::memory_order_relaxed);
      victim->touched.store(now_us, std::memory_order_relaxed);
      victim->logged.store(0, std::memory_order_relaxed);
      return *victim;
    }
  }
  // Four lost races in a row: share the first slot of the bucket rather than spin.
  return slots_[base];
}

bool LimitTable::should_log(Slot& slot, int64_t now_us, int64_t interval_us) {
  int64_t last = slot.logged.load(std::memory_order_relaxed);
  if (last != 0 && now_us - last < interval_us) return false;
  return slot.logged.compare_exchange_strong(last, now_us, std::memory_order_relaxed);
}

LimitTable::Take LimitTable::take(uint64_t key, int64_t now_us, int64_t interval_us, uint32_t burst,
                                  int64_t log_interval_us) {
  Slot& slot = find(key, now_us, false);
  const int64_t tolerance = interval_us * static_cast<int64_t>(burst);
  Take take;
  int64_t tat = slot.value.load(std::memory_order_relaxed);
  for (;;) {
    const int64_t start = std::max(tat, now_us);
    const int64_t wait = start - now_us;
    if (wait > tolerance) {
      take.retry_us = wait - tolerance;
      take.log = should_log(slot, now_us, log_interval_us);
      return take;
    }
    if (slot.value.compare_exchange_weak(tat, start + interval_us, std::memory_order_relaxed)) {
      take.allowed = true;
      take.wait_us = wait;
      return take;
    }
  }
}

LimitTable::Acquire LimitTable::acquire(uint64_t key, uint32_t max, int64_t now_us,
                                        int64_t log_interval_us) {
  Slot& slot = find(key, now_us, true);
  Acquire result;
  result.slot = static_cast<uint32_t>(&slot - slots_);
  slot.touched.store(now_us, std::memory_order_relaxed);
  int64_t open = slot.value.load(std::memory_order_relaxed);
  for (;;) {
    if (open >= static_cast<int64_t>(max)) {
      result.log = should_log(slot, now_us, log_interval_us);
      return result;
    }
    if (slot.value.compare_exchange_weak(open, std::max<int64_t>(open, 0) + 1,
                                         std::memory_order_relaxed)) {
      result.allowed = true;
      return result;
    }
  }
}

void LimitTable::release(uint32_t index, uint64_t key) {
  Slot& slot = slots_[index & mask_];
  // The key may have been evicted meanwhile (its count restarted): then nothing is ours to undo.
  if (slot.key.load(std::memory_order_relaxed) != key) return;
  int64_t open = slot.value.load(std::memory_order_relaxed);
  while (open > 0 && !slot.value.compare_exchange_weak(open, open - 1, std::memory_order_relaxed)) {
  }
}

int64_t LimitTable::value_of(uint64_t key) const {
  const uint32_t base = static_cast<uint32_t>(key) & mask_;
  for (uint32_t i = 0; i < kProbe; ++i) {
    const Slot& slot = slots_[(base + i) & mask_];
    if (slot.key.load(std::memory_order_relaxed) == key)
      return slot.value.load(std::memory_order_relaxed);
  }
  return -1;
}

}  // namespace peregrine::access
