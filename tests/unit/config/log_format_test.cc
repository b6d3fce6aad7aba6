// Custom access-log formats: the compiler (pieces, $$, ${name}, errors with close names) and the
// keys that read it, [client_address] and [request_id], with their positions.
#include "config/log_format.h"

#include <gtest/gtest.h>

#include <string>

#include "config/config.h"
#include "unit/config/config_test_support.h"

namespace peregrine::config {
namespace {

TEST(LogFormatCompile, PiecesAndLiterals) {
  LogFormat f;
  std::string error, hint;
  size_t offset = 0;
  ASSERT_TRUE(compile_log_format("$remote_addr - [${time_local}] \"$request\" $$ $http_user_agent",
                                 &f, &error, &offset, &hint))
      << error;
  ASSERT_EQ(f.pieces.size(), 7u);
  EXPECT_EQ(f.pieces[0].variable, LogVariable::kRemoteAddr);
  EXPECT_EQ(f.pieces[1].text, " - [");
  EXPECT_EQ(f.pieces[2].variable, LogVariable::kTimeLocal);
  EXPECT_EQ(f.pieces[3].text, "] \"");
  EXPECT_EQ(f.pieces[4].variable, LogVariable::kRequest);
  EXPECT_EQ(f.pieces[5].text, "\" $ ");  // $$ merged into the literal around it
  EXPECT_EQ(f.pieces[6].variable, LogVariable::kHttpHeader);
  EXPECT_EQ(f.pieces[6].text, "user-agent");
  EXPECT_TRUE(f.uses(LogVariable::kRequest));
  EXPECT_FALSE(f.uses(LogVariable::kRequestId));
}

TEST(LogFormatCompile, EveryDocumentedNameCompiles) {
  for (std::string_view name : log_variable_names()) {
    std::string text = "$" + std::string(name == "http_NAME"        ? "http_x_a"
                                         : name == "sent_http_NAME" ? "sent_http_etag"
                                                                    : name);
    LogFormat f;
    std::string error, hint;
    size_t offset;
    EXPECT_TRUE(compile_log_format(text, &f, &error, &offset, &hint)) << text << ": " << error;
    ASSERT_EQ(f.pieces.size(), 1u) << text;
    EXPECT_NE(f.pieces[0].variable, LogVariable::kLiteral) << text;
  }
}

TEST(LogFormatCompile, ErrorsSayWhereAndSuggest) {
  LogFormat f;
  std::string error, hint;
  size_t offset = 0;
  EXPECT_FALSE(compile_log_format("$status $remote_adr", &f, &error, &offset, &hint));
  EXPECT_EQ(offset, 8u);
  EXPECT_EQ(error, "unknown access log variable $remote_adr");
  EXPECT_EQ(hint, "did you mean $remote_addr?");
  EXPECT_FALSE(compile_log_format("x ${status", &f, &error, &offset, &hint));
  EXPECT_EQ(offset, 2u);
  EXPECT_FALSE(compile_log_format("cost: $ 5", &f, &error, &offset, &hint));
  EXPECT_EQ(offset, 6u);
  EXPECT_FALSE(compile_log_format("$http_", &f, &error, &offset, &hint));
}

class LogFormatConfigTest : public test_support::ConfigTest {};

TEST_F(LogFormatConfigTest, CustomFormatAndEscape) {
  auto config = load_ok(R"([[site]]
root = "www"
access_log_format = '{"addr":"$remote_addr","id":"$request_id"}'
access_log_escape = "json"
)");
  ASSERT_NE(config, nullptr);
  const AccessLog& log = config->sites[0].access_log;
  EXPECT_EQ(log.format, AccessLogFormat::kCustom);
  EXPECT_EQ(log.custom.escape, LogEscape::kJson);
  EXPECT_TRUE(config->request_id.enabled);  // $request_id turns IDs on
}

TEST_F(LogFormatConfigTest, UnknownVariableAtItsColumn) {
  LoadResult result = load("[[site]]\nroot = \"www\"\naccess_log_format = \"$status $uri_x\"\n");
  ASSERT_EQ(result.errors.size(), 1u);
  EXPECT_EQ(result.errors[0].pos.line, 3u);
  EXPECT_EQ(result.errors[0].pos.column, 30u);  // the '$' of $uri_x
  EXPECT_EQ(result.errors[0].message, "unknown access log variable $uri_x");
  EXPECT_EQ(result.errors[0].hint, "did you mean $uri?");
}

TEST_F(LogFormatConfigTest, ClientAddressAndRequestId) {
  auto config = load_ok(R"(listen = [{ address = "127.0.0.1:0", proxy_protocol = true }]
[client_address]
trusted_proxies = ["10.0.0.0/8", "2001:db8::/32", "192.0.2.1"]
header = "Forwarded"
proxy_protocol_from = ["10.1.0.0/16"]
[request_id]
header = "X-Trace-Id"
trust_incoming = true
response = true
[[site]]
root = "www"
)");
  ASSERT_NE(config, nullptr);
  EXPECT_TRUE(config->listen[0].proxy_protocol);
  EXPECT_EQ(config->client_address.trusted_proxies.size(), 3u);
  EXPECT_EQ(config->client_address.header, ClientAddressHeader::kForwarded);
  EXPECT_EQ(config->client_address.proxy_protocol_from.size(), 1u);
  EXPECT_TRUE(config->request_id.enabled);
  EXPECT_EQ(config->request_id.header, "X-Trace-Id");
  EXPECT_TRUE(config->request_id.trust_incoming);
  EXPECT_TRUE(config->request_id.response);
}

TEST_F(LogFormatConfigTest, ClientAddressErrors) {
  EXPECT_NE(
      error("[client_address]\ntrusted_proxies = [\"10.0.0.1/8\"]\n[[site]]\nroot = \"www\"\n")
          .find("host bits"),
      std::string::npos);
  EXPECT_NE(error("[client_address]\nheader = \"x-real-ip\"\n[[site]]\nroot = \"www\"\n")
                .find("x-forwarded-for"),
            std::string::npos);
  EXPECT_NE(
      error("[request_id]\nheader = \"X Id\"\n[[site]]\nroot = \"www\"\n").find("header name"),
      std::string::npos);
}

}  // namespace
}  // namespace peregrine::config
