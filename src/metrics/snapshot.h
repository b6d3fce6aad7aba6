// The figures of all workers summed at one moment, as plain numbers: what the renderers
// (prometheus.h, json.h) turn into text. Gathering only loads the workers' counters; it never
// waits for a worker or stops one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "metrics/metrics.h"

namespace peregrine::metrics {

struct RouteFigures {
  std::string site;
  std::string route;
  uint64_t requests[kProtocols][2][kStatusClasses] = {};
  uint64_t response_body_bytes = 0;
  uint64_t total() const;
};

struct UpstreamServerFigures {
  std::string group;
  std::string server;
  bool backup = false;
  // "up", "down", "backup" (an up backup server), or what the admin set: "drained", "disabled"
  const char* state = "up";
  uint64_t requests = 0;
  uint64_t failures[kFailureKinds] = {};
  int64_t in_flight = 0;
  int64_t idle = 0;
  uint64_t connections_opened = 0;
  uint64_t connections_reused = 0;
  int64_t last_check_seconds = 0;  // 0: no health-check result yet
  bool last_check_ok = false;
  int64_t operator_state = 0;  // upstream::OperatorState (the admin's drain/disable)
  struct Check {
    int64_t seconds;
    bool ok;
  };
  // Health-check results, newest first (at most kCheckHistory): each worker probes on its own,
  // so every worker's results are here, merged by time.
  std::vector<Check> history;
};

struct UpstreamGroupFigures {
  std::string group;
  int64_t queue_length = 0;
  uint64_t queue_waits = 0;
  uint64_t queue_timeouts = 0;
};

struct Snapshot {
  std::string version;
  int64_t start_seconds = 0;
  double uptime_seconds = 0;
  int64_t workers = 0;
  int64_t generation = 0;
  uint64_t reloads_succeeded = 0;
  uint64_t reloads_failed = 0;
  uint64_t access_log_dropped = 0;
  int64_t resident_bytes = -1;  // -1: unknown (no /proc)
  int64_t open_fds = -1;

  std::vector<uint64_t> duration_buckets;  // per DurationHistogram bucket, not cumulative
  uint64_t duration_count = 0;
  uint64_t duration_sum_micros = 0;
  uint64_t bytes_received[2] = {};
  uint64_t bytes_sent[2] = {};
  uint64_t connections_accepted = 0;
  int64_t connections_open[2] = {};
  int64_t connections_reading = 0;
  int64_t connections_writing = 0;
  int64_t connections_idle = 0;
  int64_t read_buffers_in_use = 0;
  int64_t read_buffers_spare = 0;
  uint64_t tls_full = 0;
  uint64_t tls_resumed = 0;
  uint64_t tls_failed = 0;
  uint64_t http2_streams = 0;
  std::vector<RouteFigures> routes;  // in order of first appearance
  std::vector<UpstreamServerFigures> upstream_servers;
  std::vector<UpstreamGroupFigures> upstream_groups;

  // The duration at or below which `percent` % of requests took, in microseconds (the upper
  // bound of the bucket that reaches that rank); 0 when nothing was counted.
  uint64_t duration_percentile(double percent) const;
};

// Sums the registry's workers. `now_wall`/`now_monotonic_ms`: the clocks the state of upstream
// servers and the uptime are judged by (CLOCK_REALTIME seconds, CLOCK_MONOTONIC ms).
Snapshot gather(const Registry& registry, int64_t now_wall, int64_t now_monotonic_ms);
// The state names peregrine_upstream_server_state knows, in its order.
inline constexpr const char* kUpstreamStates[] = {"up", "down", "backup", "drained", "disabled"};

// gather() at this moment (CLOCK_REALTIME, CLOCK_MONOTONIC).
Snapshot gather_now(const Registry& registry);
// Adds the process's resident size and open descriptors from /proc/self.
void read_process_figures(Snapshot& snapshot);

}  // namespace peregrine::metrics
