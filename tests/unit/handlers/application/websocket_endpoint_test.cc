// WebSocket endpoints against a recording Downstream: the callbacks' order, back-pressure and the
// slow-client bound, the graceful stop's 1001 (the live connection is tested by
// tests/integration/test_websocket.py).
#include "handlers/application/websocket_endpoint.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "http/http1/parser.h"
#include "server/app_worker.h"
#include "websocket/frame.h"

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

}  // namespace
}  // namespace peregrine
