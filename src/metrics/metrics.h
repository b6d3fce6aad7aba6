// Live counters, collected per worker without a lock or an atomic read-modify-write.
//
// Every figure has exactly one writer thread (a worker, or the main thread for process-wide
// ones). The writer updates it with a relaxed load and a relaxed store, which on x86-64 and
// AArch64 is a plain load, add and store: the same code as a plain integer, but a reader on
// another thread (the admin endpoint) may load it at any time without a data race. Readers sum
// the workers' figures when asked (metrics/snapshot.h); nobody ever stops a worker to read.
//
// Blocks of counters for a site's route or an upstream server are found by name when a worker
// builds its route table (not per request) and live as long as the process: counts survive
// reloads, and a pointer held by a connection across a reload stays valid.
//
// Built with -DPEREGRINE_METRICS=OFF (CMake), every update compiles to nothing: the cost bench
// (bench/metrics_cost.sh) compares the two builds.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "core/log_linear.h"

namespace peregrine::metrics {

#ifdef PEREGRINE_NO_METRICS
inline constexpr bool kEnabled = false;
#else
inline constexpr bool kEnabled = true;
#endif

// A monotonic count with one writer thread.
class Counter {
 public:
  void add(uint64_t n = 1) {
    if constexpr (kEnabled)
      value_.store(value_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  uint64_t get() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> value_{0};
};

// A value that goes up and down, with one writer thread.
class Gauge {
 public:
  void set(int64_t v) {
    if constexpr (kEnabled) value_.store(v, std::memory_order_relaxed);
  }
  void add(int64_t n) {
    if constexpr (kEnabled)
      value_.store(value_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  int64_t get() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<int64_t> value_{0};
};

// The client protocol of a request, as the access log names it.
enum class Protocol : uint8_t { kHttp10, kHttp11, kHttp2 };
inline constexpr int kProtocols = 3;
const char* to_string(Protocol protocol);  // "HTTP/1.0", "HTTP/1.1", "HTTP/2"
inline Protocol protocol_of(uint8_t version_major, uint8_t version_minor) {
  if (version_major >= 2) return Protocol::kHttp2;
  return version_minor == 0 ? Protocol::kHttp10 : Protocol::kHttp11;
}
// 1xx..5xx as 0..4; anything else counts with its nearest class.
inline constexpr int kStatusClasses = 5;
inline int status_class(int status) {
  int c = status / 100;
  if (c < 1) c = 1;
  if (c > 5) c = 5;
  return c - 1;
}

// Request durations in microseconds, bucketed log-linearly with 4 buckets per power of two
// (within 25 %), up to 2^36 us (19 hours; longer is clamped). 140 counters per worker.
class DurationHistogram {
 public:
  using Buckets = LogLinear<2>;
  static constexpr uint64_t kMaxMicros = (uint64_t{1} << 36) - 1;
  static constexpr size_t kBuckets = Buckets::index_of(kMaxMicros) + 1;

  void record(uint64_t micros) {
    if (micros > kMaxMicros) micros = kMaxMicros;
    counts_[index_of(micros)].add();
    sum_micros_.add(micros);
  }
  // Shifted by one so that a bucket's upper bound is inclusive and the octave bounds are round:
  // bucket i holds the durations up to upper_micros(i), and those of 2^k us end a bucket.
  static size_t index_of(uint64_t micros) { return Buckets::index_of(micros ? micros - 1 : 0); }
  static uint64_t upper_micros(size_t bucket) { return Buckets::highest_of(bucket) + 1; }
  uint64_t count(size_t bucket) const { return counts_[bucket].get(); }
  uint64_t sum_micros() const { return sum_micros_.get(); }

 private:
  std::array<Counter, kBuckets> counts_;
  Counter sum_micros_;
};

// One route of one site (route "" counts what the route table answered itself: 404, 405, 400,
// OPTIONS *, and requests refused before routing).
struct RouteCounters {
  std::string site;
  std::string route;
  Counter requests[kProtocols][2][kStatusClasses];  // [protocol][tls][status class]
  Counter response_body_bytes;
};

// What a request against an upstream server can fail with (upstream/retry.h's Failure).
inline constexpr int kFailureKinds = 6;
const char* failure_kind_name(int kind);  // "refused", "connect_timeout", ...

// One server of one upstream group.
struct UpstreamServerCounters {
  std::string group;
  std::string server;
  bool backup = false;
  Counter requests;  // slots taken: one per try
  Counter failures[kFailureKinds];
  Gauge in_flight;
  Gauge idle;  // pooled connections now
  Counter connections_opened;
  Counter connections_reused;
  Gauge probe_down;          // 1 while the active health check says down
  Gauge down_until_ms;       // passive health: out until this CLOCK_MONOTONIC time
  Gauge last_check_seconds;  // wall clock of the last health-check result; 0: none yet
  Gauge last_check_ok;
  Gauge operator_state;  // upstream::OperatorState: 0 none, 1 drained, 2 disabled (admin)
  // The last kCheckHistory health-check results as wall seconds * 2 + ok, entry checks % size
  // written next (the oldest overwritten).
  static constexpr size_t kCheckHistory = 16;
  Gauge check_history[kCheckHistory];
  Counter checks;
};

struct UpstreamGroupCounters {
  std::string group;
  Gauge queue_length;
  Counter queue_waits;
  Counter queue_timeouts;
};

// An append-only list of blocks with stable addresses. The owning worker appends (while it
// builds a route table); readers on any thread see the first size() blocks, complete.
template <class T, size_t Capacity>
class Series {
 public:
  size_t size() const { return size_.load(std::memory_order_acquire); }
  const T& operator[](size_t i) const { return *items_[i]; }
  // Writer only. Past Capacity, blocks share one overflow block (never shown).
  template <class Match, class Init>
  T* find_or_add(Match match, Init init) {
    const size_t n = size_.load(std::memory_order_relaxed);
    for (size_t i = 0; i < n; ++i)
      if (match(*items_[i])) return items_[i].get();
    if (n == Capacity) return &overflow_;
    items_[n] = std::make_unique<T>();
    init(*items_[n]);
    size_.store(n + 1, std::memory_order_release);
    return items_[n].get();
  }

 private:
  std::array<std::unique_ptr<T>, Capacity> items_;
  std::atomic<size_t> size_{0};
  T overflow_;
};

enum class ConnectionKind : uint8_t { kHttp1, kHttp2 };

// Everything one worker counts.
struct WorkerMetrics {
  DurationHistogram duration;
  Counter bytes_received[2];  // [ConnectionKind]: bytes read from clients (decrypted on TLS)
  Counter bytes_sent[2];      // bytes written to clients (before encryption)
  Counter connections_accepted;
  // Sampled once a second by the worker (it walks its connections).
  Gauge connections_open[2];
  Gauge connections_reading;
  Gauge connections_writing;
  Gauge connections_idle;
  // The worker's request buffers (max_header_bytes + 4 KiB each): held by connections, and kept
  // for reuse (at most 256).
  Gauge read_buffers_in_use;
  Gauge read_buffers_spare;
  Counter tls_handshakes_full;
  Counter tls_handshakes_resumed;
  Counter tls_handshakes_failed;
  Counter http2_streams;
  Series<RouteCounters, 1024> routes;
  Series<UpstreamServerCounters, 512> upstream_servers;
  Series<UpstreamGroupCounters, 256> upstream_groups;

  RouteCounters* route(std::string_view site, std::string_view route);
  UpstreamServerCounters* upstream_server(std::string_view group, std::string_view server,
                                          bool backup);
  UpstreamGroupCounters* upstream_group(std::string_view group);

  // Counts one request where its access-log line is made (whether the log is on or not).
  void count_request(RouteCounters* counters, Protocol protocol, bool tls, int status,
                     uint64_t body_bytes, uint64_t micros) {
    if constexpr (kEnabled) {
      if (counters) {
        counters->requests[static_cast<int>(protocol)][tls][status_class(status)].add();
        counters->response_body_bytes.add(body_bytes);
      }
      duration.record(micros);
    }
  }
};

// Figures of the process as a whole; written by the main thread unless said otherwise.
struct ProcessMetrics {
  Counter reloads_succeeded;
  Counter reloads_failed;
  Gauge generation;            // 1 for the configuration loaded at start, +1 per reload
  Counter access_log_dropped;  // lines; written under the access-log writer's lock
  Gauge start_seconds;         // wall clock at start
  Gauge workers;
};

// All workers' figures, for readers. Workers are added before their thread starts and never
// removed, so a reader walks them without a lock.
class Registry {
 public:
  WorkerMetrics& add_worker();
  size_t worker_count() const { return workers_.size(); }
  const WorkerMetrics& worker(size_t i) const { return workers_[i]; }
  ProcessMetrics& process() { return process_; }
  const ProcessMetrics& process() const { return process_; }

 private:
  Series<WorkerMetrics, 1024> workers_;
  ProcessMetrics process_;
};

Registry& registry();

// The calling thread's worker figures. A thread that is not a worker writes into a block no one
// reads, so callers never test for null.
extern WorkerMetrics g_unread;
inline constinit thread_local WorkerMetrics* t_local = &g_unread;
inline WorkerMetrics& local() {
  return *t_local;
}

// Makes `m` the calling thread's figures while it lives (a worker binds its own for its thread
// and while it builds its first route table on the thread that constructs it).
class Bind {
 public:
  explicit Bind(WorkerMetrics& m) : previous_(t_local) { t_local = &m; }
  ~Bind() { t_local = previous_; }
  Bind(const Bind&) = delete;
  Bind& operator=(const Bind&) = delete;

 private:
  WorkerMetrics* previous_;
};

}  // namespace peregrine::metrics
