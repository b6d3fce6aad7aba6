// WebSocket endpoints against a recording Downstream: the callbacks' order, back-pressure and the
// slow-client bound, the graceful stop's 1001 (the live connection is tested by
// tests/integration/test_websocket.py).
#include "handlers/application/websocket_endpoint.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "http/http1/parser.h"
#include "server/app_worker.h"
#include "websocket/deflate.h"
#include "websocket/frame.h"
#include "websocket/session.h"

namespace peregrine {
namespace {

class RecordingDownstream final : public handlers::Downstream {
 public:
  void resume_body() override {}
  void respond(Response& response) override {
    events.push_back("respond " + std::to_string(response.status()));
  }
  bool send_head(Response& head, int64_t) override {
    events.push_back("head " + std::to_string(head.status()));
    head_lines = std::string(head.extra_headers());
    return true;
  }
  Sent send_body(std::string_view bytes) override {
    sent += bytes;
    return full ? Sent::kFull : Sent::kMore;
  }
  void finish() override { events.push_back("finish"); }
  void fail(int status) override { events.push_back("fail " + std::to_string(status)); }
  bool head_sent() const override { return true; }

  std::vector<std::string> events;
  std::string head_lines;  // the 101's headers
  std::string sent;
  bool full = false;
};

// Records the callbacks; echoes each message and keeps what send() answered.
class Recorder final : public WebSocketHandler {
 public:
  void on_open(WebSocket ws) override {
    log.push_back("open");
    ws.on_writable([this] { log.push_back("writable"); });
  }
  void on_message(WebSocket ws, std::string_view data, MessageType) override {
    log.push_back("message " + std::string(data));
    results.push_back(ws.send_text(data));
  }
  void on_close(WebSocket ws, uint16_t code, std::string_view reason) override {
    log.push_back("close " + std::to_string(code) + " " + std::string(reason));
    EXPECT_FALSE(ws.is_open());
  }
  std::vector<std::string> log;
  std::vector<IoStatus> results;
};

std::string masked(websocket::Opcode opcode, std::string_view payload) {
  std::string out;
  websocket::write_masked_frame(out, opcode, payload, {1, 2, 3, 4});
  return out;
}

class WebSocketEndpointTest : public ::testing::Test {
 protected:
  explicit WebSocketEndpointTest(std::string head =
                                     "GET /ws HTTP/1.1\r\nHost: x\r\n"
                                     "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                                     "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                                     "Sec-WebSocket-Version: 13\r\n\r\n")
      : head_(std::move(head)) {
    http1::RequestParser parser;
    EXPECT_EQ(parser.parse(head_, request_).status, http1::ParseStatus::kDone);
  }
  void make(WebSocketOptions options = {}) {
    endpoint_ =
        std::make_unique<application::WebSocketEndpoint>("test", handler_, options, &draining_);
  }
  // The endpoint, and an accepted upgrade's exchange (null when the handshake was refused).
  handlers::Exchange* open(WebSocketOptions options = {}) {
    make(std::move(options));
    handlers::Exchange* exchange = endpoint_->start(request_, downstream_);
    EXPECT_NE(exchange, nullptr);
    return exchange;
  }
  void turn(int64_t ms = 0) {
    clock_.monotonic_ms += ms;
    worker_.run(clock_.monotonic_ms);
  }

  Clock clock_;
  server::AppWorker worker_{nullptr, 0, 1, clock_};
  server::AppWorker::Scope scope_{&worker_};
  std::string head_;
  Request request_;
  RecordingDownstream downstream_;
  std::shared_ptr<Recorder> handler_ = std::make_shared<Recorder>();
  bool draining_ = false;
  std::unique_ptr<application::WebSocketEndpoint> endpoint_;
};

TEST_F(WebSocketEndpointTest, NoUpgradeIs426) {
  request_.header_count = 0;  // a plain GET
  make();
  EXPECT_EQ(endpoint_->start(request_, downstream_), nullptr);
  EXPECT_EQ(downstream_.events, std::vector<std::string>{"respond 426"});
  EXPECT_TRUE(handler_->log.empty());
}

TEST_F(WebSocketEndpointTest, MessagesThenThePeersCloseThenOnCloseOnce) {
  handlers::Exchange* exchange = open();
  ASSERT_NE(exchange, nullptr);
  EXPECT_EQ(downstream_.events, std::vector<std::string>{"head 101"});
  // A message split anywhere arrives whole; the echo is an unmasked frame.
  std::string frames = masked(websocket::Opcode::kText, "hi");
  exchange->on_body(frames.substr(0, 3), false);
  exchange->on_body(frames.substr(3), false);
  EXPECT_EQ(downstream_.sent, std::string("\x81\x02hi", 4));
  exchange->on_body(masked(websocket::Opcode::kClose, websocket::close_payload(4000, "bye")),
                    false);
  EXPECT_EQ(downstream_.events.back(), "finish");
  EXPECT_EQ(handler_->log, (std::vector<std::string>{"open", "message hi"}));
  turn();  // on_close from the loop, never inside on_body
  EXPECT_EQ(handler_->log, (std::vector<std::string>{"open", "message hi", "close 4000 bye"}));
}

TEST_F(WebSocketEndpointTest, SlowClientIsDroppedPastTheQueueBound) {
  WebSocketOptions options;
  options.max_queued_bytes = 100;
  handlers::Exchange* exchange = open(options);
  ASSERT_NE(exchange, nullptr);
  downstream_.full = true;
  std::string forty(40, 'x');
  exchange->on_body(masked(websocket::Opcode::kText, forty), false);  // handed over: kFull
  exchange->on_body(masked(websocket::Opcode::kText, forty), false);  // 42 bytes queued
  exchange->on_body(masked(websocket::Opcode::kText, forty), false);  // 84
  EXPECT_EQ(handler_->results,
            (std::vector<IoStatus>{IoStatus::kFull, IoStatus::kFull, IoStatus::kFull}));
  exchange->on_body(masked(websocket::Opcode::kText, forty), false);  // 126 > 100: dropped
  EXPECT_EQ(handler_->results.back(), IoStatus::kCancelled);
  EXPECT_EQ(downstream_.events.back(), "fail 500");
  turn();
  EXPECT_EQ(handler_->log.back(), "close 1008 client too slow");
}

TEST_F(WebSocketEndpointTest, WritableAgainFlushesTheBacklog) {
  handlers::Exchange* exchange = open();
  ASSERT_NE(exchange, nullptr);
  downstream_.full = true;
  exchange->on_body(masked(websocket::Opcode::kText, "a"), false);
  exchange->on_body(masked(websocket::Opcode::kText, "b"), false);
  EXPECT_EQ(downstream_.sent,
            "\x81\x01"
            "a");
  downstream_.full = false;
  exchange->on_writable();  // the backlog goes first, then the application hears of the room
  EXPECT_EQ(downstream_.sent,
            "\x81\x01"
            "a\x81\x01"
            "b");
  EXPECT_EQ(handler_->log.back(), "writable");
  exchange->on_abort();
  turn();
  EXPECT_EQ(handler_->log.back(), "close 1006 ");
}

TEST_F(WebSocketEndpointTest, GracefulStopSends1001) {
  handlers::Exchange* exchange = open();
  ASSERT_NE(exchange, nullptr);
  draining_ = true;
  turn(300);  // the hub's timer
  std::string expected;
  websocket::write_frame(expected, websocket::Opcode::kClose,
                         websocket::close_payload(1001, "server shutting down"));
  EXPECT_EQ(downstream_.sent, expected);
  exchange->on_body(masked(websocket::Opcode::kClose, websocket::close_payload(1001, "")), false);
  EXPECT_EQ(downstream_.events.back(), "finish");
  turn();
  EXPECT_EQ(handler_->log.back(), "close 1001 ");
}

// ---- permessage-deflate ----

constexpr std::string_view kOfferingHead =
    "GET /ws HTTP/1.1\r\nHost: x\r\n"
    "Upgrade: websocket\r\nConnection: Upgrade\r\n"
    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
    "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n"
    "Sec-WebSocket-Version: 13\r\n\r\n";

constexpr uint8_t kCompressedText = 0xc1;  // FIN, RSV1, text: a frame's first byte

class WebSocketDeflateEndpointTest : public WebSocketEndpointTest {
 protected:
  WebSocketDeflateEndpointTest() : WebSocketEndpointTest(std::string(kOfferingHead)) {}
};

// What a client session that negotiated the same parameters receives from `bytes`.
std::vector<websocket::Event> client_receives(std::string_view bytes,
                                              const websocket::PerMessageDeflate& params) {
  websocket::Session client(websocket::Role::kClient, {}, params);
  std::vector<websocket::Event> events;
  std::string out;
  client.receive(bytes, events, out);
  return events;
}

websocket::PerMessageDeflate no_takeover() {
  websocket::PerMessageDeflate params;
  params.server_no_context_takeover = params.client_no_context_takeover = true;
  return params;
}

TEST_F(WebSocketDeflateEndpointTest, NegotiatedByDefaultAndUsedBothWays) {
  handlers::Exchange* exchange = open();
  ASSERT_NE(exchange, nullptr);
  EXPECT_NE(downstream_.head_lines.find("Sec-WebSocket-Extensions: permessage-deflate; "
                                        "server_no_context_takeover; client_no_context_takeover"),
            std::string::npos)
      << downstream_.head_lines;
  // The client compresses its message; the echo comes back compressed (RSV1), being over 1 KiB.
  websocket::Session client(websocket::Role::kClient, {}, no_takeover());
  std::string big(5000, 'a'), frames;
  client.send_text(big, frames);
  EXPECT_LT(frames.size(), 200u);
  exchange->on_body(frames, false);
  ASSERT_EQ(handler_->log.back(), "message " + big);
  EXPECT_EQ(static_cast<uint8_t>(downstream_.sent[0]), kCompressedText);
  EXPECT_LT(downstream_.sent.size(), 200u);
  EXPECT_EQ(client_receives(downstream_.sent, no_takeover()),
            (std::vector<websocket::Event>{{websocket::Event::Type::kText, 0, big}}));
  // Under min_compress_bytes (1 KiB by default): plain.
  downstream_.sent.clear();
  exchange->on_body(masked(websocket::Opcode::kText, std::string(1023, 'b')), false);
  EXPECT_EQ(static_cast<uint8_t>(downstream_.sent[0]), 0x81);
  exchange->on_abort();  // the client goes: the connection's state is freed
}

TEST_F(WebSocketDeflateEndpointTest, OffMeansNoExtensionAndRsv1Fails) {
  WebSocketOptions options;
  options.permessage_deflate.enabled = false;
  handlers::Exchange* exchange = open(options);
  ASSERT_NE(exchange, nullptr);
  EXPECT_EQ(downstream_.head_lines.find("Sec-WebSocket-Extensions"), std::string::npos);
  websocket::Session client(websocket::Role::kClient, {}, no_takeover());
  std::string frames;
  client.send_text(std::string(5000, 'a'), frames);
  exchange->on_body(frames, false);
  EXPECT_EQ(handler_->log, std::vector<std::string>{"open"});
  EXPECT_EQ(downstream_.events.back(), "finish");  // the 1002 close, then the tunnel ends
}

// Keeps every connection's handle, to broadcast through one of them.
class Keeper final : public WebSocketHandler {
 public:
  void on_open(WebSocket ws) override { sockets.push_back(ws); }
  void on_message(WebSocket, std::string_view, MessageType) override {}
  std::vector<WebSocket> sockets;
};

TEST_F(WebSocketDeflateEndpointTest, BroadcastEncodesOncePerKindOfConnection) {
  auto keeper = std::make_shared<Keeper>();
  WebSocketOptions options;
  options.permessage_deflate.min_compress_bytes = 10;
  endpoint_ = std::make_unique<application::WebSocketEndpoint>("test", keeper, options, &draining_);
  // Two clients offering the extension, one not, one asking for a 10-bit server window.
  const std::string plain_head =
      "GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
      "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";
  std::string small_window_head(kOfferingHead);
  small_window_head.insert(small_window_head.find("client_max"), "server_max_window_bits=10; ");
  const std::vector<std::string> heads = {std::string(kOfferingHead), std::string(kOfferingHead),
                                          plain_head, small_window_head};
  std::vector<Request> requests(heads.size());
  std::vector<RecordingDownstream> downstreams(heads.size());
  std::vector<handlers::Exchange*> exchanges;
  for (size_t i = 0; i < heads.size(); ++i) {
    http1::RequestParser parser;
    ASSERT_EQ(parser.parse(heads[i], requests[i]).status, http1::ParseStatus::kDone);
    exchanges.push_back(endpoint_->start(requests[i], downstreams[i]));
    ASSERT_NE(exchanges.back(), nullptr);
  }
  ASSERT_EQ(keeper->sockets.size(), 4u);
  const std::string text(3000, 'z');
  EXPECT_EQ(keeper->sockets[0].endpoint().broadcast(text), 4u);
  EXPECT_EQ(downstreams[0].sent, downstreams[1].sent);  // the same compressed frame
  EXPECT_EQ(static_cast<uint8_t>(downstreams[0].sent[0]), kCompressedText);
  EXPECT_LT(downstreams[0].sent.size(), 100u);
  std::string plain;
  websocket::write_frame(plain, websocket::Opcode::kText, text);
  EXPECT_EQ(downstreams[2].sent, plain);
  websocket::PerMessageDeflate small = no_takeover();
  small.server_max_window_bits = 10;
  EXPECT_EQ(static_cast<uint8_t>(downstreams[3].sent[0]), kCompressedText);
  for (size_t i : {0, 1, 3})
    EXPECT_EQ(client_receives(downstreams[i].sent, i == 3 ? small : no_takeover()),
              (std::vector<websocket::Event>{{websocket::Event::Type::kText, 0, text}}))
        << i;
  keeper->sockets.clear();
  for (handlers::Exchange* exchange : exchanges) exchange->on_abort();
}

TEST_F(WebSocketDeflateEndpointTest, BroadcastWithContextTakeoverUsesEachConnectionsWindow) {
  auto keeper = std::make_shared<Keeper>();
  WebSocketOptions options;
  options.permessage_deflate.server_context_takeover = true;
  options.permessage_deflate.min_compress_bytes = 10;
  endpoint_ = std::make_unique<application::WebSocketEndpoint>("test", keeper, options, &draining_);
  handlers::Exchange* exchange = endpoint_->start(request_, downstream_);
  ASSERT_NE(exchange, nullptr);
  ASSERT_EQ(keeper->sockets.size(), 1u);
  // Each connection compresses with its own window: the second broadcast of the same text refers
  // to the first and is much smaller.
  EXPECT_NE(downstream_.head_lines.find("permessage-deflate; client_no_context_takeover\r\n"),
            std::string::npos)
      << downstream_.head_lines;
  std::string text;
  for (int i = 0; i < 200; ++i) text += std::to_string(i * 7919 % 1000) + ",";
  keeper->sockets[0].endpoint().broadcast(text);
  const size_t first = downstream_.sent.size();
  keeper->sockets[0].endpoint().broadcast(text);
  EXPECT_LT(downstream_.sent.size() - first, first / 4);  // a back-reference to the first
  websocket::PerMessageDeflate params;
  params.client_no_context_takeover = true;
  EXPECT_EQ(client_receives(downstream_.sent, params),
            (std::vector<websocket::Event>{{websocket::Event::Type::kText, 0, text},
                                           {websocket::Event::Type::kText, 0, text}}));
  keeper->sockets.clear();
  exchange->on_abort();
}

}  // namespace
}  // namespace peregrine
