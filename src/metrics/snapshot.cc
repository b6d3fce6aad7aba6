#include "metrics/snapshot.h"

#include <dirent.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/clock.h"

namespace peregrine::metrics {

uint64_t RouteFigures::total() const {
  uint64_t n = 0;
  for (const auto& by_tls : requests)
    for (const auto& by_class : by_tls)
      for (uint64_t v : by_class) n += v;
  return n;
}

uint64_t Snapshot::duration_percentile(double percent) const {
  if (duration_count == 0) return 0;
  uint64_t rank =
      static_cast<uint64_t>(std::ceil(percent / 100.0 * static_cast<double>(duration_count)));
  if (rank < 1) rank = 1;
  uint64_t seen = 0;
  for (size_t i = 0; i < duration_buckets.size(); ++i) {
    seen += duration_buckets[i];
    if (seen >= rank) return DurationHistogram::upper_micros(i);
  }
  return DurationHistogram::upper_micros(duration_buckets.size() - 1);
}

namespace {

template <class T, class Key>
T& entry(std::vector<T>& list, Key same) {
  for (T& t : list)
    if (same(t)) return t;
  return list.emplace_back();
}

}  // namespace

Snapshot gather(const Registry& registry, int64_t now_wall, int64_t now_monotonic_ms) {
  Snapshot s;
#ifdef PEREGRINE_VERSION
  s.version = PEREGRINE_VERSION;
#endif
  const ProcessMetrics& p = registry.process();
  s.start_seconds = p.start_seconds.get();
  s.uptime_seconds = s.start_seconds ? static_cast<double>(now_wall - s.start_seconds) : 0;
  s.workers = p.workers.get();
  s.generation = p.generation.get();
  s.reloads_succeeded = p.reloads_succeeded.get();
  s.reloads_failed = p.reloads_failed.get();
  s.access_log_dropped = p.access_log_dropped.get();
  s.duration_buckets.assign(DurationHistogram::kBuckets, 0);

  // Upstream state is per worker (passive health is each worker's own view): a server is down
  // when every worker that knows it sees it down.
  struct Seen {
    size_t up = 0;
    size_t down = 0;
  };
  std::vector<Seen> seen;

  for (size_t w = 0; w < registry.worker_count(); ++w) {
    const WorkerMetrics& m = registry.worker(w);
    for (size_t i = 0; i < DurationHistogram::kBuckets; ++i) {
      const uint64_t n = m.duration.count(i);
      s.duration_buckets[i] += n;
      s.duration_count += n;
    }
    s.duration_sum_micros += m.duration.sum_micros();
    for (int k = 0; k < 2; ++k) {
      s.bytes_received[k] += m.bytes_received[k].get();
      s.bytes_sent[k] += m.bytes_sent[k].get();
      s.connections_open[k] += m.connections_open[k].get();
    }
    s.connections_accepted += m.connections_accepted.get();
    s.connections_reading += m.connections_reading.get();
    s.connections_writing += m.connections_writing.get();
    s.connections_idle += m.connections_idle.get();
    s.read_buffers_in_use += m.read_buffers_in_use.get();
    s.read_buffers_spare += m.read_buffers_spare.get();
    s.tls_full += m.tls_handshakes_full.get();
    s.tls_resumed += m.tls_handshakes_resumed.get();
    s.tls_failed += m.tls_handshakes_failed.get();
    s.http2_streams += m.http2_streams.get();

    for (size_t i = 0, n = m.routes.size(); i < n; ++i) {
      const RouteCounters& c = m.routes[i];
      RouteFigures& f = entry(
          s.routes, [&](const RouteFigures& r) { return r.site == c.site && r.route == c.route; });
      f.site = c.site;
      f.route = c.route;
      for (int a = 0; a < kProtocols; ++a)
        for (int b = 0; b < 2; ++b)
          for (int k = 0; k < kStatusClasses; ++k) f.requests[a][b][k] += c.requests[a][b][k].get();
      f.response_body_bytes += c.response_body_bytes.get();
    }
    for (size_t i = 0, n = m.upstream_servers.size(); i < n; ++i) {
      const UpstreamServerCounters& c = m.upstream_servers[i];
      const size_t before = s.upstream_servers.size();
      UpstreamServerFigures& f = entry(s.upstream_servers, [&](const UpstreamServerFigures& u) {
        return u.group == c.group && u.server == c.server;
      });
      if (s.upstream_servers.size() != before) {
        f.group = c.group;
        f.server = c.server;
        f.backup = c.backup;
        seen.emplace_back();
      }
      Seen& health = seen[static_cast<size_t>(&f - s.upstream_servers.data())];
      f.requests += c.requests.get();
      for (int k = 0; k < kFailureKinds; ++k) f.failures[k] += c.failures[k].get();
      f.in_flight += c.in_flight.get();
      f.idle += c.idle.get();
      f.connections_opened += c.connections_opened.get();
      f.connections_reused += c.connections_reused.get();
      const int64_t checked = c.last_check_seconds.get();
      // Workers probe on their own and times are whole seconds: within the same second a
      // failure counts as the later result, so that a server every worker sees failing never
      // shows an "ok" last check.
      if (checked > f.last_check_seconds) {
        f.last_check_seconds = checked;
        f.last_check_ok = c.last_check_ok.get() != 0;
      } else if (checked == f.last_check_seconds && checked > 0) {
        f.last_check_ok = f.last_check_ok && c.last_check_ok.get() != 0;
      }
      f.operator_state = std::max(f.operator_state, c.operator_state.get());
      const uint64_t checks = c.checks.get();
      const uint64_t kept = std::min<uint64_t>(checks, UpstreamServerCounters::kCheckHistory);
      for (uint64_t k = checks - kept; k < checks; ++k) {
        const int64_t v = c.check_history[k % UpstreamServerCounters::kCheckHistory].get();
        f.history.push_back({v / 2, (v & 1) != 0});
      }
      const bool down = c.probe_down.get() != 0 || now_monotonic_ms < c.down_until_ms.get();
      ++(down ? health.down : health.up);
    }
    for (size_t i = 0, n = m.upstream_groups.size(); i < n; ++i) {
      const UpstreamGroupCounters& c = m.upstream_groups[i];
      UpstreamGroupFigures& f = entry(
          s.upstream_groups, [&](const UpstreamGroupFigures& g) { return g.group == c.group; });
      f.group = c.group;
      f.queue_length += c.queue_length.get();
      f.queue_waits += c.queue_waits.get();
      f.queue_timeouts += c.queue_timeouts.get();
    }
  }
  for (size_t i = 0; i < s.upstream_servers.size(); ++i) {
    UpstreamServerFigures& f = s.upstream_servers[i];
    std::stable_sort(f.history.begin(), f.history.end(), [](const auto& a, const auto& b) {
      return a.seconds != b.seconds ? a.seconds > b.seconds : !a.ok && b.ok;  // as above
    });
    if (f.history.size() > UpstreamServerCounters::kCheckHistory)
      f.history.resize(UpstreamServerCounters::kCheckHistory);
    if (f.operator_state == 2)
      f.state = "disabled";
    else if (f.operator_state == 1)
      f.state = "drained";
    else if (seen[i].up == 0 && seen[i].down > 0)
      f.state = "down";
    else
      f.state = f.backup ? "backup" : "up";
  }
  return s;
}

Snapshot gather_now(const Registry& registry) {
  timespec wall;
  clock_gettime(CLOCK_REALTIME, &wall);
  return gather(registry, wall.tv_sec, Clock::precise_monotonic_us() / 1000);
}

void read_process_figures(Snapshot& snapshot) {
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    long pages_total = 0, pages_resident = 0;
    if (std::fscanf(f, "%ld %ld", &pages_total, &pages_resident) == 2)
      snapshot.resident_bytes = static_cast<int64_t>(pages_resident) * sysconf(_SC_PAGESIZE);
    std::fclose(f);
  }
  if (DIR* d = opendir("/proc/self/fd")) {
    int64_t n = 0;
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') ++n;
    closedir(d);
    snapshot.open_fds = n - 1;  // not the descriptor opendir itself holds
  }
}

}  // namespace peregrine::metrics
