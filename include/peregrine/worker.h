// The worker thread an application handler runs on: its timers and its mailbox.
//
// Every request is handled on one worker thread, from start to end, and everything an
// application does with a Worker (timers, deferred calls) happens on that same thread, so
// application state kept per worker needs no lock. The one way across threads is post():
//
//   peregrine::Worker& w = *peregrine::this_worker();
//   auto id = w.every(std::chrono::seconds(1), [] { tick(); });   // on this thread
//   w.post_all([] { refresh_cache(); });     // runs once on every worker, on its own thread
//   w.cancel(id);
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>

namespace peregrine {

class Worker {
 public:
  using Function = std::function<void()>;
  using TimerId = uint64_t;  // never 0

  virtual int id() const = 0;     // 0 .. count()-1
  virtual int count() const = 0;  // workers in this server

  // ---- On this worker's thread only ----
  // Runs `f` once after `delay` (0: after the events being handled now). Returns its id.
  virtual TimerId after(std::chrono::milliseconds delay, Function f) = 0;
  // Runs `f` every `period` (at least 1 ms) until cancel(). The first run is one period away.
  virtual TimerId every(std::chrono::milliseconds period, Function f) = 0;
  // Stops a timer; a repeating one may cancel itself from its own run. False when `id` already
  // ran (once) or was cancelled.
  virtual bool cancel(TimerId id) = 0;

  // ---- From any thread (while Server::run() serves: the workers go when it returns) ----
  // Runs `f` on this worker's thread, between two events. Functions posted by one thread to
  // one worker run in the order posted. A worker that stops drops what it has not run.
  virtual void post(Function f) = 0;
  // Runs `f` on worker `worker` (0 .. count()-1); false when there is no such worker.
  virtual bool post_to(int worker, Function f) = 0;
  // Runs a copy of `f` on every worker, this one included (asynchronously here too).
  virtual void post_all(const Function& f) = 0;

 protected:
  ~Worker() = default;
};

// The worker whose thread calls this (also while a factory builds a worker's handlers, at start
// and on reload); null on any other thread.
Worker* this_worker();

}  // namespace peregrine
