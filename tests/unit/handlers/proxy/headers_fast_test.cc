// The fast header paths must produce exactly what the general rewrite produces, whenever they
// accept an input; and they must accept the everyday shapes.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "handlers/proxy/headers.h"

namespace peregrine::proxy {
namespace {

constexpr std::string_view kNames[] = {
    "Host",   "X-Forwarded-For", "X-Forwarded-Proto", "X-Forwarded-Host", "X-Real-IP",
    "Accept", "User-Agent",      "Connection",        "Keep-Alive",       "Upgrade",
    "TE",     "close",           "Forwarded",         "Location",         "Refresh",
    "Cookie", "x-forwarded-for", "Proxy-Connection",  "Trailer",          "X-Custom"};
constexpr std::string_view kValues[] = {"",
                                        "close",
                                        "keep-alive",
                                        "X-Custom",
                                        "a, b",
                                        " 10.0.0.1 ",
                                        "example.com",
                                        "http://up:8080/x",
                                        "5; url=http://up:8080/",
                                        "close, X-Custom",
                                        "websocket",
                                        "Keep-Alive, close"};

struct Rng {
  uint64_t x = 0x9E3779B97F4A7C15ull;
  uint64_t next() {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x;
  }
  size_t below(size_t n) { return static_cast<size_t>(next() % n); }
};

std::vector<HeaderView> random_headers(Rng& rng) {
  std::vector<HeaderView> in;
  size_t n = rng.below(7);
  for (size_t i = 0; i < n; ++i)
    in.push_back({kNames[rng.below(std::size(kNames))], kValues[rng.below(std::size(kValues))]});
  return in;
}

TEST(ProxyHeadersFast, RequestMatchesTheGeneralPathWheneverItApplies) {
  Rng rng;
  int accepted = 0;
  for (int i = 0; i < 20000; ++i) {
    std::vector<HeaderView> in = random_headers(rng);
    RequestOptions options;
    options.host_mode = static_cast<HostMode>(rng.below(3));
    options.fixed_host = rng.below(4) ? "fixed.example" : "";
    options.forwarding.x_forwarded_for = rng.below(4) != 0;
    options.forwarding.x_forwarded_proto = rng.below(4) != 0;
    options.forwarding.x_forwarded_host = rng.below(4) != 0;
    options.forwarding.x_real_ip = rng.below(4) != 0;
    options.forwarding.forwarded = rng.below(8) == 0;
    if (rng.below(8) == 0) options.rules.add.push_back({"X-Added", "1"});
    RequestContext context;
    context.client_ip = rng.below(6) ? "127.0.0.1" : "";
    context.scheme = rng.below(6) ? "http" : "";
    context.upstream_host = rng.below(6) ? "up:8080" : "";
    context.tunnel = rng.below(10) == 0;

    std::string fast = "prefix\r\n";
    if (!append_request_headers_fast(fast, in, context, options)) {
      EXPECT_EQ(fast, "prefix\r\n") << "a refusal must leave the output untouched";
      continue;
    }
    ++accepted;
    std::string general = "prefix\r\n";
    append_header_block(general, rewrite_request_headers(in, context, options));
    ASSERT_EQ(fast, general) << "case " << i;
  }
  EXPECT_GT(accepted, 5000);
}

TEST(ProxyHeadersFast, ResponseMatchesTheGeneralPathWheneverItApplies) {
  Rng rng;
  int accepted = 0;
  for (int i = 0; i < 20000; ++i) {
    std::vector<HeaderView> in = random_headers(rng);
    ResponseOptions options;
    if (rng.below(2)) {
      options.upstream_origin = "http://up:8080";
      options.client_origin = "http://example.com";
    }
    options.rewrite_location = rng.below(4) != 0;
    options.rewrite_refresh = rng.below(4) != 0;
    if (rng.below(8) == 0) options.rules.remove.push_back("Cookie");
    bool tunnel = rng.below(10) == 0;
    std::string fast;
    if (!append_response_headers_fast(fast, in, options, tunnel)) {
      EXPECT_EQ(fast, "");
      continue;
    }
    ++accepted;
    std::string general;
    append_header_block(general, rewrite_response_headers(in, options, tunnel));
    ASSERT_EQ(fast, general) << "case " << i;
  }
  EXPECT_GT(accepted, 5000);
}

TEST(ProxyHeadersFast, EverydayShapesTakeTheFastPath) {
  const std::vector<HeaderView> request = {
      {"Host", "example.com"}, {"User-Agent", "wrk"}, {"Connection", "keep-alive"}};
  RequestContext context{"10.1.2.3", "http", "127.0.0.1:8080", false};
  std::string out;
  ASSERT_TRUE(append_request_headers_fast(out, request, context, RequestOptions{}));
  EXPECT_EQ(out,
            "Host: example.com\r\nUser-Agent: wrk\r\nX-Forwarded-For: 10.1.2.3\r\n"
            "X-Forwarded-Proto: http\r\nX-Forwarded-Host: example.com\r\nX-Real-IP: 10.1.2.3\r\n");

  const std::vector<HeaderView> response = {{"Content-Type", "text/html"},
                                            {"Connection", "keep-alive"},
                                            {"ETag", "\"5f-29\""},
                                            {"Keep-Alive", "timeout=5"}};
  ResponseOptions options;
  options.upstream_origin = "http://127.0.0.1:8080";
  options.client_origin = "http://example.com";
  out.clear();
  ASSERT_TRUE(append_response_headers_fast(out, response, options));
  EXPECT_EQ(out, "Content-Type: text/html\r\nETag: \"5f-29\"\r\n");
}

}  // namespace
}  // namespace peregrine::proxy
