#include "handlers/proxy/request_head.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "http/http1/parser.h"
#include "http/path.h"

namespace peregrine::proxy {
namespace {

// The head the proxy sends for `raw` (a client's request head), with the path normalized as
// RouteTable::select does and `mapping` applied.
std::string forwarded(const std::string& raw, const PathMapping& mapping) {
  static Request request;
  request.clear();
  http1::RequestParser parser;
  EXPECT_EQ(parser.parse(raw, request).status, http1::ParseStatus::kDone) << raw;
  EXPECT_EQ(http::normalize_path(request.raw_path, request.path_storage), http::PathStatus::kOk);
  request.path = request.path_storage;
  RequestContext context;
  context.client_ip = "192.0.2.7";
  context.scheme = "http";
  context.upstream_host = "127.0.0.1:8080";
  RequestOptions options;
  options.forwarding = {false, false, false, false, false};
  std::vector<HeaderView> scratch;
  std::string out;
  append_request_head(out, request, mapping, context, options, scratch);
  return out;
}

TEST(ProxyRequestHead, MappedRawPathKeepsTheClientsSpelling) {
  EXPECT_EQ(forwarded("GET /api/a%20b?q=1 HTTP/1.1\r\nHost: a\r\n\r\n", {true, "/api/", "/v1/"}),
            "GET /v1/a%20b?q=1 HTTP/1.1\r\nHost: a\r\nConnection: keep-alive\r\n\r\n");
}

// Found by tests/fuzz/proxy_forwarding: mapped as spelled, "/api/../api/x" became "/v1/../api/x",
// which the back end resolves to /api/x, outside the replacement the route promised.
TEST(ProxyRequestHead, DotSegmentsAreResolvedBeforeMapping) {
  for (const char* path : {"/api/../api/x", "/api/%2e%2E/api/x", "/api/./x", "/api/y/../x"})
    EXPECT_EQ(forwarded(std::string("GET ") + path + " HTTP/1.1\r\nHost: a\r\n\r\n",
                        {true, "/api/", "/v1/"}),
              "GET /v1/x HTTP/1.1\r\nHost: a\r\nConnection: keep-alive\r\n\r\n")
        << path;
  // ".." inside a segment is no dot-segment: the spelling stays.
  EXPECT_EQ(forwarded("GET /api/a..b HTTP/1.1\r\nHost: a\r\n\r\n", {true, "/api/", "/v1/"}),
            "GET /v1/a..b HTTP/1.1\r\nHost: a\r\nConnection: keep-alive\r\n\r\n");
}

TEST(ProxyRequestHead, TheBodyKeepsItsFraming) {
  EXPECT_EQ(forwarded("POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\n", {}),
            "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nConnection: keep-alive\r\n\r\n");
  EXPECT_EQ(forwarded("POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n", {}),
            "POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n"
            "Connection: keep-alive\r\n\r\n");
}

}  // namespace
}  // namespace peregrine::proxy
