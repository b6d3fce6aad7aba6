// Active health checks for a proxy upstream group (config::HealthCheck): every `interval`, each
// server gets "GET path HTTP/1.1" on a new connection; an answer with a status in the expected
// range within `timeout` is a success, anything else (refused, reset, timeout, garbage, another
// status) a failure. `fall` consecutive failures take an up server out of the balancing, `rise`
// consecutive successes bring it back (GroupRuntime::set_probe_up, which logs the change). In an
// https group (tls = true) the probe speaks TLS through the group's client context, as requests
// do: a server whose certificate no longer verifies fails its check.
//
// One checker per group and worker, created with the worker's route table: each worker keeps its
// own view of health, as it does for passive health. Worker-thread only.
#pragma once

#include <cstddef>
#include <vector>

#include "core/clock.h"
#include "event/poller.h"
#include "event/timer_set.h"
#include "upstream/group_runtime.h"

namespace peregrine::upstream {

class HealthChecker {
 public:
  HealthChecker(GroupRuntime& group, event::Poller& poller, event::TimerSet& timers,
                const Clock& clock);
  ~HealthChecker();
  HealthChecker(const HealthChecker&) = delete;
  HealthChecker& operator=(const HealthChecker&) = delete;

  // Probes finished so far for `server` (tests and the admin page).
  size_t probes_done(size_t server) const;

 private:
  class Probe;
  std::vector<Probe*> probes_;  // one per server; handed to event::dispose_later at the end
};

}  // namespace peregrine::upstream
