// libFuzzer target for the WebSocket codec: a server-role Session fed a client's bytes, once
// plain and once with permessage-deflate (RFC 7692) on.
//
// The first input byte picks the message size limit (so small inputs reach the 1009 path) and
// the deflate parameters (window bits, context takeover); the rest is the wire. For every input
// it checks, in both sessions, and traps on violation:
//   - the outcome does not depend on how the bytes arrive: whole, split at a data-derived cut,
//     and byte by byte give the same events and the same output bytes;
//   - text messages are valid UTF-8, messages are within the limit, ping payloads ≤ 125 bytes;
//   - at most one kClose or kError, always the last event, and the session is then kClosed;
//     an error's code is 1002, 1007 or 1009;
//   - the output is a sequence of well-formed unmasked server frames (pongs echoing pings, at
//     most one close, last), which a client-role parser reads back without error;
//   - the frame parser alone never consumes more than it is given, and returns kNeedMore only
//     with the input consumed;
//   - deflate round trips: the wire sent as a message by a client-role deflate session (twice,
//     so a context taken over is used) arrives whole at the server-role one, or fails with 1009
//     when over the limit; the server's compressed answer inflates back at the client.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "websocket/frame.h"
#include "websocket/session.h"
#include "websocket/utf8.h"

namespace {

using peregrine::websocket::Event;
using peregrine::websocket::FrameParser;
using peregrine::websocket::Opcode;
using peregrine::websocket::PerMessageDeflate;
using peregrine::websocket::Role;
using peregrine::websocket::Session;
using peregrine::websocket::SessionLimits;

#define FUZZ_CHECK(cond)           \
  do {                             \
    if (!(cond)) __builtin_trap(); \
  } while (0)

struct Outcome {
  std::vector<Event> events;
  std::string output;
  Session::State state;
};

Outcome Feed(std::string_view wire, const SessionLimits& limits, size_t cut, bool bytewise,
             const PerMessageDeflate* deflate) {
  Session session(Role::kServer, limits);
  if (deflate != nullptr) session.enable_permessage_deflate(*deflate);
  Outcome out;
  if (bytewise) {
    for (size_t i = 0; i < wire.size(); ++i)
      session.receive(wire.substr(i, 1), out.events, out.output);
  } else {
    session.receive(wire.substr(0, cut), out.events, out.output);
    session.receive(wire.substr(cut), out.events, out.output);
  }
  out.state = session.state();
  return out;
}

bool Same(const Outcome& a, const Outcome& b) {
  if (a.output != b.output || a.state != b.state || a.events.size() != b.events.size())
    return false;
  for (size_t i = 0; i < a.events.size(); ++i) {
    if (a.events[i].type != b.events[i].type || a.events[i].code != b.events[i].code ||
        a.events[i].data != b.events[i].data) {
      return false;
    }
  }
  return true;
}

void CheckEvents(const Outcome& o, const SessionLimits& limits) {
  std::vector<std::string> pings;
  for (size_t i = 0; i < o.events.size(); ++i) {
    const Event& e = o.events[i];
    switch (e.type) {
      case Event::Type::kText:
        FUZZ_CHECK(peregrine::websocket::is_valid_utf8(e.data));
        [[fallthrough]];
      case Event::Type::kBinary:
        FUZZ_CHECK(e.data.size() <= limits.max_message_bytes);
        break;
      case Event::Type::kPing:
        pings.push_back(e.data);
        [[fallthrough]];
      case Event::Type::kPong:
        FUZZ_CHECK(e.data.size() <= 125);
        break;
      case Event::Type::kClose:
        FUZZ_CHECK(i + 1 == o.events.size());
        FUZZ_CHECK(peregrine::websocket::is_valid_utf8(e.data));
        break;
      case Event::Type::kError:
        FUZZ_CHECK(i + 1 == o.events.size());
        FUZZ_CHECK(e.code == 1002 || e.code == 1007 || e.code == 1009);
        break;
    }
  }
  const bool ended = !o.events.empty() && (o.events.back().type == Event::Type::kClose ||
                                           o.events.back().type == Event::Type::kError);
  FUZZ_CHECK(ended == (o.state == Session::State::kClosed));

  // The output: one pong per ping, in order, then the close when the session ended.
  FrameParser reader(Role::kClient);
  std::string_view rest = o.output;
  std::string payload;
  size_t pongs = 0;
  bool closed = false;
  for (;;) {
    FrameParser::Result r = reader.parse(rest, &payload);
    rest.remove_prefix(r.consumed);
    FUZZ_CHECK(r.status != FrameParser::Status::kError);
    if (r.status == FrameParser::Status::kNeedMore) break;
    if (r.status != FrameParser::Status::kFrameEnd) continue;
    FUZZ_CHECK(!closed);
    FUZZ_CHECK(reader.header().fin);
    if (reader.header().opcode == Opcode::kPong) {
      FUZZ_CHECK(pongs < pings.size() && payload == pings[pongs]);
      ++pongs;
    } else {
      FUZZ_CHECK(reader.header().opcode == Opcode::kClose);
      closed = true;
    }
    payload.clear();
  }
  FUZZ_CHECK(rest.empty() && reader.remaining() == 0);
  FUZZ_CHECK(pongs == pings.size());
  FUZZ_CHECK(closed == ended);
}

void CheckParser(std::string_view wire) {
  FrameParser parser(Role::kServer);
  std::string payload;
  // Every step consumes a byte or ends a frame whose header consumed two.
  const size_t max_steps = 2 * wire.size() + 2;
  for (size_t steps = 0; steps < max_steps; ++steps) {
    const size_t before = payload.size();
    FrameParser::Result r = parser.parse(wire, &payload);
    FUZZ_CHECK(r.consumed <= wire.size());
    FUZZ_CHECK(payload.size() - before <= r.consumed);
    wire.remove_prefix(r.consumed);
    if (r.status == FrameParser::Status::kNeedMore) {
      FUZZ_CHECK(wire.empty());
      return;
    }
    if (r.status == FrameParser::Status::kError) {
      FUZZ_CHECK(parser.error_code() == 1002);
      return;
    }
    if (payload.size() > (1 << 20)) payload.clear();
  }
  FUZZ_CHECK(false);  // no progress: a loop
}

// Same-thread client and server sessions with `params` exchange `message` twice each way.
void CheckRoundTrip(std::string_view message, const SessionLimits& limits,
                    const PerMessageDeflate& params) {
  Session client(Role::kClient, {}, params);
  Session server(Role::kServer, limits, params);
  const bool text = peregrine::websocket::is_valid_utf8(message);
  std::string wire;
  for (int i = 0; i < 2; ++i) {
    if (text) {
      client.send_text(message, wire);
    } else {
      client.send_binary(message, wire);
    }
  }
  std::vector<Event> events;
  std::string answer;
  // Valid compressed frames, split at a data-derived point.
  const size_t split = message.size() * 7 % (wire.size() + 1);
  server.receive(std::string_view(wire).substr(0, split), events, answer);
  server.receive(std::string_view(wire).substr(split), events, answer);
  if (message.size() > limits.max_message_bytes) {
    FUZZ_CHECK(events.size() == 1 && events[0].type == Event::Type::kError &&
               events[0].code == 1009);
    return;
  }
  FUZZ_CHECK(events.size() == 2);
  for (const Event& e : events) {
    FUZZ_CHECK(e.type == (text ? Event::Type::kText : Event::Type::kBinary));
    FUZZ_CHECK(e.data == message);
    server.send_binary(e.data, answer);
  }
  std::vector<Event> echoed;
  std::string ignored;
  client.receive(answer, echoed, ignored);
  FUZZ_CHECK(echoed.size() == 2 && echoed[0].data == message && echoed[1].data == message);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  SessionLimits limits;
  // 0-254: a small limit; 255: the default.
  if (data[0] != 255) limits.max_message_bytes = data[0] * 4u;
  std::string_view wire(reinterpret_cast<const char*>(data + 1), size - 1);
  const size_t cut = wire.empty() ? 0 : (data[0] * 131u + size) % (wire.size() + 1);

  PerMessageDeflate params;
  params.client_max_window_bits = 8 + (data[0] >> 1) % 8;
  params.server_max_window_bits = 8 + (data[0] >> 4) % 8;
  params.client_no_context_takeover = (data[0] & 1) != 0;
  params.server_no_context_takeover = (data[0] & 0x80) != 0;
  params.min_compress_bytes = data[0] % 3 == 0 ? 16 : 0;

  for (const PerMessageDeflate* deflate : {static_cast<const PerMessageDeflate*>(nullptr),
                                           static_cast<const PerMessageDeflate*>(&params)}) {
    Outcome whole = Feed(wire, limits, wire.size(), false, deflate);
    CheckEvents(whole, limits);
    FUZZ_CHECK(Same(whole, Feed(wire, limits, cut, false, deflate)));
    if (wire.size() <= 4096) FUZZ_CHECK(Same(whole, Feed(wire, limits, 0, true, deflate)));
  }
  CheckParser(wire);
  CheckRoundTrip(wire, limits, params);
  return 0;
}
