#include "server/app_worker.h"

#include <algorithm>

#include "server/worker.h"

namespace peregrine::server {
namespace {
thread_local AppWorker* current = nullptr;
}

AppWorker::Scope::Scope(AppWorker* worker) : previous_(current) {
  current = worker;
}
AppWorker::Scope::~Scope() {
  current = previous_;
}

AppWorker::TimerId AppWorker::schedule(int64_t delay_ms, int64_t period_ms, Function f) {
  TimerId id = next_id_++;
  if (delay_ms <= 0 && period_ms == 0) {
    soon_.emplace_back(id, std::move(f));
    deadlines_[id] = kSoon;
    return id;
  }
  int64_t deadline = clock_.monotonic_ms + delay_ms;
  timers_.emplace(std::make_pair(deadline, id), Timer{std::move(f), period_ms});
  deadlines_[id] = deadline;
  return id;
}

AppWorker::TimerId AppWorker::after(std::chrono::milliseconds delay, Function f) {
  return schedule(delay.count(), 0, std::move(f));
}

AppWorker::TimerId AppWorker::every(std::chrono::milliseconds period, Function f) {
  int64_t ms = std::max<int64_t>(period.count(), 1);
  return schedule(ms, ms, std::move(f));
}

bool AppWorker::cancel(TimerId id) {
  auto it = deadlines_.find(id);
  if (it == deadlines_.end()) {
    if (id == running_ && !running_cancelled_) {  // a repeating timer cancels itself
      running_cancelled_ = true;
      return true;
    }
    return false;
  }
  if (it->second == kSoon) {
    for (auto* list : {&soon_, &running_soon_})
      for (auto& [soon_id, f] : *list)
        if (soon_id == id) f = nullptr;
  } else {
    timers_.erase(std::make_pair(it->second, id));
  }
  deadlines_.erase(it);
  return true;
}

void AppWorker::post(Function f) {
  if (owner_) owner_->post_function(std::move(f));
}

bool AppWorker::post_to(int worker, Function f) {
  if (worker < 0 || worker >= count_) return false;
  if (!peers_) {
    if (worker != id_) return false;
    post(std::move(f));
    return true;
  }
  (*peers_)[static_cast<size_t>(worker)]->post_function(std::move(f));
  return true;
}

void AppWorker::post_all(const Function& f) {
  if (!peers_) {
    post(f);
    return;
  }
  for (const auto& peer : *peers_) peer->post_function(f);
}

int64_t AppWorker::next_in(int64_t now_ms) const {
  if (!soon_.empty()) return 0;
  if (timers_.empty()) return -1;
  int64_t deadline = timers_.begin()->first.first;
  return deadline > now_ms ? deadline - now_ms : 0;
}

void AppWorker::run(int64_t now_ms) {
  // A repeating timer comes back at least 1 ms later, and new timers are at least 1 ms away:
  // this loop ends.
  while (!timers_.empty() && timers_.begin()->first.first <= now_ms) {
    auto node = timers_.extract(timers_.begin());
    TimerId id = node.key().second;
    Timer& timer = node.mapped();
    deadlines_.erase(id);
    running_ = timer.period_ms ? id : 0;
    running_cancelled_ = false;
    timer.f();
    if (timer.period_ms && !running_cancelled_) {
      int64_t deadline = now_ms + timer.period_ms;
      node.key() = {deadline, id};
      timers_.insert(std::move(node));
      deadlines_[id] = deadline;
    }
    running_ = 0;
  }
  if (soon_.empty()) return;
  running_soon_.swap(soon_);
  for (size_t i = 0; i < running_soon_.size(); ++i) {
    Function f = std::move(running_soon_[i].second);
    if (!f) continue;  // cancelled
    deadlines_.erase(running_soon_[i].first);
    f();
  }
  running_soon_.clear();
}

}  // namespace peregrine::server

namespace peregrine {

Worker* this_worker() {
  return server::current;
}

}  // namespace peregrine
