#include "core/log_tap.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace peregrine::log_tap {

std::atomic<int> g_subscribers{0};

namespace {

std::mutex g_mutex;
std::vector<Subscriber*> g_list;  // guarded by g_mutex

}  // namespace

uint8_t streams_from(std::string_view name) {
  if (name == "access") return kAccess;
  if (name == "error") return kError;
  if (name == "both") return kAccess | kError;
  return 0;
}

void Subscriber::offer(Stream stream, std::string_view line) {
  if (!wants(stream)) return;
  if (!filter_.empty() && line.find(filter_) == std::string_view::npos) return;
  std::lock_guard lock(mutex_);
  if (queued_bytes_ + line.size() > kMaxQueuedBytes) {
    ++dropped_;
    return;
  }
  queued_bytes_ += line.size();
  queue_.push_back({stream, std::string(line)});
}

uint64_t Subscriber::take(std::deque<Line>& out) {
  std::lock_guard lock(mutex_);
  for (Line& line : queue_) out.push_back(std::move(line));
  queue_.clear();
  queued_bytes_ = 0;
  return std::exchange(dropped_, 0);
}

void offer(Stream stream, std::string_view bytes) {
  std::lock_guard lock(g_mutex);
  while (!bytes.empty()) {
    size_t end = bytes.find('\n');
    std::string_view line = bytes.substr(0, end);
    bytes.remove_prefix(end == std::string_view::npos ? bytes.size() : end + 1);
    if (line.empty()) continue;
    for (Subscriber* s : g_list) s->offer(stream, line);
  }
}

void subscribe(Subscriber* subscriber) {
  std::lock_guard lock(g_mutex);
  g_list.push_back(subscriber);
  g_subscribers.store(static_cast<int>(g_list.size()), std::memory_order_relaxed);
}

void unsubscribe(Subscriber* subscriber) {
  std::lock_guard lock(g_mutex);
  g_list.erase(std::remove(g_list.begin(), g_list.end(), subscriber), g_list.end());
  g_subscribers.store(static_cast<int>(g_list.size()), std::memory_order_relaxed);
}

}  // namespace peregrine::log_tap
