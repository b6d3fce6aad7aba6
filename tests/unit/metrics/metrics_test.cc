#include "metrics/metrics.h"

#include <gtest/gtest.h>

#include <thread>

#include "metrics/snapshot.h"

namespace peregrine::metrics {
namespace {

TEST(MetricsCounter, AddsAndReadsFromAnotherThread) {
  Counter c;
  std::thread writer([&] {
    for (int i = 0; i < 100000; ++i) c.add();
  });
  writer.join();
  EXPECT_EQ(c.get(), kEnabled ? 100000u : 0u);
}

TEST(MetricsGauge, SetAndDeltas) {
  if (!kEnabled) GTEST_SKIP() << "built with PEREGRINE_METRICS=OFF";
  Gauge g;
  g.add(3);
  g.add(-1);
  EXPECT_EQ(g.get(), 2);
  g.set(-5);
  EXPECT_EQ(g.get(), -5);
}

TEST(MetricsHistogram, OctaveBoundsEndBuckets) {
  // A duration of exactly 2^k us is in the bucket that ends at 2^k; one more starts the next.
  for (int bit = 3; bit < 36; ++bit) {
    const uint64_t bound = uint64_t{1} << bit;
    const size_t at = DurationHistogram::index_of(bound);
    EXPECT_EQ(DurationHistogram::upper_micros(at), bound) << bit;
    EXPECT_EQ(DurationHistogram::index_of(bound + 1), at + 1) << bit;
  }
  EXPECT_EQ(DurationHistogram::index_of(0), 0u);
  EXPECT_EQ(DurationHistogram::index_of(1), 0u);
  EXPECT_EQ(DurationHistogram::kBuckets,
            DurationHistogram::index_of(DurationHistogram::kMaxMicros) + 1);
}

TEST(MetricsHistogram, BucketsWithinAQuarter) {
  for (uint64_t v : {9u, 100u, 1000u, 12345u, 999999u, 30000000u}) {
    const uint64_t upper = DurationHistogram::upper_micros(DurationHistogram::index_of(v));
    EXPECT_GE(upper, v);
    EXPECT_LE(static_cast<double>(upper), static_cast<double>(v) * 1.25 + 1) << v;
  }
}

TEST(MetricsHistogram, RecordClampsAndSums) {
  if (!kEnabled) GTEST_SKIP() << "built with PEREGRINE_METRICS=OFF";
  DurationHistogram h;
  h.record(150);
  h.record(uint64_t{1} << 40);  // clamped
  EXPECT_EQ(h.count(DurationHistogram::index_of(150)), 1u);
  EXPECT_EQ(h.count(DurationHistogram::kBuckets - 1), 1u);
  EXPECT_EQ(h.sum_micros(), 150u + DurationHistogram::kMaxMicros);
}

TEST(MetricsSeries, FindsByNameAndKeepsAddresses) {
  WorkerMetrics m;
  RouteCounters* a = m.route("example.com", "/");
  RouteCounters* b = m.route("example.com", "/api/");
  EXPECT_NE(a, b);
  EXPECT_EQ(m.route("example.com", "/"), a);
  EXPECT_EQ(m.routes.size(), 2u);
  EXPECT_EQ(&m.routes[0], a);
  EXPECT_EQ(m.upstream_server("g", "127.0.0.1:9000", false),
            m.upstream_server("g", "127.0.0.1:9000", true));
}

TEST(MetricsGather, SumsWorkersByName) {
  if (!kEnabled) GTEST_SKIP() << "built with PEREGRINE_METRICS=OFF";
  Registry registry;
  WorkerMetrics& w1 = registry.add_worker();
  WorkerMetrics& w2 = registry.add_worker();
  // The workers met the routes in a different order: figures still add up by name.
  RouteCounters* w1_root = w1.route("s", "/");
  RouteCounters* w1_api = w1.route("s", "/api/");
  RouteCounters* w2_api = w2.route("s", "/api/");
  w1.count_request(w1_root, Protocol::kHttp11, false, 200, 10, 100);
  w1.count_request(w1_api, Protocol::kHttp2, true, 404, 5, 100);
  w2.count_request(w2_api, Protocol::kHttp2, true, 404, 7, 300);
  w2.count_request(w2_api, Protocol::kHttp10, false, 503, 0, 5000);
  w1.bytes_received[0].add(40);
  w2.bytes_received[0].add(2);
  registry.process().workers.set(2);

  Snapshot s = gather(registry, 0, 0);
  ASSERT_EQ(s.routes.size(), 2u);
  EXPECT_EQ(s.routes[0].route, "/");
  EXPECT_EQ(s.routes[0].total(), 1u);
  EXPECT_EQ(s.routes[1].total(), 3u);
  EXPECT_EQ(s.routes[1].requests[2][1][3], 2u);  // HTTP/2, TLS, 4xx
  EXPECT_EQ(s.routes[1].requests[0][0][4], 1u);  // HTTP/1.0, plain, 5xx
  EXPECT_EQ(s.routes[1].response_body_bytes, 12u);
  EXPECT_EQ(s.bytes_received[0], 42u);
  EXPECT_EQ(s.duration_count, 4u);
  EXPECT_EQ(s.duration_sum_micros, 5500u);
  EXPECT_EQ(s.duration_percentile(50), 112u);  // 100 us is in the bucket [97, 112]
  EXPECT_GE(s.duration_percentile(100), 5000u);
  EXPECT_EQ(s.workers, 2);
}

TEST(MetricsGather, UpstreamStateIsDownOnlyWhenEveryWorkerSeesItDown) {
  if (!kEnabled) GTEST_SKIP() << "built with PEREGRINE_METRICS=OFF";
  Registry registry;
  UpstreamServerCounters* a1 = registry.add_worker().upstream_server("g", "a", false);
  UpstreamServerCounters* a2 = registry.add_worker().upstream_server("g", "a", false);
  registry.add_worker().upstream_server("g", "b", true);
  a1->probe_down.set(1);
  EXPECT_STREQ(gather(registry, 0, 1000).upstream_servers[0].state, "up");
  a2->down_until_ms.set(2000);  // passive health: out until t = 2000 ms
  Snapshot s = gather(registry, 0, 1000);
  EXPECT_STREQ(s.upstream_servers[0].state, "down");
  EXPECT_STREQ(s.upstream_servers[1].state, "backup");
  EXPECT_STREQ(gather(registry, 0, 2000).upstream_servers[0].state, "up");
}

TEST(MetricsGather, OperatorStateWinsAndHistoryMergesWorkersNewestFirst) {
  if (!kEnabled) GTEST_SKIP() << "built with PEREGRINE_METRICS=OFF";
  Registry registry;
  UpstreamServerCounters* a1 = registry.add_worker().upstream_server("g", "a", false);
  UpstreamServerCounters* a2 = registry.add_worker().upstream_server("g", "a", false);
  a1->probe_down.set(1);
  a2->probe_down.set(1);
  EXPECT_STREQ(gather(registry, 0, 0).upstream_servers[0].state, "down");
  a1->operator_state.set(1);
  EXPECT_STREQ(gather(registry, 0, 0).upstream_servers[0].state, "drained");
  a2->operator_state.set(2);
  EXPECT_STREQ(gather(registry, 0, 0).upstream_servers[0].state, "disabled");

  // As GroupRuntime::record_check writes: seconds * 2 + ok into a ring of kCheckHistory.
  auto record = [](UpstreamServerCounters* c, int64_t seconds, bool ok) {
    c->check_history[c->checks.get() % c->kCheckHistory].set(seconds * 2 + ok);
    c->checks.add();
  };
  for (int64_t t = 1; t <= 20; ++t) record(a1, 100 + 2 * t, t % 2 == 0);  // 20 > the ring
  record(a2, 141, false);
  Snapshot s = gather(registry, 0, 0);
  const auto& history = s.upstream_servers[0].history;
  ASSERT_EQ(history.size(), UpstreamServerCounters::kCheckHistory);
  EXPECT_EQ(history[0].seconds, 141);  // the second worker's one check
  EXPECT_FALSE(history[0].ok);
  EXPECT_EQ(history[1].seconds, 140);  // then the first worker's, newest first
  EXPECT_TRUE(history[1].ok);
  EXPECT_EQ(history[2].seconds, 138);
  EXPECT_FALSE(history[2].ok);
  EXPECT_EQ(history.back().seconds, 112);  // its oldest kept ones fall off the merged list
  EXPECT_EQ(s.upstream_servers[0].last_check_seconds, 0);  // record() wrote no last check

  // Within one second a failure is the later result, whichever worker had it.
  a1->last_check_seconds.set(200);
  a1->last_check_ok.set(1);
  a2->last_check_seconds.set(200);
  a2->last_check_ok.set(0);
  record(a1, 200, true);
  record(a2, 200, false);
  s = gather(registry, 0, 0);
  EXPECT_FALSE(s.upstream_servers[0].last_check_ok);
  EXPECT_EQ(s.upstream_servers[0].history[0].seconds, 200);
  EXPECT_FALSE(s.upstream_servers[0].history[0].ok);
  EXPECT_TRUE(s.upstream_servers[0].history[1].ok);
}

TEST(MetricsLabels, StatusClassAndProtocol) {
  EXPECT_EQ(status_class(101), 0);
  EXPECT_EQ(status_class(200), 1);
  EXPECT_EQ(status_class(499), 3);
  EXPECT_EQ(status_class(599), 4);
  EXPECT_EQ(status_class(0), 0);
  EXPECT_EQ(status_class(999), 4);
  EXPECT_EQ(protocol_of(1, 0), Protocol::kHttp10);
  EXPECT_EQ(protocol_of(1, 1), Protocol::kHttp11);
  EXPECT_EQ(protocol_of(2, 0), Protocol::kHttp2);
}

}  // namespace
}  // namespace peregrine::metrics
