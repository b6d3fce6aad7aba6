// The process around the workers: binds the listening sockets, drops privileges, starts one
// worker thread per core, then waits for signals (stop, graceful stop, reload, reopen logs).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "config/config.h"
#include "server/route_table.h"

namespace peregrine::server {

class ServerProcess {
 public:
  // `reload` produces a fresh snapshot on SIGHUP (null: reloading is not possible).
  ServerProcess(std::shared_ptr<const config::Config> config, HandlerRegistry registry,
                std::function<config::LoadResult()> reload, bool handle_signals = true);
  ~ServerProcess();

  // Runs until a stop signal or stop(); returns the process exit status.
  int run();
  // Thread-safe; may be called before run() has started serving.
  void stop(bool graceful);

 private:
  bool bind_listeners(std::vector<std::vector<int>>& per_worker, std::string* error);
  bool drop_privileges(std::string* error);
  void reload();

  std::shared_ptr<const config::Config> config_;
  HandlerRegistry registry_;
  std::function<config::LoadResult()> reload_;
  bool handle_signals_;
  std::atomic<int> stop_request_{0};  // 1 graceful, 2 now
  bool to_workers_ = false;           // a reloaded snapshot waits to be posted
};

int worker_count(const config::Config& config);

}  // namespace peregrine::server
