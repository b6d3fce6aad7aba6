// The application's view of a worker (peregrine/worker.h): timers on the worker's loop and
// functions posted from other threads through the worker's mailbox. Owned by server::Worker,
// which asks it for its next deadline and runs it once per loop turn.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/clock.h"
#include "peregrine/worker.h"

namespace peregrine::server {

class Worker;

class AppWorker final : public peregrine::Worker {
 public:
  // `owner` receives this worker's posts (null in unit tests: posts are dropped).
  AppWorker(server::Worker* owner, int id, int count, const Clock& clock)
      : owner_(owner), id_(id), count_(count), clock_(clock) {}

  int id() const override { return id_; }
  int count() const override { return count_; }
  TimerId after(std::chrono::milliseconds delay, Function f) override;
  TimerId every(std::chrono::milliseconds period, Function f) override;
  bool cancel(TimerId id) override;
  void post(Function f) override;
  bool post_to(int worker, Function f) override;
  void post_all(const Function& f) override;

  // Every worker of the server, for post_to()/post_all(); set before any thread starts.
  void set_peers(const std::vector<std::unique_ptr<server::Worker>>* peers) { peers_ = peers; }
  // Milliseconds until something is due (0: now), or -1 when nothing is scheduled.
  int64_t next_in(int64_t now_ms) const;
  // Runs the timers due at `now_ms`, then the calls deferred with after(0) before this turn
  // (what those schedule runs on the next turn, so a loop of after(0)s cannot starve the I/O).
  void run(int64_t now_ms);

  // Makes `worker` what this_worker() returns on this thread while the scope lasts.
  class Scope {
   public:
    explicit Scope(AppWorker* worker);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    AppWorker* previous_;
  };

 private:
  static constexpr int64_t kSoon = -1;  // deadlines_ value of an after(0) call
  struct Timer {
    Function f;
    int64_t period_ms;  // 0: once
  };
  TimerId schedule(int64_t delay_ms, int64_t period_ms, Function f);

  server::Worker* owner_;
  int id_;
  int count_;
  const Clock& clock_;
  const std::vector<std::unique_ptr<server::Worker>>* peers_ = nullptr;
  TimerId next_id_ = 1;
  std::map<std::pair<int64_t, TimerId>, Timer> timers_;  // by deadline, then creation
  std::unordered_map<TimerId, int64_t> deadlines_;       // every pending id
  std::vector<std::pair<TimerId, Function>> soon_;       // after(0), in order
  std::vector<std::pair<TimerId, Function>> running_soon_;
  TimerId running_ = 0;  // the repeating timer whose function runs now
  bool running_cancelled_ = false;
};

}  // namespace peregrine::server
