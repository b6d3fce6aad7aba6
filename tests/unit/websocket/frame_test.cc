#include "websocket/frame.h"

#include <gtest/gtest.h>

#include <string>

namespace peregrine::websocket {
namespace {

std::string Bytes(std::initializer_list<int> bytes) {
  std::string s;
  for (int b : bytes) s += static_cast<char>(b);
  return s;
}

struct Parsed {
  FrameParser::Status last = FrameParser::Status::kNeedMore;
  FrameHeader header;
  std::string payload;
  size_t consumed = 0;
  int frames = 0;
};

// Parses `input` given `step` bytes at a time (0: all at once) until an error or its end.
Parsed ParseAll(Role role, std::string_view input, size_t step = 0) {
  FrameParser parser(role);
  Parsed out;
  size_t fed = 0;
  while (fed < input.size() || out.last == FrameParser::Status::kHeader) {
    const size_t n = step == 0 ? input.size() - fed : std::min(step, input.size() - fed);
    std::string_view chunk = input.substr(fed, n);
    for (;;) {
      FrameParser::Result r = parser.parse(chunk, &out.payload);
      chunk.remove_prefix(r.consumed);
      out.consumed += r.consumed;
      out.last = r.status;
      if (r.status == FrameParser::Status::kHeader) out.header = parser.header();
      if (r.status == FrameParser::Status::kFrameEnd) ++out.frames;
      if (r.status == FrameParser::Status::kError) return out;
      if (r.status == FrameParser::Status::kNeedMore) break;
    }
    fed += n;
  }
  return out;
}

// RFC 6455 5.7, the examples.
TEST(WebSocketFrame, Rfc6455UnmaskedHello) {
  const std::string wire = Bytes({0x81, 0x05, 0x48, 0x65, 0x6c, 0x6c, 0x6f});
  Parsed p = ParseAll(Role::kClient, wire);
  EXPECT_EQ(p.frames, 1);
  EXPECT_TRUE(p.header.fin);
  EXPECT_EQ(p.header.opcode, Opcode::kText);
  EXPECT_EQ(p.payload, "Hello");
  std::string out;
  write_frame(out, Opcode::kText, "Hello");
  EXPECT_EQ(out, wire);
}

TEST(WebSocketFrame, Rfc6455MaskedHello) {
  const std::string wire =
      Bytes({0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58});
  for (size_t step : {0, 1, 3}) {
    Parsed p = ParseAll(Role::kServer, wire, step);
    EXPECT_EQ(p.frames, 1) << step;
    EXPECT_TRUE(p.header.masked);
    EXPECT_EQ(p.payload, "Hello") << step;
    EXPECT_EQ(p.consumed, wire.size());
  }
  std::string out;
  write_masked_frame(out, Opcode::kText, "Hello", {0x37, 0xfa, 0x21, 0x3d});
  EXPECT_EQ(out, wire);
}

TEST(WebSocketFrame, Rfc6455FragmentedUnmaskedText) {
  const std::string wire = Bytes({0x01, 0x03, 0x48, 0x65, 0x6c, 0x80, 0x02, 0x6c, 0x6f});
  Parsed p = ParseAll(Role::kClient, wire);
  EXPECT_EQ(p.frames, 2);
  EXPECT_EQ(p.header.opcode, Opcode::kContinuation);
  EXPECT_TRUE(p.header.fin);
  EXPECT_EQ(p.payload, "Hello");
  std::string out;
  write_frame(out, Opcode::kText, "Hel", false);
  write_frame(out, Opcode::kContinuation, "lo");
  EXPECT_EQ(out, wire);
}

TEST(WebSocketFrame, Rfc6455PingAndMaskedPong) {
  std::string out;
  write_frame(out, Opcode::kPing, "Hello");
  EXPECT_EQ(out, Bytes({0x89, 0x05, 0x48, 0x65, 0x6c, 0x6c, 0x6f}));
  out.clear();
  write_masked_frame(out, Opcode::kPong, "Hello", {0x37, 0xfa, 0x21, 0x3d});
  EXPECT_EQ(out, Bytes({0x8a, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58}));
  Parsed p = ParseAll(Role::kServer, out);
  EXPECT_EQ(p.header.opcode, Opcode::kPong);
  EXPECT_EQ(p.payload, "Hello");
}

TEST(WebSocketFrame, Rfc6455LengthEncodings) {
  std::string out;
  write_frame(out, Opcode::kBinary, std::string(256, 'x'));
  EXPECT_EQ(out.substr(0, 4), Bytes({0x82, 0x7E, 0x01, 0x00}));
  EXPECT_EQ(out.size(), 4u + 256);
  out.clear();
  write_frame(out, Opcode::kBinary, std::string(65536, 'x'));
  EXPECT_EQ(out.substr(0, 10), Bytes({0x82, 0x7F, 0, 0, 0, 0, 0, 1, 0, 0}));
  EXPECT_EQ(out.size(), 10u + 65536);
  Parsed p = ParseAll(Role::kClient, out, 997);
  EXPECT_EQ(p.header.length, 65536u);
  EXPECT_EQ(p.payload, std::string(65536, 'x'));
}

TEST(WebSocketFrame, RoundTripsEveryLengthBoundary) {
  for (size_t n : {0, 1, 125, 126, 127, 128, 65535, 65536, 70000}) {
    std::string payload(n, '\0');
    for (size_t i = 0; i < n; ++i) payload[i] = static_cast<char>(i * 7);
    std::string wire;
    write_masked_frame(wire, Opcode::kBinary, payload, {1, 2, 3, 4});
    Parsed p = ParseAll(Role::kServer, wire, n % 5 + 1);
    EXPECT_EQ(p.frames, 1) << n;
    EXPECT_EQ(p.header.length, n);
    EXPECT_EQ(p.payload, payload) << n;
  }
}

TEST(WebSocketFrame, EmptyFrameEndsWithoutMoreInput) {
  FrameParser parser(Role::kClient);
  std::string payload;
  const std::string wire = Bytes({0x89, 0x00});
  FrameParser::Result r = parser.parse(wire, &payload);
  EXPECT_EQ(r.status, FrameParser::Status::kHeader);
  EXPECT_EQ(r.consumed, 2u);
  r = parser.parse({}, &payload);
  EXPECT_EQ(r.status, FrameParser::Status::kFrameEnd);
}

// A bad header fails as soon as its first two bytes are in, before any length or payload.
TEST(WebSocketFrame, Violations) {
  struct Case {
    std::string wire;
    Role role;
    const char* why;
  } cases[] = {
      {Bytes({0x81, 0x05}), Role::kServer, "unmasked frame from a client"},
      {Bytes({0x81, 0x85}), Role::kClient, "masked frame from a server"},
      {Bytes({0xC1, 0x80}), Role::kServer, "RSV1"},
      {Bytes({0xA1, 0x80}), Role::kServer, "RSV2"},
      {Bytes({0x91, 0x80}), Role::kServer, "RSV3"},
      {Bytes({0x83, 0x80}), Role::kServer, "opcode 3"},
      {Bytes({0x87, 0x80}), Role::kServer, "opcode 7"},
      {Bytes({0x8B, 0x80}), Role::kServer, "opcode 11"},
      {Bytes({0x8F, 0x80}), Role::kServer, "opcode 15"},
      {Bytes({0x09, 0x80}), Role::kServer, "fragmented ping"},
      {Bytes({0x08, 0x80}), Role::kServer, "fragmented close"},
      {Bytes({0x89, 0xFE}), Role::kServer, "ping with 16-bit length"},
      {Bytes({0x8A, 0xFE}), Role::kServer, "pong with 16-bit length"},
      {Bytes({0x82, 0xFF, 0x80, 0, 0, 0, 0, 0, 0, 0}), Role::kServer, "length MSB"},
  };
  for (const Case& c : cases) {
    Parsed p = ParseAll(c.role, c.wire, 1);
    EXPECT_EQ(p.last, FrameParser::Status::kError) << c.why;
    FrameParser parser(c.role);
    std::string payload;
    FrameParser::Result r = parser.parse(c.wire, &payload);
    EXPECT_EQ(r.status, FrameParser::Status::kError) << c.why;
    EXPECT_EQ(parser.error_code(), close_code::kProtocolError);
    EXPECT_STRNE(parser.error_reason(), "");
    // Failed for good.
    EXPECT_EQ(parser.parse(Bytes({0x81, 0x80, 0, 0, 0, 0}), &payload).status,
              FrameParser::Status::kError);
  }
}

TEST(WebSocketFrame, ExtensionRsvBitAllowedWhenNegotiated) {
  FrameParser parser(Role::kServer, /*rsv_allowed=*/0x4);
  std::string payload;
  EXPECT_EQ(parser.parse(Bytes({0xC1, 0x80, 0, 0, 0, 0}), &payload).status,
            FrameParser::Status::kHeader);
  EXPECT_EQ(parser.header().rsv, 0x4);
}

TEST(WebSocketFrame, ClosePayload) {
  EXPECT_EQ(close_payload(1000, "bye"), Bytes({0x03, 0xE8, 'b', 'y', 'e'}));
  EXPECT_EQ(close_payload(close_code::kNoStatus, "ignored"), "");
  // Cut to 125 bytes, never inside a character: 62 two-byte "é" are 124 bytes, so the 123-byte
  // cut falls inside the last one and drops it.
  std::string reason;
  for (int i = 0; i < 62; ++i) reason += "\xC3\xA9";
  const std::string body = close_payload(1001, reason);
  EXPECT_EQ(body.size(), 2u + 122);
  EXPECT_EQ(body.substr(2), reason.substr(0, 122));
}

TEST(WebSocketFrame, CloseCodes) {
  for (uint16_t ok : {1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 1012, 1013, 1014, 3000,
                      3999, 4000, 4999}) {
    EXPECT_TRUE(is_valid_close_code(ok)) << ok;
  }
  for (uint16_t bad : {0, 999, 1004, 1005, 1006, 1015, 1016, 1100, 2000, 2999, 5000, 65535}) {
    EXPECT_FALSE(is_valid_close_code(bad)) << bad;
  }
}

}  // namespace
}  // namespace peregrine::websocket
