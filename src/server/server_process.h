// The process around the workers: binds (or inherits) the listening sockets, drops privileges,
// starts one worker thread per core, then waits for signals: stop (TERM/INT), graceful stop
// (QUIT), reload (HUP), reopen logs (USR1) and binary upgrade (USR2).
//
// Binary upgrade: on SIGUSR2 the process has a helper forked at start (the spawner) start its
// own executable again (the path it was started from) with the same arguments, handing it every
// listening socket through PEREGRINE_LISTEN_FDS, and a pipe through PEREGRINE_READY_FD on which the
// new process reports that its workers are serving. Only then does the old process drain, more
// gently than on SIGQUIT since its clients are coming back (Worker::handing_over: idle keep-alive
// connections closed only after a grace period, a two-step GOAWAY); if the new one exits or stays
// silent for kUpgradeTimeout, the old one kills it and keeps serving. The sockets themselves are
// handed over, not bound again, so no connection waiting in an accept queue is lost.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "admin/control.h"
#include "config/config.h"
#include "server/route_table.h"

namespace peregrine::server {

class Worker;

// Also the admin API's handle on the configuration (admin/control.h): registered while the
// workers run.
class ServerProcess final : public admin::ConfigControl {
 public:
  // `reload` produces a fresh snapshot on SIGHUP (null: reloading is not possible).
  ServerProcess(std::shared_ptr<const config::Config> config, HandlerRegistry registry,
                std::function<config::LoadResult()> reload, bool handle_signals = true);
  ~ServerProcess();

  // Runs until a stop signal or stop(); returns the process exit status.
  int run();
  // Thread-safe; may be called before run() has started serving.
  void stop(bool graceful);

  static constexpr std::chrono::seconds kUpgradeTimeout{30};

  // admin::ConfigControl; thread-safe (the admin calls them from a worker thread).
  bool reloadable() const override { return file_backed_; }
  std::shared_ptr<const config::Config> running(uint64_t* generation) override;
  // The one reload, for SIGHUP (probe_listeners false: a new address is only reported as
  // needing a restart) and for the admin API.
  admin::ReloadOutcome reload(bool probe_listeners) override;

 private:
  // A listening socket as handed to a worker, with the configured address it serves.
  struct Socket {
    int fd;
    std::string text;
  };
  bool bind_listeners(std::vector<std::vector<int>>& per_worker, std::string* error);
  bool drop_privileges(std::string* error);
  // Whether `address` (not yet ours) could be bound now: a bind that is closed again at once.
  bool probe_listener(const config::ListenAddress& address, std::string* error);
  void write_pid_file();
  void remove_pid_file();
  void start_upgrade();
  void check_upgrade();

  // Guards config_, generation_ and workers_ once the workers run: a reload may come from the
  // process thread (SIGHUP) or from a worker (the admin API).
  std::mutex reload_mutex_;
  std::shared_ptr<const config::Config> config_;
  uint64_t generation_ = 1;
  std::vector<Worker*> workers_;  // posted a new snapshot by reload(); empty unless serving
  HandlerRegistry registry_;
  std::function<config::LoadResult()> reload_;
  // Started from a file (quick mode re-reads its command line on SIGHUP, but has no text to
  // show or replace).
  bool file_backed_ = false;
  bool handle_signals_;
  std::atomic<int> stop_request_{0};  // 1 graceful, 2 now

  // Read at start: after a package upgrade /proc/self/exe names "... (deleted)", while the path
  // it had then names the new binary.
  std::string exe_;
  std::vector<std::string> argv_;
  std::vector<Socket> sockets_;          // every worker's listeners, for a binary upgrade
  std::vector<std::string> unix_paths_;  // socket files to remove at exit
  int ready_fd_ = -1;                    // PEREGRINE_READY_FD when started by an upgrade
  int spawner_ = -1;                     // starts the new binary (see start_spawner)
  pid_t spawner_pid_ = -1;
  pid_t upgrade_pid_ = -1;  // the new binary while it starts
  int upgrade_pipe_ = -1;   // its ready report arrives here
  std::chrono::steady_clock::time_point upgrade_deadline_;
  bool handed_over_ = false;  // a new binary took over: keep the pid and socket files
};

int worker_count(const config::Config& config);

}  // namespace peregrine::server
