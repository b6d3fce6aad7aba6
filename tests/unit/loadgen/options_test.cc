#include "loadgen/options.h"

#include <gtest/gtest.h>

namespace peregrine::loadgen {
namespace {

std::string Parse(std::vector<std::string> args, Options& o) {
  return parse_options(args, o);
}

TEST(BenchOptions, AbCommonOptions) {
  Options o;
  ASSERT_EQ(Parse({"-k",
                   "-n",
                   "1000",
                   "-c",
                   "50",
                   "-H",
                   "Accept-Encoding: gzip",
                   "-C",
                   "a=b",
                   "-s",
                   "5",
                   "-q",
                   "-S",
                   "-d",
                   "-l",
                   "-r",
                   "-v",
                   "3",
                   "-e",
                   "p.csv",
                   "-g",
                   "g.tsv",
                   "-B",
                   "127.0.0.1",
                   "http://example.com/x"},
                  o),
            "");
  EXPECT_TRUE(o.keep_alive);
  EXPECT_EQ(o.requests, 1000);
  EXPECT_TRUE(o.requests_given);
  EXPECT_EQ(o.concurrency, 50);
  EXPECT_EQ(o.headers.size(), 1u);
  EXPECT_EQ(o.cookies[0], "a=b");
  EXPECT_DOUBLE_EQ(o.timeout_s, 5);
  EXPECT_TRUE(o.quiet && o.no_median_sd && o.no_percentiles && o.accept_variable_length &&
              o.continue_on_error);
  EXPECT_EQ(o.verbosity, 3);
  EXPECT_EQ(o.csv_file, "p.csv");
  EXPECT_EQ(o.gnuplot_file, "g.tsv");
  EXPECT_EQ(o.bind_address, "127.0.0.1");
  EXPECT_EQ(o.urls.size(), 1u);
}

TEST(BenchOptions, ClustersAndAttachedValues) {
  Options o;
  ASSERT_EQ(Parse({"-kqn100", "-c10", "http://h/"}, o), "");
  EXPECT_TRUE(o.keep_alive);
  EXPECT_TRUE(o.quiet);
  EXPECT_EQ(o.requests, 100);
  EXPECT_EQ(o.concurrency, 10);
}

TEST(BenchOptions, OurOptions) {
  Options o;
  ASSERT_EQ(Parse({"-W", "4", "-P", "16", "-R", "2500.5", "--http1.0", "--json", "--strict-length",
                   "--duration", "1.5m", "--proxy-auth", "u:p", "http://h/"},
                  o),
            "");
  EXPECT_EQ(o.workers, 4);
  EXPECT_EQ(o.pipeline, 16);
  EXPECT_TRUE(o.keep_alive);  // implied by pipelining
  EXPECT_DOUBLE_EQ(o.rate, 2500.5);
  EXPECT_TRUE(o.http10 && o.json && o.strict_length);
  EXPECT_DOUBLE_EQ(o.time_limit_s, 90);
  EXPECT_TRUE(o.unlimited_requests());
  EXPECT_EQ(o.proxy_auth, "u:p");
}

TEST(BenchOptions, CompareMode) {
  Options o;
  ASSERT_EQ(
      Parse({"compare", "--rounds=5", "--plot", "x.svg", "-c", "10", "http://a/", "http://b/"}, o),
      "");
  EXPECT_TRUE(o.compare);
  EXPECT_EQ(o.rounds, 5);
  EXPECT_EQ(o.plot_file, "x.svg");
  EXPECT_EQ(o.urls.size(), 2u);
  EXPECT_NE(Parse({"compare", "http://a/"}, o), "");
}

TEST(BenchOptions, Errors) {
  Options o;
  EXPECT_NE(Parse({}, o), "");
  EXPECT_NE(Parse({"-n", "0", "http://h/"}, o), "");
  EXPECT_NE(Parse({"-n", "x", "http://h/"}, o), "");
  EXPECT_NE(Parse({"-c", "-1", "http://h/"}, o), "");
  EXPECT_NE(Parse({"-n", "5", "-c", "10", "http://h/"}, o), "");  // as ab
  EXPECT_NE(Parse({"-p", "a", "-u", "b", "http://h/"}, o), "");
  EXPECT_NE(Parse({"-i", "-p", "a", "http://h/"}, o), "");
  EXPECT_NE(Parse({"-Z", "http://h/"}, o), "");
  EXPECT_NE(Parse({"--nope", "http://h/"}, o), "");
  EXPECT_NE(Parse({"-H", "NoColon", "http://h/"}, o), "");
  EXPECT_NE(Parse({"http://a/", "http://b/"}, o), "");
  EXPECT_NE(Parse({"-n"}, o), "");
  EXPECT_NE(Parse({"--plot", "x.svg", "http://a/"}, o), "");
  EXPECT_EQ(Parse({"-n", "5", "-c", "10", "-t", "3", "http://h/"}, o), "");  // -t lifts the check
}

TEST(BenchOptions, Durations) {
  EXPECT_DOUBLE_EQ(parse_duration("30"), 30);
  EXPECT_DOUBLE_EQ(parse_duration("30s"), 30);
  EXPECT_DOUBLE_EQ(parse_duration("250ms"), 0.25);
  EXPECT_DOUBLE_EQ(parse_duration("2m"), 120);
  EXPECT_DOUBLE_EQ(parse_duration("1h"), 3600);
  EXPECT_LT(parse_duration("x"), 0);
  EXPECT_LT(parse_duration(""), 0);
}

TEST(BenchOptions, Urls) {
  Url u;
  ASSERT_EQ(parse_url("http://example.com/a?b=c#frag", u), "");
  EXPECT_EQ(u.host, "example.com");
  EXPECT_EQ(u.port, 80);
  EXPECT_EQ(u.path, "/a?b=c");
  EXPECT_EQ(u.authority(), "example.com");
  ASSERT_EQ(parse_url("https://[::1]:8443", u), "");
  EXPECT_TRUE(u.tls);
  EXPECT_TRUE(u.ipv6_literal);
  EXPECT_EQ(u.host, "::1");
  EXPECT_EQ(u.port, 8443);
  EXPECT_EQ(u.path, "/");
  EXPECT_EQ(u.authority(), "[::1]:8443");
  ASSERT_EQ(parse_url("HTTP://h:80?x", u), "");
  EXPECT_EQ(u.path, "/?x");
  EXPECT_EQ(u.authority(), "h");
  EXPECT_NE(parse_url("ftp://h/", u), "");
  EXPECT_NE(parse_url("http:///", u), "");
  EXPECT_NE(parse_url("http://h:99999/", u), "");
  EXPECT_NE(parse_url("http://h:x/", u), "");
  EXPECT_NE(parse_url("http://[::1/", u), "");
  EXPECT_NE(parse_url("http://u@h/", u), "");
  EXPECT_NE(parse_url("http://h/a b", u), "");
}

TEST(BenchOptions, Base64) {
  EXPECT_EQ(base64_encode(""), "");
  EXPECT_EQ(base64_encode("f"), "Zg==");
  EXPECT_EQ(base64_encode("fo"), "Zm8=");
  EXPECT_EQ(base64_encode("foo"), "Zm9v");
  EXPECT_EQ(base64_encode("user:pass"), "dXNlcjpwYXNz");
}

TEST(BenchOptions, RequestBytes) {
  Options o;
  ASSERT_EQ(Parse({"http://h:8080/p"}, o), "");
  Url u;
  ASSERT_EQ(parse_url(o.urls[0], u), "");
  std::string r = build_request(o, u, "", false);
  EXPECT_EQ(r,
            "GET /p HTTP/1.1\r\nHost: h:8080\r\nUser-Agent: peregrine-bench/0.1\r\nAccept: */*\r\n"
            "Connection: close\r\n\r\n");
  ASSERT_EQ(Parse({"-k", "--http1.0", "-H", "Host: other", "-H", "user-agent: me", "-A", "a:b",
                   "-X", "proxy:3128", "--proxy-auth", "p:q", "http://h/p"},
                  o),
            "");
  r = build_request(o, u, "", true);
  EXPECT_EQ(r.rfind("GET http://h:8080/p HTTP/1.0\r\n", 0), 0u) << r;
  EXPECT_EQ(r.find("Host: h"), std::string::npos);
  EXPECT_NE(r.find("Host: other\r\n"), std::string::npos);
  EXPECT_EQ(r.find("User-Agent: peregrine"), std::string::npos);
  EXPECT_NE(r.find("Connection: keep-alive\r\n"), std::string::npos);
  EXPECT_NE(r.find("Authorization: Basic YTpi\r\n"), std::string::npos);
  EXPECT_NE(r.find("Proxy-Authorization: Basic cDpx\r\n"), std::string::npos);
  ASSERT_EQ(Parse({"-k", "-p", "body.json", "-T", "application/json", "-C", "a=1", "-C", "b=2",
                   "http://h/"},
                  o),
            "");
  EXPECT_EQ(o.effective_method(), "POST");
  r = build_request(o, u, "{}", false);
  EXPECT_NE(r.find("POST /p HTTP/1.1\r\n"), std::string::npos);
  EXPECT_NE(r.find("Content-Type: application/json\r\nContent-Length: 2\r\n"), std::string::npos);
  EXPECT_NE(r.find("Cookie: a=1; b=2\r\n"), std::string::npos);
  EXPECT_EQ(r.find("Connection:"), std::string::npos);
  EXPECT_EQ(r.substr(r.size() - 6), "\r\n\r\n{}");
  ASSERT_EQ(Parse({"-i", "-m", "PURGE", "http://h/"}, o), "");
  EXPECT_EQ(o.effective_method(), "PURGE");
}

TEST(BenchOptions, H2StreamsFromDashMLikeH2load) {
  Options o;
  ASSERT_EQ(Parse({"--h2", "-m", "10", "-c", "100", "-n", "1000", "https://h/"}, o), "");
  EXPECT_TRUE(o.h2);
  EXPECT_EQ(o.streams, 10);
  EXPECT_EQ(o.effective_method(), "GET");  // the number was streams, not a method
  EXPECT_TRUE(o.keep_alive);               // an HTTP/2 connection stays open
  // The same with -m before --h2, and with --streams.
  ASSERT_EQ(Parse({"-m10", "--h2", "http://h/"}, o), "");
  EXPECT_EQ(o.streams, 10);
  ASSERT_EQ(Parse({"--h2", "--streams", "7", "http://h/"}, o), "");
  EXPECT_EQ(o.streams, 7);
}

TEST(BenchOptions, DashMStaysAbsMethod) {
  Options o;
  ASSERT_EQ(Parse({"--h2", "-m", "POST", "http://h/"}, o), "");
  EXPECT_EQ(o.effective_method(), "POST");
  EXPECT_EQ(o.streams, 1);
  ASSERT_EQ(Parse({"-m", "PURGE", "http://h/"}, o), "");
  EXPECT_EQ(o.effective_method(), "PURGE");
  EXPECT_FALSE(o.h2);
}

TEST(BenchOptions, H2RefusesWhatItCannotDo) {
  Options o;
  EXPECT_NE(Parse({"--h2", "-P", "4", "http://h/"}, o), "");
  EXPECT_NE(Parse({"--h2", "--http1.0", "http://h/"}, o), "");
  EXPECT_NE(Parse({"--h2", "-X", "p:3128", "http://h/"}, o), "");
  EXPECT_NE(Parse({"--h2", "-R", "100", "http://h/"}, o), "");
  EXPECT_NE(Parse({"--h2", "--streams", "0", "http://h/"}, o), "");
  EXPECT_NE(Parse({"--h2", "-m", "5000", "http://h/"}, o), "");
  EXPECT_NE(Parse({"--streams", "4", "http://h/"}, o), "");  // HTTP/1.1 pipelines with -P
  EXPECT_NE(Parse({"--h2=yes", "http://h/"}, o), "");
}

TEST(BenchOptions, TlsResume) {
  Options o;
  ASSERT_EQ(Parse({"--tls-resume", "-n", "10", "https://h/"}, o), "");
  EXPECT_TRUE(o.tls_resume);
  EXPECT_FALSE(o.keep_alive);  // a new connection per request: what resumption is for
}

TEST(BenchOptions, H2HeadersMatchTheHttp1Request) {
  Options o;
  ASSERT_EQ(Parse({"--h2",
                   "-H",
                   "Host: other.test",
                   "-H",
                   "Connection: keep-alive",
                   "-H",
                   "X-Trace: a b",
                   "-H",
                   "Transfer-Encoding: chunked",
                   "-C",
                   "a=1",
                   "-C",
                   "b=2",
                   "-A",
                   "u:p",
                   "-p",
                   "body.txt",
                   "-T",
                   "application/json",
                   "https://h.test:8443/x?y=1"},
                  o),
            "");
  Url url;
  ASSERT_EQ(parse_url(o.urls[0], url), "");
  auto h = build_h2_headers(o, url, 42);
  std::vector<std::pair<std::string, std::string>> want = {
      {":method", "POST"},
      {":scheme", "https"},
      {":authority", "other.test"},
      {":path", "/x?y=1"},
      {"user-agent", "peregrine-bench/0.1"},
      {"accept", "*/*"},
      {"cookie", "a=1; b=2"},
      {"authorization", "Basic dTpw"},
      {"content-type", "application/json"},
      {"content-length", "42"},
      {"x-trace", "a b"},
  };
  EXPECT_EQ(h, want);
}

TEST(BenchOptions, H2HeadersDefaultAuthorityAndScheme) {
  Options o;
  ASSERT_EQ(Parse({"--h2", "http://127.0.0.1:8080/11.txt"}, o), "");
  Url url;
  ASSERT_EQ(parse_url(o.urls[0], url), "");
  auto h = build_h2_headers(o, url, 0);
  ASSERT_GE(h.size(), 4u);
  EXPECT_EQ(h[0], (std::pair<std::string, std::string>{":method", "GET"}));
  EXPECT_EQ(h[1], (std::pair<std::string, std::string>{":scheme", "http"}));
  EXPECT_EQ(h[2], (std::pair<std::string, std::string>{":authority", "127.0.0.1:8080"}));
  EXPECT_EQ(h[3], (std::pair<std::string, std::string>{":path", "/11.txt"}));
  for (const auto& [name, value] : h) EXPECT_NE(name, "content-length");
}

}  // namespace
}  // namespace peregrine::loadgen
