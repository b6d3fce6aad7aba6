// permessage-deflate (RFC 7692): the negotiation of offers, and sessions that inflate and
// compress. The byte examples are RFC 7692 section 7.2.3's; Autobahn's 12.x (compressed
// messages of many sizes) and 13.x (every window and context-takeover setting) run at codec
// level as a client-role session talking to a server-role one.
#include "websocket/deflate.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <zlib.h>

#include <iostream>
#include <string>
#include <vector>

#include "http/http1/parser.h"
#include "websocket/handshake.h"
#include "websocket/session.h"

namespace peregrine::websocket {
namespace {

using Type = Event::Type;

// ---- Negotiation ----

std::optional<PerMessageDeflate> Negotiate(std::vector<std::string_view> lines,
                                           std::string* response,
                                           const DeflateServerPolicy& policy = {}) {
  response->clear();
  return negotiate_permessage_deflate(lines, policy, response);
}

TEST(WebSocketDeflateNegotiation, DefaultsAskNoContextTakeoverBothWays) {
  std::string response;
  auto p = Negotiate({"permessage-deflate"}, &response);
  ASSERT_TRUE(p);
  EXPECT_EQ(response, "permessage-deflate; server_no_context_takeover; client_no_context_takeover");
  EXPECT_TRUE(p->server_no_context_takeover);
  EXPECT_TRUE(p->client_no_context_takeover);
  EXPECT_EQ(p->server_max_window_bits, 15);
  EXPECT_EQ(p->client_max_window_bits, 15);
}

TEST(WebSocketDeflateNegotiation, NothingOfferedOrDisabled) {
  std::string response = "x";
  EXPECT_FALSE(Negotiate({}, &response));
  EXPECT_EQ(response, "");
  EXPECT_FALSE(Negotiate({"x-webkit-deflate-frame"}, &response));
  DeflateServerPolicy off;
  off.enabled = false;
  EXPECT_FALSE(Negotiate({"permessage-deflate"}, &response, off));
  EXPECT_EQ(response, "");
}

TEST(WebSocketDeflateNegotiation, ContextTakeoverWhenThePolicyKeepsIt) {
  DeflateServerPolicy keep;
  keep.server_context_takeover = true;
  keep.client_context_takeover = true;
  std::string response;
  auto p = Negotiate({"permessage-deflate"}, &response, keep);
  ASSERT_TRUE(p);
  EXPECT_EQ(response, "permessage-deflate");
  EXPECT_FALSE(p->server_no_context_takeover);
  // The client's request binds the server whatever its policy.
  p = Negotiate({"permessage-deflate; server_no_context_takeover"}, &response, keep);
  ASSERT_TRUE(p);
  EXPECT_EQ(response, "permessage-deflate; server_no_context_takeover");
  EXPECT_TRUE(p->server_no_context_takeover);
  p = Negotiate({"permessage-deflate; client_no_context_takeover"}, &response, keep);
  EXPECT_EQ(response, "permessage-deflate; client_no_context_takeover");
}

TEST(WebSocketDeflateNegotiation, WindowBits) {
  DeflateServerPolicy policy;
  policy.server_context_takeover = policy.client_context_takeover = true;
  policy.server_max_window_bits = 12;
  policy.client_max_window_bits = 10;
  std::string response;
  // Chrome's offer: the client lets the server choose its window.
  auto p = Negotiate({"permessage-deflate; client_max_window_bits"}, &response, policy);
  ASSERT_TRUE(p);
  EXPECT_EQ(response, "permessage-deflate; server_max_window_bits=12; client_max_window_bits=10");
  EXPECT_EQ(p->server_max_window_bits, 12);
  EXPECT_EQ(p->client_max_window_bits, 10);
  // The smaller of the client's request and the policy.
  p = Negotiate({"permessage-deflate; server_max_window_bits=9; client_max_window_bits=13"},
                &response, policy);
  ASSERT_TRUE(p);
  EXPECT_EQ(response, "permessage-deflate; server_max_window_bits=9; client_max_window_bits=10");
  p = Negotiate({"permessage-deflate;server_max_window_bits=\"8\";client_max_window_bits=\"1\\5\""},
                &response);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->server_max_window_bits, 8);
  EXPECT_EQ(p->client_max_window_bits, 15);
  // Without client_max_window_bits in the offer the client's window cannot be limited (7.1.2.2).
  p = Negotiate({"permessage-deflate"}, &response, policy);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->client_max_window_bits, 15);
  EXPECT_EQ(response, "permessage-deflate; server_max_window_bits=12");
}

TEST(WebSocketDeflateNegotiation, MalformedOffersAreDeclined) {
  std::string response;
  for (std::string_view offer : {
           "permessage-deflate; server_no_context_takeover; server_no_context_takeover",
           "permessage-deflate; client_max_window_bits=10; client_max_window_bits",
           "permessage-deflate; foo",
           "permessage-deflate; server_no_context_takeover=1",
           "permessage-deflate; client_no_context_takeover=\"\"",
           "permessage-deflate; server_max_window_bits",
           "permessage-deflate; server_max_window_bits=7",
           "permessage-deflate; server_max_window_bits=16",
           "permessage-deflate; server_max_window_bits=08",
           "permessage-deflate; client_max_window_bits=1 0",
           "permessage-deflate; client_max_window_bits=\"1 0\"",
           "permessage-deflate; client_max_window_bits=\"10",
           "permessage-deflate; =10",
           "permessage-deflate;",
           "permessage-deflate server_no_context_takeover",
       }) {
    EXPECT_FALSE(Negotiate({offer}, &response)) << offer;
    EXPECT_EQ(response, "") << offer;
  }
}

TEST(WebSocketDeflateNegotiation, FirstAcceptableOfferWins) {
  std::string response;
  // The client's fallbacks, in its order of preference: the invalid first offer is passed over.
  auto p = Negotiate(
      {"permessage-deflate; server_max_window_bits=7, permessage-deflate; server_max_window_bits=10"
       ", permessage-deflate"},
      &response);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->server_max_window_bits, 10);
  // Over several header lines, other extensions and empty elements in between.
  p = Negotiate({"x-webkit-deflate-frame, ,", "foo; a=\"b, permessage-deflate\"",
                 "Permessage-Deflate ; client_max_window_bits = 11 ,permessage-deflate"},
                &response);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->client_max_window_bits, 11);
  EXPECT_EQ(response,
            "permessage-deflate; server_no_context_takeover; client_no_context_takeover; "
            "client_max_window_bits=11");
}

TEST(WebSocketDeflateNegotiation, FromARequest) {
  const std::string text =
      "GET /chat HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
      "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
      "Sec-WebSocket-Extensions: permessage-deflate; server_max_window_bits=16\r\n"
      "Sec-WebSocket-Extensions: permessage-deflate; server_max_window_bits=11\r\n\r\n";
  http1::RequestParser parser;
  Request request;
  ASSERT_EQ(parser.parse(text, request).status, http1::ParseStatus::kDone);
  std::string response;
  auto p = negotiate_permessage_deflate(request, DeflateServerPolicy{}, &response);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->server_max_window_bits, 11);
  EXPECT_EQ(permessage_deflate_response(*p), response);
  HandshakeAnswer answer = check_upgrade(request);
  set_extensions(answer, response);
  EXPECT_NE(response_head(answer).find("\r\nSec-WebSocket-Extensions: permessage-deflate; "
                                       "server_no_context_takeover; client_no_context_takeover; "
                                       "server_max_window_bits=11\r\n"),
            std::string::npos)
      << response_head(answer);
  HandshakeAnswer refused = check_upgrade(Request{});
  set_extensions(refused, response);
  EXPECT_EQ(refused.headers.size(), 3u);  // a 426 names no extension
}

// ---- Sessions ----

std::string Bytes(std::initializer_list<int> bytes) {
  std::string s;
  for (int b : bytes) s += static_cast<char>(b);
  return s;
}

// A client's frame with `b0` (FIN|RSV|opcode) as given.
std::string ClientFrame(uint8_t b0, std::string_view payload) {
  std::string out;
  write_masked_frame(out, static_cast<Opcode>(b0 & 0x0F), payload, {0x37, 0xfa, 0x21, 0x3d},
                     (b0 & 0x80) != 0, (b0 >> 4) & 0x7);
  return out;
}

PerMessageDeflate Params(bool client_takeover = false, bool server_takeover = false) {
  PerMessageDeflate p;
  p.client_no_context_takeover = !client_takeover;
  p.server_no_context_takeover = !server_takeover;
  p.min_compress_bytes = 0;
  return p;
}

struct Outcome {
  std::vector<Event> events;
  std::string output;
};

Outcome Feed(std::string_view wire, const PerMessageDeflate& params, size_t step,
             SessionLimits limits = {}) {
  Session session(Role::kServer, limits, params);
  Outcome out;
  if (step == 0) step = wire.size() + 1;
  for (size_t i = 0; i < wire.size(); i += step)
    session.receive(wire.substr(i, step), out.events, out.output);
  return out;
}

// Whole, in 1-byte and in 7-byte pieces: the same events and answer.
Outcome Exchange(std::string_view wire, const PerMessageDeflate& params,
                 SessionLimits limits = {}) {
  Outcome whole = Feed(wire, params, 0, limits);
  for (size_t step : {1, 7}) {
    Outcome chopped = Feed(wire, params, step, limits);
    EXPECT_EQ(chopped.output, whole.output) << "step " << step;
    EXPECT_EQ(chopped.events, whole.events) << "step " << step;
  }
  return whole;
}

void ExpectTexts(const Outcome& o, std::vector<std::string> texts) {
  ASSERT_EQ(o.events.size(), texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    EXPECT_EQ(o.events[i].type, Type::kText) << o.events[i].data;
    EXPECT_EQ(o.events[i].data, texts[i]);
  }
  EXPECT_EQ(o.output, "");
}

void ExpectFailed(const Outcome& o, uint16_t code) {
  ASSERT_FALSE(o.events.empty());
  EXPECT_EQ(o.events.back().type, Type::kError);
  EXPECT_EQ(o.events.back().code, code) << o.events.back().data;
  EXPECT_EQ(o.output.substr(2, 2), close_payload(code, {}));
}

const std::string kHello = Bytes({0xf2, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00});

// RFC 7692 7.2.3.1: "Hello" in one compressed block, in one frame and in two fragments.
TEST(WebSocketDeflateSession, Rfc7692HelloOneBlock) {
  ExpectTexts(Exchange(ClientFrame(0xc1, kHello), Params()), {"Hello"});
  ExpectTexts(Exchange(ClientFrame(0x41, kHello.substr(0, 3)) + ClientFrame(0x80, kHello.substr(3)),
                       Params()),
              {"Hello"});
  // A compressed message with control frames between its fragments.
  const Outcome o =
      Exchange(ClientFrame(0x41, kHello.substr(0, 2)) + ClientFrame(0x89, "p") +
                   ClientFrame(0x00, kHello.substr(2, 2)) + ClientFrame(0x80, kHello.substr(4)),
               Params());
  ASSERT_EQ(o.events.size(), 2u);
  EXPECT_EQ(o.events[0].type, Type::kPing);
  EXPECT_EQ(o.events[1].data, "Hello");
}

// RFC 7692 7.2.3.2: the second "Hello" refers to the first through the shared window.
TEST(WebSocketDeflateSession, Rfc7692SharedWindow) {
  const std::string second = Bytes({0xf2, 0x00, 0x11, 0x00, 0x00});
  const std::string wire = ClientFrame(0xc1, kHello) + ClientFrame(0xc1, second);
  ExpectTexts(Exchange(wire, Params(/*client_takeover=*/true)), {"Hello", "Hello"});
  // Without context takeover the reference points before the message: not inflatable.
  const Outcome o = Exchange(wire, Params(false));
  ASSERT_EQ(o.events.size(), 2u);
  EXPECT_EQ(o.events[0].data, "Hello");
  ExpectFailed(o, close_code::kInvalidPayload);
}

// RFC 7692 7.2.3.3 and 7.2.3.5: a stored block, and two blocks in one message.
TEST(WebSocketDeflateSession, Rfc7692StoredAndTwoBlocks) {
  ExpectTexts(Exchange(ClientFrame(0xc1, Bytes({0x00, 0x05, 0x00, 0xfa, 0xff, 0x48, 0x65, 0x6c,
                                                0x6c, 0x6f, 0x00})),
                       Params()),
              {"Hello"});
  ExpectTexts(Exchange(ClientFrame(0xc1, Bytes({0xf2, 0x48, 0x05, 0x00, 0x00, 0x00, 0xff, 0xff,
                                                0xca, 0xc9, 0xc9, 0x07, 0x00})),
                       Params()),
              {"Hello"});
}

// RFC 7692 7.2.3.4: a BFINAL block; with context takeover the window survives it.
TEST(WebSocketDeflateSession, Rfc7692FinalBlock) {
  const std::string final_block = Bytes({0xf3, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00, 0x00});
  ExpectTexts(Exchange(ClientFrame(0xc1, final_block), Params()), {"Hello"});
  ExpectTexts(Exchange(ClientFrame(0xc1, final_block) +
                           ClientFrame(0xc1, Bytes({0xf2, 0x00, 0x11, 0x00, 0x00})),
                       Params(true)),
              {"Hello", "Hello"});
}

// The sending side of 7.2.3.1 and 7.2.3.2: zlib produces the RFC's bytes.
TEST(WebSocketDeflateSession, SendsRfc7692Bytes) {
  for (bool takeover : {false, true}) {
    Session session(Role::kServer, {}, Params(false, takeover));
    std::string out;
    session.send_text("Hello", out);
    session.send_text("Hello", out);
    // Without context takeover, 7 compressed bytes for 5 are not worth sending.
    const std::string first = takeover ? Bytes({0xc1, 0x07}) + kHello : "\x81\x05Hello";
    const std::string second = takeover ? Bytes({0xc1, 0x05, 0xf2, 0x00, 0x11, 0x00, 0x00}) : first;
    EXPECT_EQ(out, first + second) << takeover;
  }
}

TEST(WebSocketDeflateSession, SmallMessagesGoUncompressed) {
  PerMessageDeflate p = Params();
  p.min_compress_bytes = 64;
  Session session(Role::kServer, {}, p);
  std::string out;
  session.send_binary("short", out);
  EXPECT_EQ(out, Bytes({0x82, 0x05}) + "short");
  out.clear();
  const std::string long_text(100, 'a');
  session.send_text(long_text, out);
  EXPECT_EQ(static_cast<uint8_t>(out[0]), 0xc1);
  EXPECT_LT(out.size(), 20u);
  // Without context takeover, what does not compress goes as it is.
  std::string random(200, '\0');
  uint32_t x = 12345;
  for (char& c : random) {
    x = x * 1103515245 + 12345;
    c = static_cast<char>(x >> 24);
  }
  out.clear();
  session.send_binary(random, out);
  EXPECT_EQ(static_cast<uint8_t>(out[0]) & 0x40, 0);
}

TEST(WebSocketDeflateSession, Rsv1WhereItMeansNothing) {
  // On a control frame, on a continuation frame, and RSV2 (no extension defines it).
  ExpectFailed(Exchange(ClientFrame(0xc9, "ping"), Params()), close_code::kProtocolError);
  ExpectFailed(
      Exchange(ClientFrame(0x41, kHello.substr(0, 3)) + ClientFrame(0xc0, kHello.substr(3)),
               Params()),
      close_code::kProtocolError);
  ExpectFailed(Exchange(ClientFrame(0xa1, "x"), Params()), close_code::kProtocolError);
  // Without the extension, RSV1 is a protocol error too.
  Session plain;
  std::vector<Event> events;
  std::string out;
  plain.receive(ClientFrame(0xc1, kHello), events, out);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].code, close_code::kProtocolError);
  // An uncompressed message in a deflate session is fine.
  ExpectTexts(Exchange(ClientFrame(0x81, "plain"), Params()), {"plain"});
}

TEST(WebSocketDeflateSession, BadCompressedData) {
  // BTYPE 11 is reserved; and valid deflate of bytes that are not UTF-8 in a text message.
  ExpectFailed(Exchange(ClientFrame(0xc1, Bytes({0xff, 0xff})), Params()),
               close_code::kInvalidPayload);
  Session client(Role::kClient, {}, Params());
  std::string wire;
  client.send_text("caf\xc3", wire);
  Outcome o = Exchange(wire, Params());
  ExpectFailed(o, close_code::kInvalidPayload);
  EXPECT_EQ(o.events.back().data, "text message ends inside a UTF-8 character");
  wire.clear();
  client.send_binary("caf\xc3", wire);
  ASSERT_EQ(Exchange(wire, Params()).events.size(), 1u);
}

// A zip bomb: 8 MiB of zeros in 8 KiB. The limit applies to the inflated size, as it inflates.
TEST(WebSocketDeflateSession, ZipBombIsMessageTooBig) {
  Session client(Role::kClient, {}, Params());
  std::string wire;
  client.send_binary(std::string(8 << 20, '\0'), wire);
  ASSERT_LT(wire.size(), 10000u);
  SessionLimits limits;
  limits.max_message_bytes = 1 << 20;
  ExpectFailed(Exchange(wire, Params(), limits), close_code::kMessageTooBig);
  // Exactly at the limit passes; one byte over fails.
  for (uint64_t size : {uint64_t{1} << 20, (uint64_t{1} << 20) + 1}) {
    wire.clear();
    client.send_binary(std::string(size, 'z'), wire);
    const Outcome o = Feed(wire, Params(), 0, limits);
    ASSERT_EQ(o.events.size(), 1u);
    EXPECT_EQ(o.events[0].type, size == limits.max_message_bytes ? Type::kBinary : Type::kError);
  }
  // The compressed size is bounded too, on the frame header's word.
  limits.max_message_bytes = 100;
  ExpectFailed(Exchange(ClientFrame(0xc2, std::string(2000, '\0')), Params(), limits),
               close_code::kMessageTooBig);
}

// 1 GiB of zeros in about 1 MB: zlib's output for each further MiB of zeros is the same bytes,
// so the bomb is built from two MiB compressed. Inflating it whole would raise the peak memory
// by a gigabyte; the session stops at the limit.
TEST(WebSocketDeflateSession, GigabyteBombStopsAtTheLimit) {
  z_stream z{};
  ASSERT_EQ(deflateInit2(&z, 9, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string zeros(1 << 20, '\0');
  std::string chunks[2];
  for (std::string& chunk : chunks) {
    chunk.resize(4096);
    z.next_in = reinterpret_cast<Bytef*>(zeros.data());
    z.avail_in = static_cast<uInt>(zeros.size());
    z.next_out = reinterpret_cast<Bytef*>(chunk.data());
    z.avail_out = static_cast<uInt>(chunk.size());
    ASSERT_EQ(deflate(&z, Z_SYNC_FLUSH), Z_OK);
    chunk.resize(chunk.size() - z.avail_out);
  }
  deflateEnd(&z);
  std::string bomb = chunks[0];
  for (int i = 1; i < 1024; ++i) bomb += chunks[1];
  ASSERT_LT(bomb.size(), 1100000u);
  const std::string wire = ClientFrame(0xc2, bomb.substr(0, bomb.size() - 4));

  rusage before{};
  getrusage(RUSAGE_SELF, &before);
  const Outcome o = Feed(wire, Params(), 0);
  rusage after{};
  getrusage(RUSAGE_SELF, &after);
  ExpectFailed(o, close_code::kMessageTooBig);               // the default limit, 16 MiB
  EXPECT_LT(after.ru_maxrss - before.ru_maxrss, 200 << 10);  // KiB: well under the gigabyte
}

// Autobahn 12.x (sizes and payloads) and 13.x (windows 8-15, each context-takeover setting):
// a client-role session compresses, the server-role one inflates, and back.
TEST(WebSocketDeflateSession, AutobahnRoundTrips) {
  std::vector<std::string> messages;
  for (size_t n : {0, 1, 16, 64, 256, 1024, 4096, 32768, 131072}) {
    std::string m(n, '\0');
    // Text that repeats at distances up to 8 KiB, with some noise: back-references of every size.
    for (size_t i = 0; i < n; ++i)
      m[i] = static_cast<char>('a' + ((i % (1 + n / 8)) * 31 + (i * i % 7 == 0 ? i : 0)) % 26);
    messages.push_back(m);
  }
  for (int bits = 8; bits <= 15; ++bits) {
    for (int takeover = 0; takeover < 4; ++takeover) {
      PerMessageDeflate p = Params(takeover & 1, takeover & 2);
      p.client_max_window_bits = p.server_max_window_bits = bits;
      Session client(Role::kClient, {}, p);
      Session server(Role::kServer, {}, p);
      std::string to_server, to_client;
      for (int round = 0; round < 2; ++round)
        for (const std::string& m : messages) client.send_text(m, to_server);
      std::vector<Event> events;
      for (size_t i = 0; i < to_server.size(); i += 4093)
        server.receive(std::string_view(to_server).substr(i, 4093), events, to_client);
      ASSERT_EQ(events.size(), 2 * messages.size())
          << bits << " " << takeover << " " << events.back().data;
      for (size_t i = 0; i < events.size(); ++i) {
        ASSERT_EQ(events[i].type, Type::kText);
        ASSERT_EQ(events[i].data, messages[i % messages.size()]) << bits << " " << i;
        // The server echoes; the client inflates.
        server.send_text(events[i].data, to_client);
      }
      size_t raw = 0;
      for (const std::string& m : messages) raw += 2 * m.size();
      // Huffman coding alone (8 bits) saves less than matches do.
      EXPECT_LT(to_server.size(), bits == 8 ? raw * 3 / 4 : raw / 4) << bits;
      std::vector<Event> echoed;
      std::string ignored;
      client.receive(to_client, echoed, ignored);
      ASSERT_EQ(echoed.size(), events.size());
      for (size_t i = 0; i < echoed.size(); ++i) ASSERT_EQ(echoed[i].data, events[i].data);
    }
  }
}

// zlib's memory, measured through its allocator: what a connection costs at rest and while it
// receives a compressed message, with the defaults and with context takeover.
TEST(WebSocketDeflateSession, MemoryPerConnection) {
  Session client(Role::kClient, {}, Params());
  std::string wire;
  client.send_text(std::string(1000, 'x'), wire);
  const std::string frame = wire;
  wire.clear();
  // The shared per-thread compressor exists from here on; it is not a connection's cost.
  const int64_t base = deflate_memory_in_use();

  std::vector<Session> sessions;
  for (int i = 0; i < 100; ++i) sessions.emplace_back(Role::kServer, SessionLimits{}, Params());
  std::vector<Event> events;
  std::string out;
  for (Session& s : sessions) {
    s.receive(std::string_view(frame).substr(0, 10), events, out);  // a message in progress
  }
  const int64_t receiving = (deflate_memory_in_use() - base) / 100;
  for (Session& s : sessions) {
    s.receive(std::string_view(frame).substr(10), events, out);
    s.send_text(std::string(1000, 'y'), out);
  }
  ASSERT_EQ(events.size(), 100u);
  const int64_t at_rest = deflate_memory_in_use() - base;
  EXPECT_EQ(at_rest, 0);
  EXPECT_GT(receiving, 1 << 15);  // the 32 KiB window, and inflate's state
  EXPECT_LT(receiving, 48 << 10);
  sessions.clear();

  for (int i = 0; i < 100; ++i)
    sessions.emplace_back(Role::kServer, SessionLimits{}, Params(true, true));
  for (Session& s : sessions) {
    s.receive(frame, events, out);
    s.send_text(std::string(1000, 'y'), out);
  }
  const int64_t takeover = (deflate_memory_in_use() - base) / 100;
  EXPECT_GT(takeover, 256 << 10);
  EXPECT_LT(takeover, 320 << 10);
  PerMessageDeflate small = Params(true, true);
  small.server_max_window_bits = small.client_max_window_bits = 10;
  small.mem_level = 4;
  sessions.clear();
  ASSERT_EQ(deflate_memory_in_use(), base);
  for (int i = 0; i < 100; ++i) sessions.emplace_back(Role::kServer, SessionLimits{}, small);
  for (Session& s : sessions) s.send_text(std::string(1000, 'y'), out);
  for (Session& s : sessions) s.receive(frame, events, out);
  const int64_t takeover_small = (deflate_memory_in_use() - base) / 100;
  std::cout << "zlib bytes per connection: at rest " << at_rest << ", receiving " << receiving
            << ", context takeover 15/8 " << takeover << ", context takeover 10/4 "
            << takeover_small << ", sizeof(Session) " << sizeof(Session) << "\n";
}

}  // namespace
}  // namespace peregrine::websocket
