#include "handlers/return/return_handler.h"

#include <gtest/gtest.h>

namespace peregrine::return_route {
namespace {

std::string header_block(const Response& r) {
  return std::string(r.prebuilt_headers()) + std::string(r.extra_headers());
}

TEST(ReturnHandler, FixedBody) {
  ReturnOptions options;
  options.status = 200;
  options.body = "hello world";
  ReturnHandler handler(options, nullptr);
  Request request;
  request.path = "/hello";
  Response response;
  handler.handle(request, response);
  EXPECT_EQ(response.status(), 200);
  EXPECT_EQ(response.body_length(), 11u);
  EXPECT_NE(header_block(response).find("Content-Type: text/plain\r\n"), std::string::npos);
}

TEST(ReturnHandler, RedirectWithCaptures) {
  ReturnOptions options;
  options.status = 308;
  options.location = "/new/$1?from=$uri";
  std::string error;
  size_t offset;
  auto regex = Regex::compile("^/old/(.*)$", &error, &offset);
  ASSERT_TRUE(regex);
  ReturnHandler handler(options, regex);
  Request request;
  request.path = "/old/a b";
  Response response;
  handler.handle(request, response);
  EXPECT_EQ(response.status(), 308);
  EXPECT_NE(header_block(response).find("Location: /new/a%20b?from=/old/a%20b\r\n"),
            std::string::npos)
      << header_block(response);
}

TEST(ReturnHandler, ExpandNeverEmitsControlBytes) {
  Regex::Captures captures;
  captures.group[1] = "a\r\nSet-Cookie: x";
  captures.count = 2;
  std::string out = ReturnHandler::expand("/$1", captures, "/");
  EXPECT_EQ(out.find('\r'), std::string::npos);
  EXPECT_EQ(out.find('\n'), std::string::npos);
  EXPECT_EQ(out, "/a%0D%0ASet-Cookie:%20x");
}

TEST(ReturnHandler, MissingCaptureExpandsToNothing) {
  Regex::Captures captures;
  captures.count = 1;
  EXPECT_EQ(ReturnHandler::expand("/x/$3/y", captures, "/"), "/x//y");
}

}  // namespace
}  // namespace peregrine::return_route

namespace peregrine::return_route {
namespace {

TEST(ReturnHandler, HttpsRedirectWithHostAndRequestUri) {
  ReturnOptions options;
  options.status = 301;
  options.location = "https://$host$request_uri";
  ReturnHandler handler(options, nullptr);
  Request request;
  request.host = "Example.COM:8080";
  request.target = "/a/b%20c?x=1";
  request.raw_path = "/a/b%20c";
  request.query = "x=1";
  request.path = "/a/b c";
  Response response;
  handler.handle(request, response);
  EXPECT_EQ(response.status(), 301);
  EXPECT_NE(std::string(response.extra_headers()).find("Location: https://example.com/a/b%20c?x=1"),
            std::string::npos)
      << response.extra_headers();
}

TEST(ReturnHandler, RequestUriKeepsAnEmptyQueryAndIgnoresAbsoluteForm) {
  ReturnOptions options;
  options.status = 308;
  options.location = "https://$host$request_uri";
  ReturnHandler handler(options, nullptr);
  Request request;
  request.host = "[::1]:8443";
  request.target = "http://[::1]:8443/p?";
  request.raw_path = "/p";
  request.path = "/p";
  Response response;
  handler.handle(request, response);
  EXPECT_NE(std::string(response.extra_headers()).find("Location: https://[::1]/p?\r\n"),
            std::string::npos)
      << response.extra_headers();
}

TEST(ReturnHandler, ExpandKnowsEveryVariable) {
  Regex::Captures none;
  EXPECT_EQ(ReturnHandler::expand("https://$host$request_uri#$uri", none, "/d e", "/d%20e?q", "h"),
            "https://h/d%20e?q#/d%20e");
}

}  // namespace
}  // namespace peregrine::return_route
