#include "websocket/handshake.h"

#include <gtest/gtest.h>

#include <string>

#include "http/http1/parser.h"

namespace peregrine::websocket {
namespace {

// A request as the server's HTTP/1 parser makes it (the headers are views into `text`).
class Parsed {
 public:
  explicit Parsed(std::string text) : text_(std::move(text)) {
    http1::RequestParser parser;
    EXPECT_EQ(parser.parse(text_, request_).status, http1::ParseStatus::kDone) << text_;
  }
  const Request& operator*() const { return request_; }

 private:
  std::string text_;
  Request request_;
};

// RFC 6455 1.3's example request.
std::string Upgrade(std::string extra = "", std::string method = "GET",
                    std::string version = "HTTP/1.1") {
  return method + " /chat " + version +
         "\r\nHost: server.example.com\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
         "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nOrigin: http://example.com\r\n"
         "Sec-WebSocket-Version: 13\r\n" +
         extra + "\r\n";
}

std::string HeaderValue(const HandshakeAnswer& a, std::string_view name) {
  for (const auto& [n, v] : a.headers)
    if (n == name) return v;
  return "<none>";
}

TEST(WebSocketHandshake, Rfc6455AcceptKey) {
  EXPECT_EQ(accept_key("dGhlIHNhbXBsZSBub25jZQ=="), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
}

TEST(WebSocketHandshake, AcceptsTheRfcExample) {
  Parsed r(Upgrade());
  HandshakeAnswer a = check_upgrade(*r);
  EXPECT_EQ(a.status, 101);
  EXPECT_TRUE(a.error.empty());
  EXPECT_EQ(HeaderValue(a, "Sec-WebSocket-Accept"), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
  EXPECT_EQ(response_head(a),
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n");
}

TEST(WebSocketHandshake, TokensAreListsAndCaseInsensitive) {
  Parsed r(
      "GET / HTTP/1.1\r\nHost: h\r\nUpgrade: foo/2, WebSocket\r\nConnection: keep-alive\r\n"
      "Connection: UPGRADE\r\nSec-WebSocket-Version: 13\r\n"
      "Sec-WebSocket-Key: AQIDBAUGBwgJCgsMDQ4PEA==\r\n\r\n");
  EXPECT_EQ(check_upgrade(*r).status, 101);
}

TEST(WebSocketHandshake, NotAnUpgradeGets426) {
  for (std::string text : {std::string("GET /chat HTTP/1.1\r\nHost: h\r\n\r\n"),
                           std::string("GET / HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\n\r\n"),
                           std::string("GET / HTTP/1.1\r\nHost: h\r\nUpgrade: h2c\r\n"
                                       "Connection: Upgrade\r\n\r\n")}) {
    Parsed r(text);
    HandshakeAnswer a = check_upgrade(*r);
    EXPECT_EQ(a.status, 426) << text;
    EXPECT_EQ(HeaderValue(a, "Upgrade"), "websocket");
    EXPECT_EQ(HeaderValue(a, "Connection"), "Upgrade");
    EXPECT_EQ(HeaderValue(a, "Sec-WebSocket-Version"), "13");
  }
}

TEST(WebSocketHandshake, OtherVersionGets426WithOurs) {
  Parsed r(
      "GET / HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
      "Sec-WebSocket-Version: 8\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n");
  HandshakeAnswer a = check_upgrade(*r);
  EXPECT_EQ(a.status, 426);
  EXPECT_EQ(HeaderValue(a, "Sec-WebSocket-Version"), "13");
}

TEST(WebSocketHandshake, MalformedUpgradeGets400) {
  const char* bad_keys[] = {
      "",
      "dGhlIHNhbXBsZSBub25jZQ",        // no padding
      "dGhlIHNhbXBsZSBub25jZQ=",       // 23 characters
      "dGhlIHNhbXBsZSBub25jZQ==dGhl",  // longer
      "dGhlIHNhbXBsZSBub25j*Q==",      // outside the alphabet
      "dGhlIHNhbXBsZSBub25jZQZZ",      // 18 bytes
      "dGhlIHNhbXBsZSBub2=jZQ==",      // padding inside
  };
  for (const char* key : bad_keys) {
    Parsed r(
        std::string("GET / HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                    "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: ") +
        key + "\r\n\r\n");
    HandshakeAnswer a = check_upgrade(*r);
    EXPECT_EQ(a.status, 400) << key;
    EXPECT_FALSE(a.error.empty());
    EXPECT_TRUE(a.headers.empty());
  }
  Parsed no_key(
      "GET / HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
      "Sec-WebSocket-Version: 13\r\n\r\n");
  EXPECT_EQ(check_upgrade(*no_key).status, 400);
  Parsed no_version(
      "GET / HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
      "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n");
  EXPECT_EQ(check_upgrade(*no_version).status, 400);
  Parsed post(Upgrade("", "POST"));
  EXPECT_EQ(check_upgrade(*post).status, 400);
  Parsed http10(Upgrade("", "GET", "HTTP/1.0"));
  EXPECT_EQ(check_upgrade(*http10).status, 400);
}

TEST(WebSocketHandshake, Subprotocols) {
  Parsed r(Upgrade("Sec-WebSocket-Protocol: chat.v2, chat\r\nSec-WebSocket-Protocol: mqtt\r\n"));
  const std::string_view ours[] = {"mqtt", "chat"};
  // The client's order of preference decides.
  EXPECT_EQ(select_subprotocol(*r, ours), "chat");
  const std::string_view only_v2[] = {"chat.v2"};
  EXPECT_EQ(select_subprotocol(*r, only_v2), "chat.v2");
  const std::string_view none[] = {"CHAT", "soap"};  // names compare exactly
  EXPECT_EQ(select_subprotocol(*r, none), "");
  HandshakeAnswer a = check_upgrade(*r);
  set_subprotocol(a, select_subprotocol(*r, ours));
  EXPECT_EQ(HeaderValue(a, "Sec-WebSocket-Protocol"), "chat");
  HandshakeAnswer b = check_upgrade(*r);
  set_subprotocol(b, "");
  EXPECT_EQ(HeaderValue(b, "Sec-WebSocket-Protocol"), "<none>");
}

}  // namespace
}  // namespace peregrine::websocket
