#include "upstream/balancer.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

namespace peregrine::upstream {
namespace {

PickContext ctx(std::string_view ip, std::string_view key, int64_t now = 0) {
  PickContext c;
  c.now_ms = now;
  c.client_ip = ip;
  c.hash_key = key;
  return c;
}
PickContext ip_ctx(std::string_view ip) {
  return ctx(ip, "");
}
PickContext key_ctx(std::string_view key) {
  return ctx("", key);
}
PickContext at(int64_t now) {
  return ctx("", "", now);
}

std::vector<ServerSpec> servers(std::vector<int> weights) {
  std::vector<ServerSpec> out;
  for (size_t i = 0; i < weights.size(); ++i) {
    ServerSpec s;
    s.address = "10.0.0." + std::to_string(i + 1) + ":8080";
    s.weight = weights[i];
    out.push_back(s);
  }
  return out;
}

std::vector<size_t> picks(Upstream& up, int n, const PickContext& ctx = {}) {
  std::vector<size_t> out;
  for (int i = 0; i < n; ++i) {
    std::optional<size_t> p = up.pick(ctx);
    EXPECT_TRUE(p.has_value());
    out.push_back(p.value_or(SIZE_MAX));
  }
  return out;
}

std::map<size_t, int> count(const std::vector<size_t>& v) {
  std::map<size_t, int> m;
  for (size_t i : v) ++m[i];
  return m;
}

// ---- hashing ---------------------------------------------------------------------------------

TEST(BalancerHash, StableAndSpread) {
  EXPECT_EQ(hash64("abc"), hash64("abc"));
  EXPECT_NE(hash64("abc"), hash64("abd"));
  EXPECT_NE(hash64(""), hash64("a"));
  // Nearby keys land in different halves of the range reasonably often.
  int high = 0;
  for (int i = 0; i < 1000; ++i) high += hash64("/page/" + std::to_string(i)) >> 63;
  EXPECT_GT(high, 400);
  EXPECT_LT(high, 600);
}

TEST(BalancerHash, IpHashKey) {
  EXPECT_EQ(ip_hash_key("192.168.1.7"), ip_hash_key("192.168.1.200"));
  EXPECT_NE(ip_hash_key("192.168.1.7"), ip_hash_key("192.168.2.7"));
  EXPECT_EQ(ip_hash_key("192.168.1.7").size(), 3u);
  EXPECT_EQ(ip_hash_key("2001:db8:1:2::1"), ip_hash_key("2001:db8:1:2:ffff::9"));
  EXPECT_NE(ip_hash_key("2001:db8:1:2::1"), ip_hash_key("2001:db8:1:3::1"));
  EXPECT_EQ(ip_hash_key("2001:db8::1").size(), 8u);
  EXPECT_EQ(ip_hash_key("::ffff:192.168.1.7"), ip_hash_key("192.168.1.99"));
  EXPECT_EQ(ip_hash_key("not an ip"), "not an ip");
}

// ---- smooth weighted round robin -------------------------------------------------------------

TEST(BalancerRoundRobin, EqualWeightsRotate) {
  Upstream up(servers({1, 1, 1}), Strategy::kRoundRobin);
  EXPECT_EQ(picks(up, 6), (std::vector<size_t>{0, 1, 2, 0, 1, 2}));
}

TEST(BalancerRoundRobin, SmoothSequenceFiveOneOne) {
  Upstream up(servers({5, 1, 1}), Strategy::kRoundRobin);
  // The classic smooth sequence: a a b a c a a.
  EXPECT_EQ(picks(up, 7), (std::vector<size_t>{0, 0, 1, 0, 2, 0, 0}));
}

TEST(BalancerRoundRobin, ExactProportionsEveryCycle) {
  Upstream up(servers({5, 1, 1}), Strategy::kRoundRobin);
  for (int cycle = 0; cycle < 100; ++cycle) {
    std::map<size_t, int> c = count(picks(up, 7));
    EXPECT_EQ(c[0], 5);
    EXPECT_EQ(c[1], 1);
    EXPECT_EQ(c[2], 1);
  }
}

TEST(BalancerRoundRobin, HeavyServerRunsAreShort) {
  // Weights 5:1:1 over 7 slots: the heavy server appears at most twice in a row within a cycle
  // and, across the cycle boundary, at most 4 times (a a | a a ... never more).
  Upstream up(servers({5, 1, 1}), Strategy::kRoundRobin);
  std::vector<size_t> v = picks(up, 700);
  int run = 0, longest = 0;
  for (size_t i : v) {
    run = i == 0 ? run + 1 : 0;
    longest = std::max(longest, run);
  }
  EXPECT_LE(longest, 4);
  // Light servers never come twice in a row.
  for (size_t k = 1; k < v.size(); ++k)
    if (v[k] != 0) {
      EXPECT_NE(v[k], v[k - 1]);
    }
}

TEST(BalancerRoundRobin, InterleavesEqualHeavyServers) {
  Upstream up(servers({3, 3, 1}), Strategy::kRoundRobin);
  std::vector<size_t> v = picks(up, 700);
  std::map<size_t, int> c = count(v);
  EXPECT_EQ(c[0], 300);
  EXPECT_EQ(c[1], 300);
  EXPECT_EQ(c[2], 100);
  for (size_t k = 2; k < v.size(); ++k)
    EXPECT_FALSE(v[k] == v[k - 1] && v[k] == v[k - 2]) << "three in a row at " << k;
}

TEST(BalancerRoundRobin, ManyPicksMatchWeights) {
  Upstream up(servers({4, 2, 1, 3}), Strategy::kRoundRobin);
  std::map<size_t, int> c = count(picks(up, 10000));
  EXPECT_EQ(c[0], 4000);
  EXPECT_EQ(c[1], 2000);
  EXPECT_EQ(c[2], 1000);
  EXPECT_EQ(c[3], 3000);
}

TEST(BalancerRoundRobin, SkipsDownServer) {
  Upstream up(servers({1, 1, 1}), Strategy::kRoundRobin);
  up.group().set_probe_up(1, false);
  std::map<size_t, int> c = count(picks(up, 100));
  EXPECT_EQ(c[1], 0);
  EXPECT_EQ(c[0], 50);
  EXPECT_EQ(c[2], 50);
}

TEST(BalancerRoundRobin, ZeroWeightTreatedAsOne) {
  Upstream up(servers({0, 1}), Strategy::kRoundRobin);
  EXPECT_EQ(up.group().spec(0).weight, 1);
  std::map<size_t, int> c = count(picks(up, 10));
  EXPECT_EQ(c[0], 5);
}

// ---- least connections -------------------------------------------------------------------------

TEST(BalancerLeastConn, PrefersFewestActive) {
  Upstream up(servers({1, 1, 1}), Strategy::kLeastConnections);
  up.group().on_connect(0);
  up.group().on_connect(0);
  up.group().on_connect(2);
  EXPECT_EQ(up.pick({}), 1u);
}

TEST(BalancerLeastConn, TiesGoRoundRobin) {
  Upstream up(servers({1, 1, 1}), Strategy::kLeastConnections);
  EXPECT_EQ(picks(up, 6), (std::vector<size_t>{0, 1, 2, 0, 1, 2}));
}

TEST(BalancerLeastConn, WeightedByCapacity) {
  Upstream up(servers({3, 1}), Strategy::kLeastConnections);
  // Simulate long requests: every pick stays connected.
  std::map<size_t, int> c;
  for (int i = 0; i < 8; ++i) {
    size_t p = *up.pick({});
    up.group().on_connect(p);
    ++c[p];
  }
  EXPECT_EQ(c[0], 6);
  EXPECT_EQ(c[1], 2);
}

TEST(BalancerLeastConn, OneSlowServerGetsLess) {
  // Server 2 is slow: its requests hold a connection for 10 ticks, the others for 1.
  Upstream up(servers({1, 1, 1}), Strategy::kLeastConnections);
  std::vector<std::pair<int, size_t>> in_flight;  // (finish tick, server)
  std::map<size_t, int> c;
  for (int tick = 0; tick < 3000; ++tick) {
    std::erase_if(in_flight, [&](const auto& f) {
      if (f.first > tick) return false;
      up.group().on_release(f.second);
      return true;
    });
    for (int r = 0; r < 3; ++r) {  // three new requests per tick
      size_t p = *up.pick({});
      up.group().on_connect(p);
      ++c[p];
      in_flight.push_back({tick + (p == 2 ? 10 : 1), p});
    }
  }
  EXPECT_LT(c[2] * 3, c[0]);
  EXPECT_LT(c[2] * 3, c[1]);
  EXPECT_NEAR(c[0], c[1], c[0] / 10);
}

TEST(BalancerLeastConn, ReleaseNeverNegative) {
  Upstream up(servers({1}), Strategy::kLeastConnections);
  up.group().on_release(0);
  EXPECT_EQ(up.group().active(0), 0);
}

// ---- client-IP hash
// ------------------------------------------------------------------------------

TEST(BalancerIpHash, Sticky) {
  Upstream up(servers({1, 1, 1, 1}), Strategy::kIpHash);
  for (int i = 0; i < 50; ++i) {
    std::string ip = "203.0." + std::to_string(i) + ".9";
    size_t first = *up.pick(ip_ctx(ip));
    for (int k = 0; k < 5; ++k) EXPECT_EQ(up.pick(ip_ctx(ip)), first);
  }
}

TEST(BalancerIpHash, SameSlash24SameServer) {
  Upstream up(servers({1, 1, 1, 1, 1}), Strategy::kIpHash);
  size_t a = *up.pick(ip_ctx("198.51.100.1"));
  for (int last = 2; last < 255; last += 17)
    EXPECT_EQ(up.pick(ip_ctx("198.51.100." + std::to_string(last))), a);
  size_t b = *up.pick(ip_ctx("2001:db8:aa:bb::1"));
  EXPECT_EQ(up.pick(ip_ctx("2001:db8:aa:bb:1:2:3:4")), b);
}

TEST(BalancerIpHash, SpreadsClients) {
  Upstream up(servers({1, 1, 1, 1}), Strategy::kIpHash);
  std::map<size_t, int> c;
  for (int i = 0; i < 4000; ++i)
    ++c[*up.pick(ip_ctx("10." + std::to_string(i / 256) + "." + std::to_string(i % 256) + ".1"))];
  for (size_t s = 0; s < 4; ++s) {
    EXPECT_GT(c[s], 800) << s;
    EXPECT_LT(c[s], 1200) << s;
  }
}

TEST(BalancerIpHash, DownServerSkippedDeterministically) {
  Upstream up(servers({1, 1, 1}), Strategy::kIpHash);
  std::map<std::string, size_t> before;
  for (int i = 0; i < 300; ++i) {
    std::string ip = "172.16." + std::to_string(i) + ".1";
    before[ip] = *up.pick(ip_ctx(ip));
  }
  up.group().set_probe_up(1, false);
  for (const auto& [ip, server] : before) {
    size_t now = *up.pick(ip_ctx(ip));
    EXPECT_NE(now, 1u);
    if (server != 1) {
      EXPECT_EQ(now, server) << ip;  // clients of healthy servers stay put
    }
    EXPECT_EQ(up.pick(ip_ctx(ip)), now);  // and the fallback is stable
  }
}

// ---- consistent hash --------------------------------------------------------------------------

std::vector<ServerSpec> named(int n) {
  std::vector<ServerSpec> out;
  for (int i = 0; i < n; ++i) {
    ServerSpec s;
    s.address = "app" + std::to_string(i) + ":8080";
    out.push_back(s);
  }
  return out;
}

TEST(BalancerConsistentHash, Sticky) {
  Upstream up(named(5), Strategy::kConsistentHash);
  for (int i = 0; i < 100; ++i) {
    std::string key = "/item/" + std::to_string(i);
    size_t s = *up.pick(key_ctx(key));
    EXPECT_EQ(up.pick(key_ctx(key)), s);
  }
}

TEST(BalancerConsistentHash, Balanced) {
  Upstream up(named(4), Strategy::kConsistentHash);
  std::map<size_t, int> c;
  for (int i = 0; i < 20000; ++i) ++c[*up.pick(key_ctx("k" + std::to_string(i)))];
  for (size_t s = 0; s < 4; ++s) {
    EXPECT_GT(c[s], 4000) << s;
    EXPECT_LT(c[s], 6000) << s;
  }
}

TEST(BalancerConsistentHash, WeightScalesShare) {
  std::vector<ServerSpec> specs = named(2);
  specs[0].weight = 3;
  Upstream up(specs, Strategy::kConsistentHash);
  std::map<size_t, int> c;
  for (int i = 0; i < 20000; ++i) ++c[*up.pick(key_ctx("k" + std::to_string(i)))];
  EXPECT_GT(c[0], 13500);
  EXPECT_LT(c[0], 16500);
}

TEST(BalancerConsistentHash, MinimalRemappingWhenServerDown) {
  Upstream up(named(5), Strategy::kConsistentHash);
  std::vector<size_t> before;
  for (int i = 0; i < 5000; ++i) before.push_back(*up.pick(key_ctx(std::to_string(i))));
  up.group().set_probe_up(3, false);
  int moved = 0;
  for (int i = 0; i < 5000; ++i) {
    size_t now = *up.pick(key_ctx(std::to_string(i)));
    EXPECT_NE(now, 3u);
    if (before[i] != 3) {
      EXPECT_EQ(now, before[i]);
    } else {
      ++moved;
    }
  }
  EXPECT_GT(moved, 700);  // about a fifth moved, and only those
  EXPECT_LT(moved, 1300);
  // Back up: every key returns to its original server.
  up.group().set_probe_up(3, true);
  for (int i = 0; i < 5000; ++i) EXPECT_EQ(up.pick(key_ctx(std::to_string(i))), before[i]);
}

TEST(BalancerConsistentHash, MovedKeysSpreadOverSurvivors) {
  Upstream up(named(4), Strategy::kConsistentHash);
  up.group().set_probe_up(0, false);
  std::map<size_t, int> c;
  for (int i = 0; i < 8000; ++i) ++c[*up.pick(key_ctx("x" + std::to_string(i)))];
  EXPECT_EQ(c.count(0), 0u);
  for (size_t s = 1; s < 4; ++s) EXPECT_GT(c[s], 2000) << s;
}

TEST(BalancerConsistentHash, IndependentOfServerOrder) {
  // The ring is keyed by address, so listing servers in another order maps keys to the same
  // addresses.
  std::vector<ServerSpec> a = named(3);
  std::vector<ServerSpec> b = {a[2], a[0], a[1]};
  Upstream ua(a, Strategy::kConsistentHash);
  Upstream ub(b, Strategy::kConsistentHash);
  for (int i = 0; i < 200; ++i) {
    std::string key = "k" + std::to_string(i);
    EXPECT_EQ(ua.group().spec(*ua.pick(key_ctx(key))).address,
              ub.group().spec(*ub.pick(key_ctx(key))).address);
  }
}

// ---- backup servers
// ------------------------------------------------------------------------------

std::vector<ServerSpec> with_backup() {
  std::vector<ServerSpec> s = servers({1, 1, 1});
  s[2].backup = true;
  return s;
}

TEST(BalancerBackup, UnusedWhilePrimaryUp) {
  for (Strategy st : {Strategy::kRoundRobin, Strategy::kLeastConnections, Strategy::kIpHash,
                      Strategy::kConsistentHash}) {
    Upstream up(with_backup(), st);
    for (int i = 0; i < 100; ++i)
      EXPECT_NE(up.pick(ctx("10.1." + std::to_string(i) + ".1", std::to_string(i))), 2u);
    up.group().set_probe_up(0, false);
    for (int i = 0; i < 100; ++i)
      EXPECT_EQ(up.pick(ctx("10.1." + std::to_string(i) + ".1", std::to_string(i))), 1u);
  }
}

TEST(BalancerBackup, UsedWhenAllPrimariesDown) {
  for (Strategy st : {Strategy::kRoundRobin, Strategy::kLeastConnections, Strategy::kIpHash,
                      Strategy::kConsistentHash}) {
    Upstream up(with_backup(), st);
    up.group().set_probe_up(0, false);
    up.group().set_probe_up(1, false);
    EXPECT_EQ(up.pick(ctx("10.0.0.1", "k")), 2u);
    up.group().set_probe_up(1, true);
    EXPECT_EQ(up.pick(ctx("10.0.0.1", "k")), 1u);
  }
}

TEST(BalancerBackup, WeightedAmongBackups) {
  std::vector<ServerSpec> s = servers({1, 2, 1});
  s[1].backup = s[2].backup = true;
  Upstream up(s, Strategy::kRoundRobin);
  up.group().set_probe_up(0, false);
  std::map<size_t, int> c = count(picks(up, 300));
  EXPECT_EQ(c[1], 200);
  EXPECT_EQ(c[2], 100);
}

TEST(BalancerBackup, NoneWhenEverythingDown) {
  Upstream up(with_backup(), Strategy::kRoundRobin);
  for (size_t i = 0; i < 3; ++i) up.group().set_probe_up(i, false);
  EXPECT_EQ(up.pick({}), std::nullopt);
}

TEST(BalancerBackup, EmptyGroupPicksNone) {
  Upstream up({}, Strategy::kRoundRobin);
  EXPECT_EQ(up.pick({}), std::nullopt);
}

// ---- passive health
// ------------------------------------------------------------------------------

TEST(BalancerHealth, MaxFailsWithinWindowMarksDown) {
  std::vector<ServerSpec> s = servers({1, 1});
  s[0].max_fails = 3;
  s[0].fail_timeout_ms = 10'000;
  Group g(s);
  EXPECT_FALSE(g.report_failure(0, 1000));
  EXPECT_FALSE(g.report_failure(0, 2000));
  EXPECT_TRUE(g.is_up(0, 2000));
  EXPECT_TRUE(g.report_failure(0, 3000));  // third failure: down
  EXPECT_FALSE(g.is_up(0, 3000));
  EXPECT_FALSE(g.is_up(0, 12'999));
  EXPECT_TRUE(g.is_up(0, 13'000));  // fail_timeout later it is back
  EXPECT_TRUE(g.is_up(1, 3000));
}

TEST(BalancerHealth, FailuresOutsideWindowDoNotAccumulate) {
  std::vector<ServerSpec> s = servers({1});
  s[0].max_fails = 2;
  s[0].fail_timeout_ms = 1000;
  Group g(s);
  EXPECT_FALSE(g.report_failure(0, 0));
  EXPECT_FALSE(g.report_failure(0, 1500));  // the window expired: a new count starts
  EXPECT_TRUE(g.is_up(0, 1500));
  EXPECT_TRUE(g.report_failure(0, 2000));
  EXPECT_FALSE(g.is_up(0, 2000));
}

TEST(BalancerHealth, SuccessClearsCount) {
  std::vector<ServerSpec> s = servers({1});
  s[0].max_fails = 2;
  Group g(s);
  g.report_failure(0, 0);
  g.report_success(0);
  EXPECT_EQ(g.fails(0), 0);
  EXPECT_FALSE(g.report_failure(0, 10));
  EXPECT_TRUE(g.is_up(0, 10));
}

TEST(BalancerHealth, FailuresWhileDownDoNotExtend) {
  std::vector<ServerSpec> s = servers({1});
  s[0].fail_timeout_ms = 1000;
  Group g(s);
  EXPECT_TRUE(g.report_failure(0, 0));  // max_fails defaults to 1
  EXPECT_FALSE(g.report_failure(0, 500));
  EXPECT_EQ(g.down_until(0), 1000);
  EXPECT_TRUE(g.is_up(0, 1000));
}

TEST(BalancerHealth, MaxFailsZeroNeverDown) {
  std::vector<ServerSpec> s = servers({1});
  s[0].max_fails = 0;
  Group g(s);
  for (int i = 0; i < 100; ++i) EXPECT_FALSE(g.report_failure(0, i));
  EXPECT_TRUE(g.is_up(0, 100));
}

TEST(BalancerHealth, ProbeDownOverridesPassive) {
  Group g(servers({1}));
  g.set_probe_up(0, false);
  EXPECT_FALSE(g.is_up(0, 1'000'000));
  g.set_probe_up(0, true);
  EXPECT_TRUE(g.is_up(0, 0));
}

TEST(BalancerHealth, TimelineThroughPicks) {
  std::vector<ServerSpec> s = servers({1, 1});
  for (ServerSpec& sp : s) {
    sp.max_fails = 2;
    sp.fail_timeout_ms = 5000;
  }
  Upstream up(s, Strategy::kRoundRobin);
  up.group().report_failure(1, 100);
  up.group().report_failure(1, 200);  // server 1 down until 5200
  for (int64_t t : {300, 1000, 5199}) EXPECT_EQ(up.pick(at(t)), 0u) << t;
  std::map<size_t, int> c;
  for (int i = 0; i < 10; ++i) ++c[*up.pick(at(5200))];
  EXPECT_EQ(c[1], 5);
  // Both down: none (502), until the first comes back.
  up.group().report_failure(0, 6000);
  up.group().report_failure(0, 6001);
  up.group().report_failure(1, 6000);
  up.group().report_failure(1, 6001);
  EXPECT_EQ(up.pick(at(6002)), std::nullopt);
  EXPECT_TRUE(up.pick(at(11'001)).has_value());
}

// ---- retries
// -------------------------------------------------------------------------------------

TEST(BalancerRetry, TriedSetBasics) {
  TriedSet t(3);
  EXPECT_EQ(t.count(), 0u);
  t.insert(2);
  t.insert(100);  // grows on demand
  EXPECT_TRUE(t.contains(2));
  EXPECT_TRUE(t.contains(100));
  EXPECT_FALSE(t.contains(1));
  EXPECT_FALSE(t.contains(1000));
  EXPECT_EQ(t.count(), 2u);
  t.clear();
  EXPECT_EQ(t.count(), 0u);
  for (size_t i : {0, 63, 64, 127, 128, 200}) t.insert(i);  // the inline word's edges
  for (size_t i : {0, 63, 64, 127, 128, 200}) EXPECT_TRUE(t.contains(i)) << i;
  for (size_t i : {1, 62, 65, 126, 129, 199}) EXPECT_FALSE(t.contains(i)) << i;
  EXPECT_EQ(t.count(), 6u);
  TriedSet copy = t;
  copy.clear();
  EXPECT_EQ(copy.count(), 0u);
  EXPECT_EQ(t.count(), 6u);
}

TEST(BalancerRetry, ExcludesTriedUntilExhausted) {
  for (Strategy st : {Strategy::kRoundRobin, Strategy::kLeastConnections, Strategy::kIpHash,
                      Strategy::kConsistentHash}) {
    Upstream up(servers({1, 2, 3, 1}), st);
    PickContext c = ctx("192.0.2.10", "/a");
    TriedSet tried(up.size());
    std::set<size_t> seen;
    for (int i = 0; i < 4; ++i) {
      std::optional<size_t> p = up.pick_excluding(c, tried);
      ASSERT_TRUE(p.has_value());
      EXPECT_FALSE(tried.contains(*p));
      tried.insert(*p);
      seen.insert(*p);
    }
    EXPECT_EQ(seen.size(), 4u);
    EXPECT_EQ(up.pick_excluding(c, tried), std::nullopt);
  }
}

TEST(BalancerRetry, SkipsDownAndTried) {
  Upstream up(servers({1, 1, 1}), Strategy::kRoundRobin);
  up.group().set_probe_up(0, false);
  TriedSet tried(3);
  tried.insert(1);
  EXPECT_EQ(up.pick_excluding({}, tried), 2u);
  tried.insert(2);
  EXPECT_EQ(up.pick_excluding({}, tried), std::nullopt);
}

TEST(BalancerRetry, FallsBackToBackupAfterPrimariesTried) {
  Upstream up(with_backup(), Strategy::kRoundRobin);
  TriedSet tried(3);
  tried.insert(0);
  tried.insert(1);
  EXPECT_EQ(up.pick_excluding({}, tried), 2u);
}

TEST(BalancerRetry, ConsistentHashRetryIsNextOnRing) {
  // The retry target for a key is the server its key would move to if the first were down.
  Upstream up(named(5), Strategy::kConsistentHash);
  for (int i = 0; i < 50; ++i) {
    std::string key = "r" + std::to_string(i);
    size_t first = *up.pick(key_ctx(key));
    TriedSet tried(5);
    tried.insert(first);
    size_t retry = *up.pick_excluding(key_ctx(key), tried);
    up.group().set_probe_up(first, false);
    EXPECT_EQ(up.pick(key_ctx(key)), retry);
    up.group().set_probe_up(first, true);
  }
}

}  // namespace
}  // namespace peregrine::upstream
