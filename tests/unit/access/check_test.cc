#include "access/check.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include "access/config.h"
#include "access/limit_table.h"

namespace peregrine::access {
namespace {

struct Peer {
  sockaddr_storage storage{};
  explicit Peer(const char* ip) {
    auto* v4 = reinterpret_cast<sockaddr_in*>(&storage);
    auto* v6 = reinterpret_cast<sockaddr_in6*>(&storage);
    if (inet_pton(AF_INET, ip, &v4->sin_addr) == 1) {
      v4->sin_family = AF_INET;
    } else {
      EXPECT_EQ(inet_pton(AF_INET6, ip, &v6->sin6_addr), 1) << ip;
      v6->sin6_family = AF_INET6;
    }
  }
  const sockaddr* sa() const { return reinterpret_cast<const sockaddr*>(&storage); }
};

Rule rule(bool allow, const char* network) {
  Rule r;
  r.allow = allow;
  if (std::string_view(network) == "all") {
    r.all = true;
  } else {
    std::string error;
    r.network = *Cidr::parse(network, &error);
  }
  return r;
}

TEST(AccessRules, FirstMatchWins) {
  std::vector<Rule> rules = {rule(false, "10.1.0.0/16"), rule(true, "10.0.0.0/8"),
                             rule(true, "::1"), rule(false, "all")};
  EXPECT_TRUE(allowed(rules, Peer("10.2.3.4").sa()));
  EXPECT_FALSE(allowed(rules, Peer("10.1.3.4").sa()));
  EXPECT_FALSE(allowed(rules, Peer("192.0.2.1").sa()));
  EXPECT_TRUE(allowed(rules, Peer("::1").sa()));
  EXPECT_FALSE(allowed(rules, Peer("::2").sa()));
  EXPECT_TRUE(allowed(rules, Peer("::ffff:10.9.9.9").sa())) << "IPv4-mapped";
  EXPECT_FALSE(allowed(rules, Peer("::ffff:10.1.9.9").sa()));
  EXPECT_TRUE(allowed({}, Peer("192.0.2.1").sa())) << "no rules: allowed";
  EXPECT_TRUE(allowed({rule(false, "10.0.0.0/8")}, Peer("192.0.2.1").sa())) << "no match";
  EXPECT_TRUE(allowed(rules, nullptr)) << "unix-socket peers are not judged by address";
}

std::shared_ptr<Limit> rate_limit(const char* rate, uint32_t burst, bool delay) {
  auto limit = std::make_shared<Limit>();
  limit->name = "test";
  EXPECT_TRUE(parse_rate(rate, &limit->interval_us));
  limit->burst = burst;
  limit->delay = delay;
  limit->table = std::make_shared<LimitTable>(256);
  return limit;
}

TEST(AccessCheck, DenyComesBeforeTheLimit) {
  Options options;
  options.rules = {rule(false, "192.0.2.0/24")};
  options.limits = {rate_limit("1r/s", 0, false)};
  Peer denied("192.0.2.7"), other("198.51.100.1");
  Request request;
  request.peer = denied.sa();
  EXPECT_EQ(check(options, request, 1'000'000).status, 403);
  EXPECT_EQ(check(options, request, 1'000'000).status, 403) << "the bucket was not touched";
  request.peer = other.sa();
  EXPECT_EQ(check(options, request, 1'000'000).status, 0);
  Decision refused = check(options, request, 1'000'000);
  EXPECT_EQ(refused.status, 429);
  EXPECT_EQ(refused.retry_after_s, 1u);
}

TEST(AccessCheck, DelayModeDelaysWithinTheBurst) {
  Options options;
  options.limits = {rate_limit("10r/s", 2, true)};
  Peer peer("198.51.100.1");
  Request request;
  request.peer = peer.sa();
  EXPECT_EQ(check(options, request, 1'000'000).delay_ms, 0);
  EXPECT_EQ(check(options, request, 1'000'000).delay_ms, 100);
  EXPECT_EQ(check(options, request, 1'000'000).delay_ms, 200);
  EXPECT_EQ(check(options, request, 1'000'000).status, 429);
}

TEST(AccessCheck, KeysFromHeaderAndCookie) {
  auto by_header = rate_limit("1r/s", 0, false);
  by_header->key = KeyKind::kHeader;
  by_header->key_name = "x-api-key";
  auto by_cookie = rate_limit("1r/s", 0, false);
  by_cookie->key = KeyKind::kCookie;
  by_cookie->key_name = "session";
  Request request;
  Peer peer("198.51.100.1");
  request.peer = peer.sa();
  request.headers[0] = {"X-Api-Key", "abc"};
  request.headers[1] = {"Cookie", "theme=dark; session=\"s1\"; x=y"};
  request.header_count = 2;
  char buffer[16];
  EXPECT_EQ(key_of(*by_header, request, buffer), "abc");
  EXPECT_EQ(key_of(*by_cookie, request, buffer), "s1");
  request.header_count = 0;
  EXPECT_EQ(key_of(*by_header, request, buffer), "") << "no key: not limited";
  Options options;
  options.limits = {by_header};
  for (int i = 0; i < 5; ++i) EXPECT_EQ(check(options, request, 1'000'000).status, 0);
}

TEST(AccessCheck, MappedAndPlainIpv4ShareAKey) {
  Limit limit;
  Peer plain("10.0.0.1"), mapped("::ffff:10.0.0.1");
  Request a, b;
  a.peer = plain.sa();
  b.peer = mapped.sa();
  char x[16], y[16];
  EXPECT_EQ(key_of(limit, a, x), key_of(limit, b, y));
}

TEST(AccessCheck, ConnectionCountsReleaseWithTheirOwner) {
  auto limit = std::make_shared<Limit>();
  limit->connections_limit = true;
  limit->max_connections = 1;
  limit->status = 503;
  limit->table = std::make_shared<LimitTable>(64);
  Options options;
  options.limits = {limit};
  Peer peer("10.0.0.1");
  Request request;
  request.peer = peer.sa();
  std::unique_ptr<ConnectionCount> first, second;
  EXPECT_EQ(count_connection(options, request, 1, &first), 0);
  EXPECT_EQ(count_connection(options, request, 1, &second), 503);
  first.reset();
  EXPECT_EQ(count_connection(options, request, 1, &second), 0);
}

TEST(AccessRate, Parse) {
  int64_t us = 0;
  EXPECT_TRUE(parse_rate("5r/s", &us));
  EXPECT_EQ(us, 200'000);
  EXPECT_TRUE(parse_rate("30r/m", &us));
  EXPECT_EQ(us, 2'000'000);
  EXPECT_TRUE(parse_rate("0.5r/s", &us));
  EXPECT_EQ(us, 2'000'000);
  for (const char* bad : {"", "r/s", "0r/s", "-1r/s", "5", "5r/h", "5 r/s", "nanr/s", "2000000r/s"})
    EXPECT_FALSE(parse_rate(bad, &us)) << bad;
}

}  // namespace
}  // namespace peregrine::access

namespace peregrine::access {
namespace {

TEST(AccessDelay, TimerDurationsRoundUpToFewLists) {
  EXPECT_EQ(timer_duration_ms(1), 10);
  EXPECT_EQ(timer_duration_ms(100), 100);
  EXPECT_EQ(timer_duration_ms(101), 150);
  EXPECT_EQ(timer_duration_ms(1000), 1000);
  EXPECT_EQ(timer_duration_ms(1001), 1500);
  EXPECT_EQ(timer_duration_ms(10'001), 15'000);
  for (int64_t d = 1; d < 60'000; d += 7) EXPECT_GE(timer_duration_ms(d), d);
}

}  // namespace
}  // namespace peregrine::access
