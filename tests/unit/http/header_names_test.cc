#include "http/header_names.h"

#include <gtest/gtest.h>

#include <string_view>

namespace peregrine::http {
namespace {

TEST(HeaderNames, HopByHopAnyCase) {
  for (std::string_view n :
       {"Connection", "keep-alive", "PROXY-CONNECTION", "te", "Trailer", "transfer-encoding",
        "Upgrade", "Proxy-Authenticate", "proxy-authorization", "HTTP2-Settings"})
    EXPECT_TRUE(is_hop_by_hop(n)) << n;
  for (std::string_view n : {"Content-Length", "Date", "Server", "Host", "Cookie", "TEE", "T",
                             "Connections", "X-Upgrade", "Proxy", "Trailers", ""})
    EXPECT_FALSE(is_hop_by_hop(n)) << n;
}

TEST(HeaderNames, Framing) {
  EXPECT_TRUE(is_framing("content-length"));
  EXPECT_TRUE(is_framing("Transfer-Encoding"));
  EXPECT_FALSE(is_framing("Connection"));
  EXPECT_FALSE(is_framing("Content-Type"));
}

TEST(HeaderNames, SetByConnection) {
  for (std::string_view n : {"Content-Length", "date", "SERVER"})
    EXPECT_TRUE(is_set_by_connection(n)) << n;
  for (std::string_view n : {"Transfer-Encoding", "Connection", "Servers", "Dates"})
    EXPECT_FALSE(is_set_by_connection(n)) << n;
}

TEST(HeaderNames, ManagedIsFramingAndConnectionHandling) {
  for (std::string_view n : {"Connection", "Keep-Alive", "Transfer-Encoding", "Content-Length",
                             "TE", "Trailer", "Upgrade", "Proxy-Connection"})
    EXPECT_TRUE(is_managed(n)) << n;
  // Credentials for a next-hop proxy may be set per route; Date and Server are not framing.
  for (std::string_view n :
       {"Proxy-Authorization", "Proxy-Authenticate", "Date", "Server", "X-Request-Id", "Host"})
    EXPECT_FALSE(is_managed(n)) << n;
}

}  // namespace
}  // namespace peregrine::http
