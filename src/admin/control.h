// The admin API's handle on the running process: what configuration serves, and a reload
// that applies the file the way SIGHUP does. server::ServerProcess implements it and
// registers itself while its workers run (admin sits below server in the layers, so it only
// knows this interface).
//
// Threads: the admin endpoints call it from a worker thread while the process thread may be
// reloading on SIGHUP; the implementation serializes both under one lock (see
// ServerProcess::reload_now).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "config/config.h"

namespace peregrine::admin {

struct ReloadOutcome {
  bool ok = false;
  uint64_t generation = 0;                    // after the attempt
  std::vector<config::ConfigError> errors;    // the file's, when it did not load
  std::string failure;                        // why it was refused, in one line
  std::vector<std::string> restart_required;  // what the running process cannot take over
};

class ConfigControl {
 public:
  virtual ~ConfigControl() = default;
  // False in quick mode: there is no file to read, write or reload.
  virtual bool reloadable() const = 0;
  virtual std::shared_ptr<const config::Config> running(uint64_t* generation) = 0;
  // Reads the configuration file again and applies it. With `probe_listeners`, a listen
  // address the running process does not have must be free to bind, or nothing changes.
  virtual ReloadOutcome reload(bool probe_listeners) = 0;
};

// Registered by the process while it serves (null: none, e.g. after it stopped).
void set_control(ConfigControl* control);

}  // namespace peregrine::admin
