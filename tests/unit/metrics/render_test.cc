#include "metrics/render.h"

#include <gtest/gtest.h>

namespace peregrine::metrics {
namespace {

Snapshot sample() {
  Snapshot s;
  s.version = "1.2.3";
  s.workers = 2;
  s.generation = 3;
  s.duration_buckets.assign(DurationHistogram::kBuckets, 0);
  s.duration_buckets[DurationHistogram::index_of(100)] = 2;        // <= 128 us
  s.duration_buckets[DurationHistogram::index_of(3000)] = 1;       // <= 4096 us
  s.duration_buckets[DurationHistogram::index_of(200000000)] = 1;  // past the last bound
  s.duration_count = 4;
  s.duration_sum_micros = 200003200;
  RouteFigures& r = s.routes.emplace_back();
  r.site = "we\"ird\\site\n";
  r.route = "/";
  r.requests[1][0][1] = 5;  // HTTP/1.1, plain, 2xx
  r.requests[2][1][3] = 1;  // HTTP/2, TLS, 4xx
  r.response_body_bytes = 77;
  UpstreamServerFigures& u = s.upstream_servers.emplace_back();
  u.group = "app";
  u.server = "127.0.0.1:9000";
  u.state = "down";
  u.failures[1] = 2;
  s.upstream_groups.push_back({"app", 1, 4, 2});
  return s;
}

TEST(MetricsPrometheus, EscapesLabelValues) {
  std::string out;
  append_label_value(out, "a\"b\\c\nd");
  EXPECT_EQ(out, "a\\\"b\\\\c\\nd");
}

TEST(MetricsPrometheus, CountersWithHelpTypeAndLabels) {
  const std::string text = render_prometheus(sample());
  EXPECT_NE(text.find("# HELP peregrine_http_requests_total "), std::string::npos);
  EXPECT_NE(text.find("# TYPE peregrine_http_requests_total counter\n"), std::string::npos);
  EXPECT_NE(text.find("peregrine_http_requests_total{site=\"we\\\"ird\\\\site\\n\",route=\"/\","
                      "protocol=\"HTTP/1.1\",tls=\"false\",code=\"2xx\"} 5\n"),
            std::string::npos);
  EXPECT_NE(text.find("protocol=\"HTTP/2\",tls=\"true\",code=\"4xx\"} 1\n"), std::string::npos);
  // Zero series of a route are left out; there are exactly two.
  size_t samples = 0;
  for (size_t at = 0; (at = text.find("\nperegrine_http_requests_total{", at)) != std::string::npos;
       ++at)
    ++samples;
  EXPECT_EQ(samples, 2u);
  EXPECT_NE(text.find("peregrine_build_info{version=\"1.2.3\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("peregrine_config_generation 3\n"), std::string::npos);
  EXPECT_NE(text.find("peregrine_upstream_failures_total{group=\"app\",server=\"127.0.0.1:9000\","
                      "kind=\"connect_timeout\"} 2\n"),
            std::string::npos);
  EXPECT_NE(text.find("peregrine_upstream_server_state{group=\"app\",server=\"127.0.0.1:9000\","
                      "state=\"down\"} 1\n"),
            std::string::npos);
  EXPECT_NE(text.find("peregrine_upstream_queue_timeouts_total{group=\"app\"} 2\n"),
            std::string::npos);
  EXPECT_EQ(text.back(), '\n');
}

TEST(MetricsPrometheus, HistogramIsCumulativeInSeconds) {
  const std::string text = render_prometheus(sample());
  EXPECT_NE(text.find("# TYPE peregrine_http_request_duration_seconds histogram\n"),
            std::string::npos);
  EXPECT_NE(text.find("peregrine_http_request_duration_seconds_bucket{le=\"0.000128\"} 2\n"),
            std::string::npos);
  EXPECT_NE(text.find("peregrine_http_request_duration_seconds_bucket{le=\"0.002048\"} 2\n"),
            std::string::npos);
  EXPECT_NE(text.find("peregrine_http_request_duration_seconds_bucket{le=\"0.004096\"} 3\n"),
            std::string::npos);
  EXPECT_NE(text.find("peregrine_http_request_duration_seconds_bucket{le=\"67.108864\"} 3\n"),
            std::string::npos);
  EXPECT_NE(text.find("peregrine_http_request_duration_seconds_bucket{le=\"+Inf\"} 4\n"),
            std::string::npos);
  EXPECT_NE(text.find("peregrine_http_request_duration_seconds_sum 200.0032\n"), std::string::npos);
  EXPECT_NE(text.find("peregrine_http_request_duration_seconds_count 4\n"), std::string::npos);
}

TEST(MetricsJson, SameFigures) {
  const std::string json = render_json(sample());
  EXPECT_EQ(json.front(), '{');
  EXPECT_NE(json.find("\"version\":\"1.2.3\""), std::string::npos);
  EXPECT_NE(json.find("\"requests_total\":6"), std::string::npos);
  EXPECT_NE(json.find("\"site\":\"we\\\"ird\\\\site\\u000a\""), std::string::npos);
  EXPECT_NE(json.find("{\"protocol\":\"HTTP/1.1\",\"tls\":false,\"code\":\"2xx\",\"count\":5}"),
            std::string::npos);
  EXPECT_NE(json.find("\"queue\":{\"length\":1,\"waits\":4,\"timeouts\":2}"), std::string::npos);
  EXPECT_NE(json.find("\"state\":\"down\""), std::string::npos);
  EXPECT_NE(json.find("\"p50_seconds\":0.000112"), std::string::npos);
  // Balanced braces and no ",}" or ",]" (the writer places commas itself).
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < json.size(); ++i) {
    char c = json[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    if (c == '{' || c == '[') ++depth;
    if (c == '}' || c == ']') --depth;
    ASSERT_GE(depth, 0);
  }
  EXPECT_EQ(depth, 0);
  EXPECT_EQ(json.find(",}"), std::string::npos);
  EXPECT_EQ(json.find(",]"), std::string::npos);
  EXPECT_EQ(json.find("{,"), std::string::npos);
}

}  // namespace
}  // namespace peregrine::metrics
