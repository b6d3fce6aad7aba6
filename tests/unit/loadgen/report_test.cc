#include "loadgen/report.h"

#include <gtest/gtest.h>

#include "loadgen/compare.h"

namespace peregrine::loadgen {
namespace {

RunInfo Info() {
  RunInfo i;
  i.url = "http://127.0.0.1:8080/index.html";
  i.server_software = "nginx/1.22";
  i.hostname = "127.0.0.1";
  i.port = 8080;
  i.path = "/index.html";
  i.document_length = 612;
  i.concurrency = 10;
  i.elapsed_s = 2.0;
  i.keep_alive = true;
  i.workers = 2;
  i.cpu_user_s = 0.5;
  i.cpu_system_s = 1.5;
  return i;
}

RunStats Stats() {
  RunStats s;
  s.completed = s.responses = 1000;
  s.keep_alive_responses = 990;
  s.bytes_read = 850000;
  s.body_wire_bytes = 612000;
  s.status[200] = 1000;
  s.connections_opened = 20;
  s.server_closes[static_cast<size_t>(CloseReason::kConnectionClose)] = 10;
  for (uint64_t v = 1; v <= 1000; ++v) {
    s.total.record(v * 10);
    s.connect.record(v < 20 ? 100 : 0);
    s.processing.record(v * 10);
    s.waiting.record(v * 9);
  }
  return s;
}

// Every field ab prints, in ab's order.
TEST(BenchReport, AbFieldsInAbOrder) {
  std::string r = format_text_report(Info(), Stats());
  const char* order[] = {
      "Server Software:        nginx/1.22\n",
      "Server Hostname:        127.0.0.1\n",
      "Server Port:            8080\n",
      "Document Path:          /index.html\n",
      "Document Length:        612 bytes\n",
      "Concurrency Level:      10\n",
      "Time taken for tests:   2.000 seconds\n",
      "Complete requests:      1000\n",
      "Failed requests:        0\n",
      "Keep-Alive requests:    990\n",
      "Total transferred:      850000 bytes\n",
      "HTML transferred:       612000 bytes\n",
      "Requests per second:    500.00 [#/sec] (mean)\n",
      "Time per request:       20.000 [ms] (mean)\n",
      "Time per request:       2.000 [ms] (mean, across all concurrent requests)\n",
      "Transfer rate:          415.04 [Kbytes/sec] received\n",
      "Connection Times (ms)\n",
      "              min  mean[+/-sd] median   max\n",
      "Connect:        0    0   0.0      0       0\n",
      "Total:          0    5   2.9      5      10\n",
      "Percentage of the requests served within a certain time (ms)\n",
      "  50%      5\n",
      "  99%     10\n",
      "99.9%     10\n",
      "99.99%     10\n",
      " 100%     10 (longest request)\n"};
  size_t pos = 0;
  for (const char* line : order) {
    size_t found = r.find(line, pos);
    ASSERT_NE(found, std::string::npos) << "missing or out of order: " << line << "\n" << r;
    pos = found + 1;
  }
  EXPECT_NE(r.find("Status codes:           200: 1000"), std::string::npos) << r;
  EXPECT_NE(r.find("Closed by the server:   10 connections"), std::string::npos) << r;
  EXPECT_NE(r.find("the server sent 'Connection: close'"), std::string::npos);
  EXPECT_NE(r.find("Client CPU:             user 0.50 s, system 1.50 s: 100% of 2 worker threads, "
                   "2000.00 us per request"),
            std::string::npos)
      << r;
  EXPECT_EQ(r.find("Failed requests:        0\n   ("),
            std::string::npos);  // no breakdown when none failed
  EXPECT_EQ(r.find("WARNING"), std::string::npos);
}

TEST(BenchReport, FailuresNon2xxAndVariableLength) {
  RunInfo info = Info();
  RunStats s = Stats();
  s.fail_connect = 2;
  s.fail_read = 3;
  s.fail_timeout = 4;
  s.fail_write = 1;
  s.non2xx = 7;
  s.length_mismatch = 5;
  std::string r = format_text_report(info, s);
  EXPECT_NE(
      r.find("Failed requests:        10\n   (Connect: 2, Receive: 3, Length: 0, Exceptions: 5)\n"
             "Write errors:           1\nNon-2xx responses:      7\n"),
      std::string::npos)
      << r;
  EXPECT_NE(r.find("Document Length:        Variable\n"), std::string::npos);
  EXPECT_NE(r.find("not failures"), std::string::npos);
  info.strict_length = true;
  r = format_text_report(info, s);
  EXPECT_NE(
      r.find("Failed requests:        15\n   (Connect: 2, Receive: 3, Length: 5, Exceptions: 5)"),
      std::string::npos)
      << r;
  EXPECT_NE(r.find("Document Length:        612 bytes"), std::string::npos);
}

TEST(BenchReport, ShortFormsAndWarnings) {
  RunInfo info = Info();
  info.no_median_sd = true;
  info.no_percentiles = true;
  info.cpu_user_s = 1.0;
  info.cpu_system_s = 2.9;  // 195 % of 2 workers
  info.keep_alive = false;
  std::string r = format_text_report(info, Stats());
  EXPECT_NE(r.find("              min   avg   max\nConnect:        0     0    0\n"),
            std::string::npos)
      << r;
  EXPECT_EQ(r.find("Percentage of the requests"), std::string::npos);
  EXPECT_EQ(r.find("Keep-Alive requests"), std::string::npos);
  EXPECT_NE(r.find("WARNING: the client was saturated"), std::string::npos);
}

TEST(BenchReport, JsonAndCsv) {
  std::string j = format_json_report(Info(), Stats());
  EXPECT_NE(j.find("\"complete_requests\": 1000"), std::string::npos);
  EXPECT_NE(j.find("\"status_codes\": {\"200\": 1000}"), std::string::npos);
  EXPECT_NE(j.find("\"99.99\": "), std::string::npos);
  EXPECT_EQ(j.front(), '{');
  std::string csv = format_percentile_csv(Stats().total);
  EXPECT_EQ(csv.rfind("Percentage served,Time in ms\n0,0.010\n1,0.100\n", 0), 0u) << csv;
  EXPECT_NE(csv.find("\n99,9.90"), std::string::npos) << csv;
  EXPECT_EQ(json_escape("a\"b\\\n\x01"), "\"a\\\"b\\\\\\n\\u0001\"");
}

TEST(BenchCompare, MediansRatiosAndPlot) {
  EXPECT_DOUBLE_EQ(median({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(median({4, 1, 2, 3}), 2.5);
  EXPECT_DOUBLE_EQ(median({}), 0);
  std::vector<CompareTarget> t(2);
  t[0].url = "http://a/";
  t[1].url = "http://b/";
  t[1].server_software = "peregrine";
  for (double rps : {100.0, 120.0, 110.0}) {
    RunSummary s;
    s.requests_per_second = rps;
    s.p99_ms = 2;
    t[0].rounds.push_back(s);
    s.requests_per_second = rps * 2;
    s.p99_ms = 1;
    t[1].rounds.push_back(s);
  }
  for (int i = 1; i <= 100; ++i) {
    t[0].latency.record(static_cast<uint64_t>(i) * 100);
    t[1].latency.record(static_cast<uint64_t>(i) * 50);
  }
  std::string table = format_compare_table(t);
  EXPECT_NE(table.find("Medians over 3 rounds"), std::string::npos);
  EXPECT_NE(table.find("#2  http://b/  (peregrine)"), std::string::npos) << table;
  EXPECT_NE(table.find("Requests per second     110.00                220.00 (x2.00)"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("Latency p99 (ms)        2.000                 1.000 (x0.50)"),
            std::string::npos)
      << table;
  std::string json = format_compare_json(t, 3);
  EXPECT_NE(json.find("\"Requests per second\": 2"), std::string::npos) << json;
  std::string svg = render_latency_svg(t);
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_EQ(svg.find("</svg>"), svg.size() - 7);
  size_t lines = 0;
  for (size_t p = svg.find("<polyline"); p != std::string::npos; p = svg.find("<polyline", p + 1))
    ++lines;
  EXPECT_EQ(lines, 2u);
  EXPECT_NE(svg.find("99.9%"), std::string::npos);
}

TEST(BenchCompare, Summarize) {
  RunSummary s = summarize(Info(), Stats());
  EXPECT_DOUBLE_EQ(s.requests_per_second, 500);
  EXPECT_NEAR(s.p50_ms, 5.0, 0.005);  // within the histogram's 0.1 %
  EXPECT_DOUBLE_EQ(s.max_ms, 10.0);
  EXPECT_DOUBLE_EQ(s.server_closes, 10);
  EXPECT_DOUBLE_EQ(s.client_cpu_us_per_request, 2000);
}

TEST(BenchReport, H2ReportHasTheSameFieldsAndSaysTheProtocol) {
  RunInfo i = Info();
  i.protocol = "h2";
  i.streams = 10;
  i.tls_protocol = "TLSv1.3,TLS_AES_256_GCM_SHA384,ALPN h2";
  RunStats s = Stats();
  s.tls_handshakes = 20;
  s.h2_rst_stream = 2;
  s.h2_goaway = 1;
  s.retried = 3;
  s.fail_protocol = 2;
  s.completed += 2;
  std::string h1 = format_text_report(Info(), Stats());
  std::string h2 = format_text_report(i, s);
  // Every ab field of the HTTP/1.1 report is in the HTTP/2 one.
  for (const char* field :
       {"Complete requests:", "Failed requests:", "Keep-Alive requests:", "Total transferred:",
        "HTML transferred:", "Requests per second:", "Time per request:", "Transfer rate:",
        "Connection Times (ms)", "Latency (ms):", "Status codes:", "Failures by kind:"}) {
    EXPECT_NE(h1.find(field), std::string::npos) << field;
    EXPECT_NE(h2.find(field), std::string::npos) << field;
  }
  EXPECT_NE(h2.find("Failed requests:        2\n"), std::string::npos) << h2;
  EXPECT_NE(h2.find("Protocol:               h2, 10 concurrent streams per connection\n"),
            std::string::npos)
      << h2;
  EXPECT_NE(h2.find("TLS handshakes:         20, 0 of them resumed"), std::string::npos) << h2;
  EXPECT_NE(h2.find("2 RST_STREAM received"), std::string::npos) << h2;
  EXPECT_NE(h2.find("1 GOAWAY received"), std::string::npos) << h2;
  EXPECT_NE(h2.find("Retried:                3 requests, refused unprocessed"), std::string::npos)
      << h2;
  EXPECT_NE(h1.find("Protocol:               HTTP/1.1\n"), std::string::npos);
  EXPECT_EQ(h1.find("TLS handshakes"), std::string::npos);  // plain http
  EXPECT_EQ(h1.find("HTTP/2 errors"), std::string::npos);
}

TEST(BenchReport, JsonCarriesProtocolTlsAndH2Counters) {
  RunInfo i = Info();
  i.protocol = "h2c";
  i.streams = 4;
  i.tls_resume = true;
  RunStats s = Stats();
  s.tls_handshakes = 7;
  s.tls_resumed = 6;
  s.h2_rst_stream = 1;
  s.h2_goaway = 2;
  std::string j = format_json_report(i, s);
  EXPECT_NE(j.find("\"protocol\": \"h2c\""), std::string::npos) << j;
  EXPECT_NE(j.find("\"streams\": 4"), std::string::npos);
  EXPECT_NE(j.find("\"tls\": {\"handshakes\": 7, \"resumed\": 6, \"resume_requested\": true}"),
            std::string::npos)
      << j;
  EXPECT_NE(j.find("\"h2\": {\"rst_stream\": 1, \"goaway\": 2}"), std::string::npos) << j;
}

TEST(BenchReport, MergeAddsTlsAndH2Counters) {
  RunStats a, b;
  a.tls_handshakes = 1;
  b.tls_handshakes = 2;
  b.tls_resumed = 2;
  a.h2_rst_stream = 3;
  b.h2_goaway = 4;
  a.merge(b);
  EXPECT_EQ(a.tls_handshakes, 3u);
  EXPECT_EQ(a.tls_resumed, 2u);
  EXPECT_EQ(a.h2_rst_stream, 3u);
  EXPECT_EQ(a.h2_goaway, 4u);
}

}  // namespace
}  // namespace peregrine::loadgen
