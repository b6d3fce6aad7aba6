// The Autobahn testsuite's case families (fuzzingclient, cases 1-7) as byte-level cases: each
// test names the cases it stands for. A client's frames are built here, masked, with any bits
// the case needs; the session's answers are parsed back with a client-role parser.
#include "websocket/session.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace peregrine::websocket {
namespace {

using Type = Event::Type;

// A frame as a client sends it: `b0` is FIN|RSV|opcode, masked with a fixed key.
std::string ClientFrame(uint8_t b0, std::string_view payload) {
  std::string out;
  write_masked_frame(out, static_cast<Opcode>(b0 & 0x0F), payload, {0x11, 0x22, 0x33, 0x44},
                     (b0 & 0x80) != 0);
  out[0] = static_cast<char>(b0);  // RSV bits, which the writer never sets
  return out;
}

constexpr uint8_t kFin = 0x80;
std::string Text(std::string_view s, bool fin = true) {
  return ClientFrame((fin ? kFin : 0) | 0x1, s);
}
std::string Binary(std::string_view s, bool fin = true) {
  return ClientFrame((fin ? kFin : 0) | 0x2, s);
}
std::string Cont(std::string_view s, bool fin) {
  return ClientFrame((fin ? kFin : 0) | 0x0, s);
}
std::string Ping(std::string_view s) {
  return ClientFrame(kFin | 0x9, s);
}
std::string Pong(std::string_view s) {
  return ClientFrame(kFin | 0xA, s);
}
std::string Close(std::string_view body) {
  return ClientFrame(kFin | 0x8, body);
}
std::string CloseCode(uint16_t code, std::string_view reason = {}) {
  std::string body;
  body += static_cast<char>(code >> 8);
  body += static_cast<char>(code & 0xFF);
  body.append(reason);
  return Close(body);
}

struct ServerFrame {
  Opcode opcode;
  std::string payload;
  bool operator==(const ServerFrame&) const = default;
};

struct Outcome {
  std::vector<Event> events;
  std::vector<ServerFrame> sent;
  Session::State state;
};

std::vector<ServerFrame> ParseServerFrames(std::string_view bytes) {
  std::vector<ServerFrame> frames;
  FrameParser parser(Role::kClient);
  std::string payload;
  for (;;) {
    FrameParser::Result r = parser.parse(bytes, &payload);
    bytes.remove_prefix(r.consumed);
    if (r.status == FrameParser::Status::kFrameEnd) {
      frames.push_back({parser.header().opcode, payload});
      payload.clear();
    }
    EXPECT_NE(r.status, FrameParser::Status::kError);
    if (r.status == FrameParser::Status::kNeedMore || r.status == FrameParser::Status::kError)
      break;
  }
  EXPECT_TRUE(bytes.empty());
  return frames;
}

// Feeds `wire` `step` bytes at a time (0: whole).
Outcome Feed(std::string_view wire, size_t step = 0, SessionLimits limits = {}) {
  Session session(Role::kServer, limits);
  Outcome out;
  std::string output;
  if (step == 0) step = wire.size() + 1;
  for (size_t i = 0; i < wire.size(); i += step)
    session.receive(wire.substr(i, step), out.events, output);
  out.sent = ParseServerFrames(output);
  out.state = session.state();
  return out;
}

// Every case runs whole, chopped in 1-byte pieces and in 7-byte pieces: the outcome must not
// depend on how the bytes arrive.
Outcome Exchange(std::string_view wire, SessionLimits limits = {}) {
  Outcome whole = Feed(wire, 0, limits);
  for (size_t step : {1, 7}) {
    Outcome chopped = Feed(wire, step, limits);
    EXPECT_EQ(chopped.sent, whole.sent) << "step " << step;
    EXPECT_EQ(chopped.events, whole.events) << "step " << step;
  }
  return whole;
}

ServerFrame CloseFrame(uint16_t code) {
  return {Opcode::kClose, close_payload(code, {})};
}

// The connection failed with `code`: the last event says so, the last frame sent is a close
// with that code, and nothing follows.
void ExpectFailed(const Outcome& o, uint16_t code) {
  ASSERT_FALSE(o.events.empty());
  EXPECT_EQ(o.events.back().type, Type::kError);
  EXPECT_EQ(o.events.back().code, code);
  ASSERT_FALSE(o.sent.empty());
  EXPECT_EQ(o.sent.back().opcode, Opcode::kClose);
  EXPECT_EQ(o.sent.back().payload.substr(0, 2), close_payload(code, {}));
  EXPECT_EQ(o.state, Session::State::kClosed);
}

// Autobahn 1.1.x, 1.2.x: text and binary messages of 0 to 65536 bytes, whole and in pieces.
TEST(WebSocketAutobahn1, TextAndBinaryLengths) {
  for (size_t n : {0, 125, 126, 127, 128, 65535, 65536}) {
    const std::string text(n, '*');
    std::string binary(n, '\0');
    for (size_t i = 0; i < n; ++i) binary[i] = static_cast<char>(0xFE - i % 7);
    Outcome t = Feed(Text(text), n > 1000 ? 997 : 1);
    ASSERT_EQ(t.events.size(), 1u) << n;
    EXPECT_EQ(t.events[0].type, Type::kText);
    EXPECT_EQ(t.events[0].data, text);
    Outcome b = Exchange(Binary(binary));
    ASSERT_EQ(b.events.size(), 1u) << n;
    EXPECT_EQ(b.events[0].type, Type::kBinary);
    EXPECT_EQ(b.events[0].data, binary);
    EXPECT_TRUE(b.sent.empty());
  }
}

// Autobahn 2.1-2.4, 2.6: a ping (empty, text, binary, 125 bytes, sent in pieces) gets a pong with
// its payload.
TEST(WebSocketAutobahn2, PingGetsPong) {
  for (std::string payload :
       {std::string(), std::string("Hello, world!"),
        std::string("\x00\xff\xfe\xfd\xfc\xfb\x00\xff", 8), std::string(125, '\xfe')}) {
    Outcome o = Exchange(Ping(payload));
    ASSERT_EQ(o.events.size(), 1u);
    EXPECT_EQ(o.events[0].type, Type::kPing);
    EXPECT_EQ(o.events[0].data, payload);
    EXPECT_EQ(o.sent, (std::vector<ServerFrame>{{Opcode::kPong, payload}}));
  }
}

// Autobahn 2.5: a ping with 126 bytes is a protocol error.
TEST(WebSocketAutobahn2, OversizedPingFails) {
  ExpectFailed(Exchange(Ping(std::string(126, 'x'))), close_code::kProtocolError);
}

// Autobahn 2.7-2.9: unsolicited pongs are reported and not answered; a ping after them is.
TEST(WebSocketAutobahn2, UnsolicitedPong) {
  Outcome o = Exchange(Pong("") + Pong("unsolicited") + Ping("ping"));
  ASSERT_EQ(o.events.size(), 3u);
  EXPECT_EQ(o.events[0].type, Type::kPong);
  EXPECT_EQ(o.events[1].data, "unsolicited");
  EXPECT_EQ(o.sent, (std::vector<ServerFrame>{{Opcode::kPong, "ping"}}));
}

// Autobahn 2.10, 2.11: ten pings, ten pongs in order.
TEST(WebSocketAutobahn2, TenPings) {
  std::string wire;
  std::vector<ServerFrame> expected;
  for (int i = 0; i < 10; ++i) {
    wire += Ping("payload-" + std::to_string(i));
    expected.push_back({Opcode::kPong, "payload-" + std::to_string(i)});
  }
  EXPECT_EQ(Exchange(wire).sent, expected);
}

// Autobahn 3.1-3.7: any RSV bit without an extension fails the connection with 1002, on text,
// binary, ping and close frames; what came before is delivered, what comes after is not read.
TEST(WebSocketAutobahn3, ReservedBits) {
  const uint8_t frames[] = {kFin | 0x40 | 0x1, kFin | 0x20 | 0x1, kFin | 0x10 | 0x1,
                            kFin | 0x60 | 0x1, kFin | 0x50 | 0x2, kFin | 0x30 | 0x9,
                            kFin | 0x70 | 0x8};
  for (uint8_t b0 : frames) {
    Outcome o = Exchange(Text("before") + ClientFrame(b0, "x") + Ping("after"));
    ASSERT_EQ(o.events.size(), 2u) << int(b0);
    EXPECT_EQ(o.events[0].data, "before");
    ExpectFailed(o, close_code::kProtocolError);
    EXPECT_EQ(o.sent.size(), 1u);  // no pong for the ping after the bad frame
  }
}

// Autobahn 4.1.x, 4.2.x: reserved non-control (3-7) and control (11-15) opcodes, with and
// without a payload, after a valid message.
TEST(WebSocketAutobahn4, ReservedOpcodes) {
  for (uint8_t op : {3, 4, 5, 6, 7, 11, 12, 13, 14, 15}) {
    for (std::string_view payload : {"", "reserved"}) {
      Outcome o = Exchange(Text("ok") + ClientFrame(kFin | op, payload) + Ping(""));
      ASSERT_EQ(o.events.size(), 2u);
      EXPECT_EQ(o.events[0].data, "ok");
      ExpectFailed(o, close_code::kProtocolError);
    }
  }
}

// Autobahn 5.1, 5.2: fragmented ping and pong.
TEST(WebSocketAutobahn5, FragmentedControlFrames) {
  ExpectFailed(Exchange(ClientFrame(0x9, "frag1") + Cont("frag2", true)),
               close_code::kProtocolError);
  ExpectFailed(Exchange(ClientFrame(0xA, "frag1") + Cont("frag2", true)),
               close_code::kProtocolError);
}

// Autobahn 5.3-5.5: a text message in two fragments, whole and in pieces.
TEST(WebSocketAutobahn5, TwoFragments) {
  Outcome o = Exchange(Text("fragment1", false) + Cont("fragment2", true));
  ASSERT_EQ(o.events.size(), 1u);
  EXPECT_EQ(o.events[0].type, Type::kText);
  EXPECT_EQ(o.events[0].data, "fragment1fragment2");
}

// Autobahn 5.6-5.8, 5.19, 5.20: pings between fragments are answered at once, and the message
// still arrives whole.
TEST(WebSocketAutobahn5, PingsBetweenFragments) {
  Outcome o = Exchange(Text("f1", false) + Cont("f2", false) + Ping("p1") + Cont("f3", false) +
                       Ping("p2") + Cont("f4", false) + Cont("f5", true));
  ASSERT_EQ(o.events.size(), 3u);
  EXPECT_EQ(o.events[0].type, Type::kPing);
  EXPECT_EQ(o.events[1].type, Type::kPing);
  EXPECT_EQ(o.events[2].data, "f1f2f3f4f5");
  EXPECT_EQ(o.sent, (std::vector<ServerFrame>{{Opcode::kPong, "p1"}, {Opcode::kPong, "p2"}}));
}

// Autobahn 5.9-5.14: continuation frames with no message to continue.
TEST(WebSocketAutobahn5, ContinuationWithoutStart) {
  for (bool fin : {true, false}) {
    ExpectFailed(Exchange(Cont("fragment", fin) + Text("fragment")), close_code::kProtocolError);
  }
}

// Autobahn 5.15-5.18: a message ended, then a stray continuation; or a new message started
// before the previous one ended.
TEST(WebSocketAutobahn5, BrokenSequences) {
  Outcome o = Exchange(Text("f1", false) + Cont("f2", true) + Cont("f3", false) + Text("f4"));
  ASSERT_EQ(o.events.size(), 2u);
  EXPECT_EQ(o.events[0].data, "f1f2");
  ExpectFailed(o, close_code::kProtocolError);
  ExpectFailed(Exchange(Text("f1", false) + Text("f2", true)), close_code::kProtocolError);
  ExpectFailed(Exchange(Binary("f1", false) + Text("f2", false)), close_code::kProtocolError);
}

const std::string kValidUtf8[] = {
    "",
    "Hello-\xC2\xB5@\xC3\x9F\xC3\xB6\xC3\xA4\xC3\xBC\xC3\xA0\xC3\xA1-UTF-8!!",  // 6.2
    "\xCE\xBA\xE1\xBD\xB9\xCF\x83\xCE\xBC\xCE\xB5",                             // 6.5 kosme
    std::string("\0", 1),
    "\xC2\x80",
    "\xE0\xA0\x80",
    "\xF0\x90\x80\x80",  // 6.7 first of each length
    "\x7F",
    "\xDF\xBF",
    "\xEF\xBF\xBF",
    "\xF4\x8F\xBF\xBF",  // 6.9 last
    "\xED\x9F\xBF",
    "\xEE\x80\x80",
    "\xEF\xBF\xBD",  // 6.11 boundaries
    "\xEF\xBF\xBE",
    "\xEF\xBF\xBF",  // 6.23 noncharacters
};

const std::string kInvalidUtf8[] = {
    "\xCE\xBA\xE1\xBD\xB9\xCF\x83\xCE\xBC\xCE\xB5\xED\xA0\x80\x65\x64\x69\x74\x65\x64",  // 6.3
    "\xF8\x88\x80\x80\x80",
    "\xFC\x84\x80\x80\x80\x80",  // 6.8 5 and 6 byte forms
    "\xF4\x90\x80\x80",
    "\xF7\xBF\xBF\xBF",  // 6.10 above U+10FFFF
    "\x80",
    "\xBF",
    "\x80\xBF",
    "\x80\xBF\x80",  // 6.13 lone continuations
    "\xC0\x20",
    "\xE0\x80\x20",
    "\xF0\x80\x80\x20",  // 6.14 lone starts
    "\xC0",
    "\xE0\x80",
    "\xF0\x80\x80",
    "\xDF",
    "\xEF\xBF",  // 6.15 truncated sequences
    "\xFE",
    "\xFF",
    "\xFE\xFE\xFF\xFF",  // 6.17
    "\xC0\xAF",
    "\xE0\x80\xAF",
    "\xF0\x80\x80\xAF",  // 6.18 overlong '/'
    "\xC1\xBF",
    "\xE0\x9F\xBF",
    "\xF0\x8F\xBF\xBF",  // 6.19 maximal overlongs
    "\xED\xA0\x80",
    "\xED\xAD\xBF",
    "\xED\xBF\xBF",  // 6.20 single surrogates
    "\xED\xA0\x80\xED\xB0\x80",
    "\xED\xAF\xBF\xED\xBF\xBF",  // 6.21 paired surrogates
};

// Autobahn 6.1, 6.2, 6.5-6.12, 6.23: valid text, whole, and in fragments split at every byte.
TEST(WebSocketAutobahn6, ValidUtf8) {
  for (const std::string& s : kValidUtf8) {
    Outcome whole = Exchange(Text(s));
    ASSERT_EQ(whole.events.size(), 1u);
    EXPECT_EQ(whole.events[0].type, Type::kText);
    EXPECT_EQ(whole.events[0].data, s);
    std::string wire = Text("", false);
    for (char c : s) wire += Cont(std::string(1, c), false);
    wire += Cont("", true);
    Outcome split = Exchange(wire);
    ASSERT_EQ(split.events.size(), 1u);
    EXPECT_EQ(split.events[0].data, s);
  }
}

// Autobahn 6.3, 6.4, 6.8, 6.10, 6.13-6.21: invalid text fails with 1007, whole or fragmented,
// and in a message that never ends (the check does not wait for the last fragment).
TEST(WebSocketAutobahn6, InvalidUtf8) {
  for (const std::string& s : kInvalidUtf8) {
    ExpectFailed(Exchange(Text(s)), close_code::kInvalidPayload);
    std::string wire = Text("", false);
    for (char c : s) wire += Cont(std::string(1, c), false);
    wire += Cont("", true);
    ExpectFailed(Exchange(wire), close_code::kInvalidPayload);
  }
  // 6.4.x, fail fast: the bad byte is in the first fragment; the second is never sent.
  ExpectFailed(
      Exchange(Text("\xCE\xBA\xE1\xBD\xB9\xCF\x83\xCE\xBC\xCE\xB5\xF4\x90\x80\x80", false)),
      close_code::kInvalidPayload);
  // and within a frame whose end has not arrived
  const std::string frame = Text("\xCE\xBA\xED\xA0\x80" + std::string(100, 'x'));
  Outcome o = Feed(frame.substr(0, frame.size() - 50), 0);
  ExpectFailed(o, close_code::kInvalidPayload);
  // Binary messages are not text: any bytes go.
  EXPECT_EQ(Exchange(Binary("\xFF\xFE")).events[0].type, Type::kBinary);
}

// Autobahn 7.1.1-7.1.6: after the close, nothing more is read or answered.
TEST(WebSocketAutobahn7, CloseEndsTheSession) {
  Outcome o = Exchange(Text("Hello World!") + CloseCode(1000) + Close("") + Ping("ignored") +
                       Text("ignored"));
  ASSERT_EQ(o.events.size(), 2u);
  EXPECT_EQ(o.events[0].data, "Hello World!");
  EXPECT_EQ(o.events[1].type, Type::kClose);
  EXPECT_EQ(o.events[1].code, 1000);
  EXPECT_EQ(o.sent, (std::vector<ServerFrame>{CloseFrame(1000)}));
  EXPECT_EQ(o.state, Session::State::kClosed);
  // 7.1.5: a close in the middle of a fragmented message
  o = Exchange(Text("fragment1", false) + CloseCode(1000) + Cont("fragment2", true));
  ASSERT_EQ(o.events.size(), 1u);
  EXPECT_EQ(o.events[0].type, Type::kClose);
}

// Autobahn 7.3.1-7.3.6: close bodies.
TEST(WebSocketAutobahn7, CloseBodies) {
  Outcome o = Exchange(Close(""));
  EXPECT_EQ(o.events.back().code, close_code::kNoStatus);
  EXPECT_EQ(o.sent, (std::vector<ServerFrame>{{Opcode::kClose, ""}}));
  ExpectFailed(Exchange(Close("\x03")), close_code::kProtocolError);
  o = Exchange(CloseCode(1000, "Hello World!"));
  EXPECT_EQ(o.events.back().data, "Hello World!");
  EXPECT_EQ(o.sent, (std::vector<ServerFrame>{CloseFrame(1000)}));
  o = Exchange(CloseCode(1000, std::string(123, '*')));
  EXPECT_EQ(o.events.back().type, Type::kClose);
  ExpectFailed(Exchange(CloseCode(1000, std::string(124, '*'))), close_code::kProtocolError);
}

// Autobahn 7.5.1: a close reason that is not UTF-8.
TEST(WebSocketAutobahn7, CloseReasonNotUtf8) {
  ExpectFailed(
      Exchange(CloseCode(1000, "\xCE\xBA\xE1\xBD\xB9\xCF\x83\xCE\xBC\xCE\xB5\xED\xA0\x80")),
      close_code::kInvalidPayload);
}

// Autobahn 7.7.x (valid codes are echoed), 7.9.x and 7.13.x (invalid ones fail with 1002).
TEST(WebSocketAutobahn7, CloseCodes) {
  for (uint16_t code :
       {1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 3000, 3999, 4000, 4999}) {
    Outcome o = Exchange(CloseCode(code));
    EXPECT_EQ(o.events.back().type, Type::kClose) << code;
    EXPECT_EQ(o.sent, (std::vector<ServerFrame>{CloseFrame(code)})) << code;
  }
  for (uint16_t code : {0, 999, 1004, 1005, 1006, 1016, 1100, 2000, 2999, 5000, 65535}) {
    ExpectFailed(Exchange(CloseCode(code)), close_code::kProtocolError);
  }
}

// 9.x-style size limit: over the per-message limit fails with 1009 on the header alone, summed
// over fragments.
TEST(WebSocketSession, MessageSizeLimit) {
  SessionLimits limits;
  limits.max_message_bytes = 100;
  EXPECT_EQ(Exchange(Text(std::string(100, 'a')), limits).events[0].type, Type::kText);
  ExpectFailed(Exchange(Text(std::string(101, 'a')), limits), close_code::kMessageTooBig);
  ExpectFailed(
      Exchange(Binary(std::string(60, 'a'), false) + Cont(std::string(41, 'b'), true), limits),
      close_code::kMessageTooBig);
  // A declared 2^40-byte frame fails before any payload arrives.
  std::string huge = {
      static_cast<char>(0x82), static_cast<char>(0xFF), 0, 0, 1, 0, 0, 0, 0, 0, 1, 2, 3, 4};
  ExpectFailed(Feed(huge, 0, limits), close_code::kMessageTooBig);
  // Control frames do not count towards a message.
  EXPECT_EQ(Exchange(Binary(std::string(100, 'a'), false) + Ping("p") + Cont("", true), limits)
                .events.back()
                .data.size(),
            100u);
}

TEST(WebSocketSession, ServerInitiatedClose) {
  Session session;
  std::string output;
  std::vector<Event> events;
  session.send_text("hi", output);
  session.close(close_code::kGoingAway, "restart", output);
  EXPECT_EQ(session.state(), Session::State::kClosing);
  session.send_text("dropped", output);
  EXPECT_EQ(ParseServerFrames(output),
            (std::vector<ServerFrame>{{Opcode::kText, "hi"},
                                      {Opcode::kClose, close_payload(1001, "restart")}}));
  output.clear();
  // The peer's messages still arrive until its close, and a ping is not answered any more.
  session.receive(Text("late") + Ping("p") + CloseCode(1001), events, output);
  EXPECT_TRUE(output.empty());
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].data, "late");
  EXPECT_EQ(events[2].type, Type::kClose);
  EXPECT_EQ(session.state(), Session::State::kClosed);
  EXPECT_TRUE(session.close_received());
}

// A client-role session masks what it sends and refuses masked frames from the server.
TEST(WebSocketSession, ClientRole) {
  Session client(Role::kClient);
  std::string output;
  client.send_text("Hello", output);
  client.send_ping("p", output);
  Session server;
  std::vector<Event> events;
  std::string answer;
  server.receive(output, events, answer);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].data, "Hello");
  events.clear();
  std::string back;
  client.receive(answer, events, back);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].type, Type::kPong);
  EXPECT_EQ(events[0].data, "p");
  events.clear();
  client.receive(Text("masked"), events, back);
  EXPECT_EQ(events.back().type, Type::kError);
}

}  // namespace
}  // namespace peregrine::websocket
