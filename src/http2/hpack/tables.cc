#include "http2/hpack/tables.h"

#include <algorithm>
#include <array>
#include <cstring>

namespace peregrine::http2::hpack {

// RFC 7541 Appendix A, transcribed.
extern constexpr TableEntry kStaticTable[kStaticTableSize + 1] = {
    {"", ""},
    {":authority", ""},
    {":method", "GET"},
    {":method", "POST"},
    {":path", "/"},
    {":path", "/index.html"},
    {":scheme", "http"},
    {":scheme", "https"},
    {":status", "200"},
    {":status", "204"},
    {":status", "206"},
    {":status", "304"},
    {":status", "400"},
    {":status", "404"},
    {":status", "500"},
    {"accept-charset", ""},
    {"accept-encoding", "gzip, deflate"},
    {"accept-language", ""},
    {"accept-ranges", ""},
    {"accept", ""},
    {"access-control-allow-origin", ""},
    {"age", ""},
    {"allow", ""},
    {"authorization", ""},
    {"cache-control", ""},
    {"content-disposition", ""},
    {"content-encoding", ""},
    {"content-language", ""},
    {"content-length", ""},
    {"content-location", ""},
    {"content-range", ""},
    {"content-type", ""},
    {"cookie", ""},
    {"date", ""},
    {"etag", ""},
    {"expect", ""},
    {"expires", ""},
    {"from", ""},
    {"host", ""},
    {"if-match", ""},
    {"if-modified-since", ""},
    {"if-none-match", ""},
    {"if-range", ""},
    {"if-unmodified-since", ""},
    {"last-modified", ""},
    {"link", ""},
    {"location", ""},
    {"max-forwards", ""},
    {"proxy-authenticate", ""},
    {"proxy-authorization", ""},
    {"range", ""},
    {"referer", ""},
    {"refresh", ""},
    {"retry-after", ""},
    {"server", ""},
    {"set-cookie", ""},
    {"strict-transport-security", ""},
    {"transfer-encoding", ""},
    {"user-agent", ""},
    {"vary", ""},
    {"via", ""},
    {"www-authenticate", ""},
};

namespace {

// An open-addressing table of the static table's 52 distinct names, built at compile time;
// each slot holds the first index with that name.
constexpr uint32_t kNameSlots = 128;

constexpr uint32_t name_hash(std::string_view name) {
  if (name.empty()) return 0;
  const uint32_t h = static_cast<uint32_t>(name.size()) * 31 +
                     static_cast<unsigned char>(name[0]) * 7 +
                     static_cast<unsigned char>(name[name.size() / 2]) * 3 +
                     static_cast<unsigned char>(name.back());
  return h & (kNameSlots - 1);
}

constexpr std::array<uint8_t, kNameSlots> build_name_slots() {
  std::array<uint8_t, kNameSlots> slots{};
  for (uint32_t i = 1; i <= kStaticTableSize; ++i) {
    if (kStaticTable[i].name == kStaticTable[i - 1].name) continue;
    uint32_t h = name_hash(kStaticTable[i].name);
    while (slots[h] != 0) h = (h + 1) & (kNameSlots - 1);
    slots[h] = static_cast<uint8_t>(i);
  }
  return slots;
}

constexpr std::array<uint8_t, kNameSlots> kNameSlotTable = build_name_slots();

}  // namespace

StaticMatch find_static(std::string_view name, std::string_view value) {
  StaticMatch match;
  for (uint32_t h = name_hash(name);; h = (h + 1) & (kNameSlots - 1)) {
    const uint32_t index = kNameSlotTable[h];
    if (index == 0) return match;
    if (kStaticTable[index].name == name) {
      match.name_index = index;
      break;
    }
  }
  // Entries with one name are consecutive; only :method, :path, :scheme, :status and
  // accept-encoding come with values.
  const std::string_view found = kStaticTable[match.name_index].name;
  if (kStaticTable[match.name_index].value.empty()) return match;
  for (uint32_t i = match.name_index; i <= kStaticTableSize && kStaticTable[i].name == found; ++i) {
    if (kStaticTable[i].value == value) {
      match.field_index = i;
      break;
    }
  }
  return match;
}

DynamicTable::DynamicTable(uint32_t max_size) : max_size_(0) {
  set_max_size(max_size);
}

void DynamicTable::set_max_size(uint32_t max_size) {
  max_size_ = max_size;
  while (size_ > max_size_) evict_oldest();
  // The ring holds as many entries as fit (each takes at least 32 bytes).
  uint32_t capacity = 1;
  while (capacity < max_size_ / kEntryOverhead) capacity <<= 1;
  if (capacity > ring_.size()) {
    std::vector<Slot> ring(capacity);
    for (uint32_t k = 0; k < count_; ++k) ring[k] = ring_[(head_ + k) & ring_mask_];
    ring_.swap(ring);
    ring_mask_ = capacity - 1;
    head_ = 0;
  }
}

void DynamicTable::evict_oldest() {
  const Slot& s = ring_[head_];
  size_ -= s.name_size + s.value_size + kEntryOverhead;
  head_ = (head_ + 1) & ring_mask_;
  --count_;
}

bool DynamicTable::insert(std::string_view name, std::string_view value, bool valid) {
  const uint64_t entry_size = uint64_t{name.size()} + value.size() + kEntryOverhead;
  if (entry_size > max_size_) {
    while (count_ > 0) evict_oldest();
    end_ = 0;
    return false;
  }
  while (size_ + entry_size > max_size_) evict_oldest();
  const uint32_t need = static_cast<uint32_t>(name.size() + value.size());
  if (count_ == 0) end_ = 0;
  if (end_ + need > bytes_.size()) {
    // Move the live bytes to the front; they are contiguous, in insertion order.
    const uint32_t start = count_ > 0 ? ring_[head_].offset : end_;
    if (start > 0) {
      std::memmove(bytes_.data(), bytes_.data() + start, end_ - start);
      for (uint32_t k = 0; k < count_; ++k) ring_[(head_ + k) & ring_mask_].offset -= start;
      end_ -= start;
    }
    if (end_ + need > bytes_.size()) {
      const size_t grown = std::max<size_t>(2 * (size_t{end_} + need), 256);
      bytes_.resize(std::max<size_t>(end_ + need, std::min<size_t>(grown, 2 * size_t{max_size_})));
    }
  }
  if (!name.empty()) std::memcpy(bytes_.data() + end_, name.data(), name.size());
  if (!value.empty()) std::memcpy(bytes_.data() + end_ + name.size(), value.data(), value.size());
  ring_[(head_ + count_) & ring_mask_] = {end_, static_cast<uint32_t>(name.size()),
                                          static_cast<uint32_t>(value.size()), valid};
  ++count_;
  size_ += static_cast<uint32_t>(entry_size);
  end_ += need;
  ++next_id_;
  return true;
}

}  // namespace peregrine::http2::hpack
