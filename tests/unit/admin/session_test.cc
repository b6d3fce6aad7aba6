#include "admin/session.h"

#include <gtest/gtest.h>

namespace peregrine::admin {
namespace {

TEST(AdminHost, LocalNamesAndLiteralsOnly) {
  const std::vector<std::string> names = {"admin.example.com"};
  EXPECT_TRUE(host_allowed("localhost:9090", names));
  EXPECT_TRUE(host_allowed("LOCALHOST", names));
  EXPECT_TRUE(host_allowed("127.0.0.1:9090", names));
  EXPECT_TRUE(host_allowed("10.1.2.3", names));
  EXPECT_TRUE(host_allowed("[::1]:9090", names));
  EXPECT_TRUE(host_allowed("admin.example.com:443", names));
  EXPECT_TRUE(host_allowed("admin.example.com.", names));
  EXPECT_TRUE(host_allowed("", names));
  EXPECT_FALSE(host_allowed("evil.example", names));
  EXPECT_FALSE(host_allowed("localhost.evil.example", names));
  EXPECT_FALSE(host_allowed("127.0.0.1.evil.example", names));
  EXPECT_FALSE(host_allowed("1.2.3", names));
  EXPECT_FALSE(host_allowed("[::1", names));
}

TEST(AdminBearer, ExactTokenOnly) {
  const std::string token = "0123456789abcdef0123";
  EXPECT_TRUE(bearer_matches("Bearer 0123456789abcdef0123", token));
  EXPECT_TRUE(bearer_matches("bearer  0123456789abcdef0123 ", token));
  EXPECT_FALSE(bearer_matches("Bearer 0123456789abcdef012", token));
  EXPECT_FALSE(bearer_matches("Bearer 0123456789abcdef01234", token));
  EXPECT_FALSE(bearer_matches("Bearer 0123456789abcdef0124", token));
  EXPECT_FALSE(bearer_matches("Basic 0123456789abcdef0123", token));
  EXPECT_FALSE(bearer_matches("0123456789abcdef0123", token));
  EXPECT_FALSE(bearer_matches("Bearer ", ""));
}

TEST(AdminSessions, CreatedValidUntilExpiryAndRemoved) {
  SessionTable table;
  const std::string id = table.create(1000);
  ASSERT_EQ(id.size(), 64u);
  EXPECT_EQ(id.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_TRUE(table.valid(id, 1000));
  EXPECT_TRUE(table.valid(id, 1000 + SessionTable::kLifetimeSeconds - 1));
  EXPECT_FALSE(table.valid(id, 1000 + SessionTable::kLifetimeSeconds));
  EXPECT_EQ(table.size(), 0u);  // the expired one is gone

  const std::string other = table.create(2000);
  EXPECT_NE(other, id);
  EXPECT_FALSE(table.valid(other.substr(0, 63) + (other[63] == '0' ? "1" : "0"), 2000));
  EXPECT_FALSE(table.valid("", 2000));
  table.remove(other);
  EXPECT_FALSE(table.valid(other, 2000));
}

TEST(AdminSessions, FullTableDropsTheOldest) {
  SessionTable table;
  const std::string first = table.create(0);
  for (size_t i = 1; i < SessionTable::kCapacity; ++i) table.create(static_cast<int64_t>(i));
  EXPECT_TRUE(table.valid(first, 10));
  const std::string last = table.create(5000);
  EXPECT_EQ(table.size(), SessionTable::kCapacity);
  EXPECT_FALSE(table.valid(first, 5000));
  EXPECT_TRUE(table.valid(last, 5000));
}

TEST(AdminLoginLimiter, FiveFailuresAMinutePerAddress) {
  LoginLimiter limiter;
  for (int i = 0; i < LoginLimiter::kMaxFailures; ++i) {
    EXPECT_EQ(limiter.retry_after("10.0.0.1", 100 + i), 0) << i;
    limiter.failed("10.0.0.1", 100 + i);
  }
  EXPECT_EQ(limiter.retry_after("10.0.0.1", 110), 50);
  EXPECT_EQ(limiter.retry_after("10.0.0.2", 110), 0);  // another address is not affected
  EXPECT_EQ(limiter.retry_after("10.0.0.1", 160), 0);  // the window ended
  limiter.failed("10.0.0.1", 160);
  EXPECT_EQ(limiter.retry_after("10.0.0.1", 161), 0);  // a new window, one failure
}

TEST(AdminLoginLimiter, SuccessForgetsFailures) {
  LoginLimiter limiter;
  for (int i = 0; i < LoginLimiter::kMaxFailures - 1; ++i) limiter.failed("a", 0);
  limiter.succeeded("a");
  limiter.failed("a", 1);
  EXPECT_EQ(limiter.retry_after("a", 2), 0);
}

TEST(AdminCookie, ValueByName) {
  EXPECT_EQ(cookie_value("peregrine_admin=abc", "peregrine_admin"), "abc");
  EXPECT_EQ(cookie_value("x=1; peregrine_admin=abc ; y=2", "peregrine_admin"), "abc");
  EXPECT_EQ(cookie_value("xperegrine_admin=abc", "peregrine_admin"), "");
  EXPECT_EQ(cookie_value("peregrine_admin", "peregrine_admin"), "");
  EXPECT_EQ(cookie_value("", "peregrine_admin"), "");
}

// A request as the connection hands it to the admin: method, Host, and headers.
struct TestRequest {
  Request request;
  TestRequest(Method method, std::string_view host,
              std::initializer_list<std::pair<std::string_view, std::string_view>> headers) {
    request.method = method;
    request.method_text = method_name(method);
    request.host = host;
    for (const auto& [name, value] : headers)
      request.headers[request.header_count++] = Header{name, value};
  }
};

TEST(AdminAuthorize, HostCredentialsAndOrigin) {
  Options options;
  options.token = "0123456789abcdef0123";
  auto check = [&](Method method, std::string_view host,
                   std::initializer_list<std::pair<std::string_view, std::string_view>> headers) {
    TestRequest r(method, host, headers);
    return authorize(r.request, options).status;
  };
  const std::string bearer = "Bearer " + options.token;
  EXPECT_EQ(check(Method::kGet, "evil.example", {{"Authorization", bearer}}), 403);
  EXPECT_EQ(check(Method::kGet, "127.0.0.1:9090", {}), 401);
  EXPECT_EQ(check(Method::kGet, "127.0.0.1:9090", {{"Authorization", "Bearer nope"}}), 401);
  EXPECT_EQ(check(Method::kGet, "127.0.0.1:9090", {{"Authorization", bearer}}), 0);
  // A bearer client needs no Origin; a foreign one is refused all the same.
  EXPECT_EQ(check(Method::kPost, "127.0.0.1:9090", {{"Authorization", bearer}}), 0);
  EXPECT_EQ(check(Method::kPost, "127.0.0.1:9090",
                  {{"Authorization", bearer}, {"Origin", "http://evil.example"}}),
            403);

  const std::string id = sessions().create(monotonic_seconds());
  const std::string cookie = "x=1; peregrine_admin=" + id;
  EXPECT_EQ(check(Method::kGet, "127.0.0.1:9090", {{"Cookie", cookie}}), 0);
  EXPECT_EQ(check(Method::kPut, "127.0.0.1:9090", {{"Cookie", cookie}}), 403);  // no Origin
  EXPECT_EQ(check(Method::kPut, "127.0.0.1:9090",
                  {{"Cookie", cookie}, {"Origin", "http://127.0.0.1:9091"}}),
            403);
  EXPECT_EQ(check(Method::kPut, "127.0.0.1:9090",
                  {{"Cookie", cookie}, {"Origin", "http://127.0.0.1:9090"}}),
            0);
  sessions().remove(id);
  EXPECT_EQ(check(Method::kGet, "127.0.0.1:9090", {{"Cookie", cookie}}), 401);

  // No credentials asked, but a foreign page still cannot change anything.
  options.auth = Auth::kNone;
  EXPECT_EQ(check(Method::kPost, "localhost", {}), 0);
  EXPECT_EQ(check(Method::kPost, "localhost", {{"Origin", "http://evil.example"}}), 403);
  EXPECT_EQ(check(Method::kGet, "localhost", {{"Origin", "http://evil.example"}}), 0);
}

}  // namespace
}  // namespace peregrine::admin
