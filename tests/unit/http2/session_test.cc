// The pure HTTP/2 session (src/http2/session/): hand-built client frames in, the server's frames
// parsed back out. Each RFC 9113 rule the session enforces and each abuse defence has a case.
#include "http2/session/session.h"

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/spares.h"
#include "http2/hpack/decoder.h"
#include "http2/hpack/encoder.h"

namespace peregrine::http2::session {
namespace {

constexpr std::string_view kPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

enum : uint8_t {
  DATA = 0,
  HEADERS = 1,
  PRIORITY = 2,
  RST_STREAM = 3,
  SETTINGS = 4,
  PUSH_PROMISE = 5,
  PING = 6,
  GOAWAY = 7,
  WINDOW_UPDATE = 8,
  CONTINUATION = 9,
};

std::string be32(uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
          static_cast<char>(v)};
}

std::string frame(uint8_t type, uint8_t flags, uint32_t stream, std::string_view payload) {
  std::string out;
  const auto n = static_cast<uint32_t>(payload.size());
  out.push_back(static_cast<char>(n >> 16));
  out.push_back(static_cast<char>(n >> 8));
  out.push_back(static_cast<char>(n));
  out.push_back(static_cast<char>(type));
  out.push_back(static_cast<char>(flags));
  out += be32(stream);
  out.append(payload);
  return out;
}

std::string setting(uint16_t id, uint32_t value) {
  std::string out{static_cast<char>(id >> 8), static_cast<char>(id)};
  return out + be32(value);
}

struct Frame {
  uint8_t type;
  uint8_t flags;
  uint32_t stream;
  std::string payload;
  uint32_t u32(size_t at = 0) const {
    const auto* u = reinterpret_cast<const uint8_t*>(payload.data() + at);
    return uint32_t{u[0]} << 24 | uint32_t{u[1]} << 16 | uint32_t{u[2]} << 8 | u[3];
  }
};

std::vector<Frame> parse(std::string_view bytes) {
  std::vector<Frame> out;
  while (bytes.size() >= 9) {
    const auto* u = reinterpret_cast<const uint8_t*>(bytes.data());
    const uint32_t n = uint32_t{u[0]} << 16 | uint32_t{u[1]} << 8 | u[2];
    EXPECT_LE(9 + n, bytes.size());
    if (9 + n > bytes.size()) break;
    Frame f{u[3], u[4], (uint32_t{u[5]} << 24 | uint32_t{u[6]} << 16 | uint32_t{u[7]} << 8 | u[8]),
            std::string(bytes.substr(9, n))};
    out.push_back(std::move(f));
    bytes.remove_prefix(9 + n);
  }
  EXPECT_TRUE(bytes.empty());
  return out;
}

struct Recorder : Events {
  struct Request {
    int32_t id = 0;
    std::vector<std::pair<std::string, std::string>> fields;
    std::string body;
    bool head_done = false;
    bool ended = false;
    bool closed = false;
    ErrorCode code = ErrorCode::kNoError;
  };
  std::vector<Request> requests;
  std::string body_to_send;  // what read_body hands out, per stream
  bool defer = false;
  bool reject_field = false;
  std::vector<std::pair<int32_t, ErrorCode>> closes;
  int completes = 0;
  int acks = 0;
  int goaways = 0;
  std::string last_error;

  Request* find(int32_t id) {
    for (Request& r : requests)
      if (r.id == id) return &r;
    return nullptr;
  }
  void on_stream_begin(Stream& s) override {
    requests.push_back({});
    requests.back().id = s.id;
  }
  bool on_field(Stream& s, std::string_view name, std::string_view value, bool) override {
    find(s.id)->fields.emplace_back(std::string(name), std::string(value));
    return !(reject_field && name == "x-bad");
  }
  void on_headers(Stream& s, bool end_stream, bool trailers) override {
    Request* r = find(s.id);
    r->head_done = true;
    if (end_stream) r->ended = true;
  }
  void on_data(Stream& s, std::string_view bytes, bool end_stream) override {
    Request* r = find(s.id);
    r->body.append(bytes);
    if (end_stream) r->ended = true;
  }
  void on_stream_close(Stream& s, ErrorCode code) override {
    closes.emplace_back(s.id, code);
    if (Request* r = find(s.id)) {
      r->closed = true;
      r->code = code;
    }
  }
  void on_response_complete(Stream& s) override {
    ++completes;
    if (on_complete) on_complete(s);
  }
  std::function<void(Stream&)> on_complete;
  void read_body(Stream& s, std::string& out, size_t max, bool& last) override {
    if (defer) return;
    const size_t n = std::min(max, body_to_send.size());
    out.append(body_to_send, 0, n);
    body_to_send.erase(0, n);
    last = body_to_send.empty();
  }
  void on_settings_ack() override { ++acks; }
  void on_goaway(int32_t, ErrorCode) override { ++goaways; }
  void on_connection_error(ErrorCode, const char* why) override { last_error = why; }
  void on_malformed(Stream&, const char* why) override { malformed.push_back(why); }
  std::vector<std::string> malformed;
};

class SessionTest : public ::testing::Test {
 protected:
  SessionTest() { reset(Options{}); }

  void reset(const Options& options) {
    session.reset();
    events = Recorder{};
    session = std::make_unique<Session>(events, options);
    client = hpack::Encoder();
  }

  void start(const Options& options) {
    reset(options);
    open();
  }

  // The preface and an empty SETTINGS; the server's first output is read and dropped.
  void open() {
    ASSERT_TRUE(session->receive(std::string(kPreface) + frame(SETTINGS, 0, 0, "")));
    std::vector<Frame> f = out();
    ASSERT_GE(f.size(), 2u);
    EXPECT_EQ(f[0].type, SETTINGS);
  }

  std::string block(std::vector<std::pair<std::string, std::string>> fields = {}) {
    std::string b;
    for (auto& [n, v] : std::vector<std::pair<std::string, std::string>>{
             {":method", "GET"}, {":scheme", "https"}, {":path", "/"}, {":authority", "a"}})
      client.encode(b, n, v);
    for (auto& [n, v] : fields) client.encode(b, n, v);
    return b;
  }

  std::string get(uint32_t id, bool end_stream = true,
                  std::vector<std::pair<std::string, std::string>> fields = {}) {
    return frame(HEADERS, 0x4 | (end_stream ? 1 : 0), id, block(std::move(fields)));
  }

  std::vector<Frame> out() {
    std::string bytes;
    session->produce(bytes);
    return parse(bytes);
  }

  // The first frame of `type` in the server's next output.
  static const Frame* first(const std::vector<Frame>& frames, uint8_t type) {
    for (const Frame& f : frames)
      if (f.type == type) return &f;
    return nullptr;
  }

  void expect_goaway(ErrorCode code) {
    EXPECT_TRUE(session->terminated());
    EXPECT_FALSE(session->want_read());
    std::vector<Frame> f = out();
    const Frame* g = first(f, GOAWAY);
    ASSERT_NE(g, nullptr);
    EXPECT_EQ(g->u32(4), static_cast<uint32_t>(code)) << events.last_error;
  }

  void expect_rst(const std::vector<Frame>& f, uint32_t stream, ErrorCode code) {
    const Frame* r = first(f, RST_STREAM);
    ASSERT_NE(r, nullptr);
    EXPECT_EQ(r->stream, stream);
    EXPECT_EQ(r->u32(), static_cast<uint32_t>(code));
  }

  Recorder events;
  std::unique_ptr<Session> session;
  hpack::Encoder client;
};

// ---- Preface and SETTINGS ----

TEST_F(SessionTest, SendsSettingsAndConnectionWindowFirst) {
  std::vector<Frame> f = out();
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0].type, SETTINGS);
  EXPECT_EQ(f[0].flags, 0);
  bool no_priorities = false, push_off = false;
  for (size_t at = 0; at + 6 <= f[0].payload.size(); at += 6) {
    const int id =
        static_cast<uint8_t>(f[0].payload[at]) << 8 | static_cast<uint8_t>(f[0].payload[at + 1]);
    const uint32_t value = f[0].u32(at + 2);
    if (id == 9 && value == 1) no_priorities = true;
    if (id == 2 && value == 0) push_off = true;
    if (id == 3) {
      EXPECT_EQ(value, 128u);
    }
  }
  EXPECT_TRUE(no_priorities);
  EXPECT_TRUE(push_off);
  EXPECT_EQ(f[1].type, WINDOW_UPDATE);
  EXPECT_EQ(f[1].u32(), (1u << 20) - 65535);
}

TEST_F(SessionTest, PrefaceMayArriveByteByByte) {
  std::string input = std::string(kPreface) + frame(SETTINGS, 0, 0, setting(4, 100000)) + get(1);
  for (char c : input) ASSERT_TRUE(session->receive({&c, 1}));
  ASSERT_EQ(events.requests.size(), 1u);
  EXPECT_TRUE(events.requests[0].ended);
  EXPECT_EQ(events.requests[0].fields.size(), 4u);
}

TEST_F(SessionTest, BadPrefaceIsAProtocolError) {
  EXPECT_FALSE(session->receive("GET / HTTP/1.1\r\n\r\n"));
  expect_goaway(ErrorCode::kProtocolError);
}

TEST_F(SessionTest, PrefaceMustBeFollowedBySettings) {
  EXPECT_FALSE(session->receive(std::string(kPreface) + frame(PING, 0, 0, "12345678")));
  expect_goaway(ErrorCode::kProtocolError);
}

TEST_F(SessionTest, SettingsAreAcknowledgedAndOursAckCounted) {
  open();
  ASSERT_TRUE(session->receive(frame(SETTINGS, 0, 0, setting(1, 0) + setting(0x99, 7))));
  std::vector<Frame> f = out();
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].type, SETTINGS);
  EXPECT_EQ(f[0].flags, 1);
  EXPECT_FALSE(session->settings_acked());
  ASSERT_TRUE(session->receive(frame(SETTINGS, 1, 0, "")));
  EXPECT_TRUE(session->settings_acked());
  EXPECT_EQ(events.acks, 1);
}

TEST_F(SessionTest, SettingsErrors) {
  open();
  EXPECT_FALSE(session->receive(frame(SETTINGS, 0, 0, "12345")));
  expect_goaway(ErrorCode::kFrameSizeError);
  start({});
  EXPECT_FALSE(session->receive(frame(SETTINGS, 0, 0, setting(4, 0x80000000u))));
  expect_goaway(ErrorCode::kFlowControlError);
  start({});
  EXPECT_FALSE(session->receive(frame(SETTINGS, 0, 0, setting(5, 100))));
  expect_goaway(ErrorCode::kProtocolError);
  start({});
  EXPECT_FALSE(session->receive(frame(SETTINGS, 1, 0, "x")));
  expect_goaway(ErrorCode::kFrameSizeError);
  start({});
  EXPECT_FALSE(session->receive(frame(SETTINGS, 0, 3, "")));
  expect_goaway(ErrorCode::kProtocolError);
}

// ---- Frame sizes, PING, unknown frames, PUSH_PROMISE ----

TEST_F(SessionTest, FrameOverMaxFrameSizeIsAConnectionError) {
  open();
  EXPECT_FALSE(session->receive(frame(DATA, 0, 1, std::string(16385, 'x'))));
  expect_goaway(ErrorCode::kFrameSizeError);
}

TEST_F(SessionTest, PingIsAnsweredWithTheSamePayload) {
  open();
  ASSERT_TRUE(session->receive(frame(PING, 0, 0, "abcdefgh")));
  std::vector<Frame> f = out();
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].type, PING);
  EXPECT_EQ(f[0].flags, 1);
  EXPECT_EQ(f[0].payload, "abcdefgh");
  ASSERT_TRUE(session->receive(frame(PING, 1, 0, "abcdefgh")));  // an ACK is not answered
  EXPECT_TRUE(out().empty());
  EXPECT_FALSE(session->receive(frame(PING, 0, 0, "short")));
  expect_goaway(ErrorCode::kFrameSizeError);
}

TEST_F(SessionTest, UnknownFramesAndPriorityAreIgnored) {
  open();
  ASSERT_TRUE(session->receive(frame(0x42, 0xff, 5, "whatever")));
  ASSERT_TRUE(session->receive(frame(PRIORITY, 0, 3, be32(1) + "x")));
  ASSERT_TRUE(session->receive(get(1)));
  EXPECT_EQ(events.requests.size(), 1u);
  EXPECT_TRUE(out().empty());
}

TEST_F(SessionTest, PushPromiseFromAClientIsAProtocolError) {
  open();
  EXPECT_FALSE(session->receive(frame(PUSH_PROMISE, 4, 1, be32(2) + block())));
  expect_goaway(ErrorCode::kProtocolError);
}

// ---- HEADERS, CONTINUATION, streams ----

TEST_F(SessionTest, HeadersWithPaddingAndPriorityFields) {
  open();
  std::string payload = std::string(1, '\3') + be32(0) + "\x10" + block() + "pad";
  ASSERT_TRUE(session->receive(frame(HEADERS, 0x4 | 0x1 | 0x8 | 0x20, 1, payload)));
  ASSERT_EQ(events.requests.size(), 1u);
  EXPECT_EQ(events.requests[0].fields[2].second, "/");
  EXPECT_TRUE(events.requests[0].ended);
}

TEST_F(SessionTest, PaddingLongerThanThePayloadIsAProtocolError) {
  open();
  EXPECT_FALSE(session->receive(frame(HEADERS, 0x4 | 0x8, 1, std::string(1, '\50') + "ab")));
  expect_goaway(ErrorCode::kProtocolError);
}

TEST_F(SessionTest, ContinuationIsAssembled) {
  open();
  std::string b = block({{"x-long", std::string(300, 'v')}});
  ASSERT_TRUE(session->receive(frame(HEADERS, 0x1, 1, b.substr(0, 10))));
  EXPECT_TRUE(events.requests.empty() || !events.requests[0].head_done);
  ASSERT_TRUE(session->receive(frame(CONTINUATION, 0, 1, b.substr(10, 100))));
  ASSERT_TRUE(session->receive(frame(CONTINUATION, 0x4, 1, b.substr(110))));
  ASSERT_EQ(events.requests.size(), 1u);
  EXPECT_TRUE(events.requests[0].head_done);
  EXPECT_EQ(events.requests[0].fields.back().second, std::string(300, 'v'));
}

TEST_F(SessionTest, AnotherFrameInsideAHeaderBlockIsAProtocolError) {
  open();
  ASSERT_TRUE(session->receive(frame(HEADERS, 0x1, 1, block().substr(0, 3))));
  EXPECT_FALSE(session->receive(frame(PING, 0, 0, "12345678")));
  expect_goaway(ErrorCode::kProtocolError);
}

TEST_F(SessionTest, ContinuationWithoutHeadersIsAProtocolError) {
  open();
  EXPECT_FALSE(session->receive(frame(CONTINUATION, 0x4, 1, block())));
  expect_goaway(ErrorCode::kProtocolError);
}

// Defence: CONTINUATION flood (CVE-2024-28182).
TEST_F(SessionTest, ContinuationFloodEndsWithEnhanceYourCalm) {
  Options o;
  o.max_header_list_size = 4096;
  start(o);
  ASSERT_TRUE(session->receive(frame(HEADERS, 0, 1, block())));
  bool ok = true;
  for (int i = 0; i < 100 && ok; ++i)
    ok = session->receive(frame(CONTINUATION, 0, 1, std::string(1000, 'a')));
  EXPECT_FALSE(ok);
  expect_goaway(ErrorCode::kEnhanceYourCalm);
}

// Defence: HPACK bomb (one large table entry referenced many times).
TEST_F(SessionTest, HpackBombEndsWithEnhanceYourCalm) {
  Options o;
  o.max_header_list_size = 4096;
  start(o);
  // A literal with incremental indexing (new name "x-big", a 3,000-byte value), then indexed
  // references to that entry (dynamic index 62) many times.
  std::string b = block() + "\x40\x05x-big\x7f\xb9\x16" + std::string(3000, 'b');
  b += std::string(200, '\xbe');
  EXPECT_FALSE(session->receive(frame(HEADERS, 0x5, 1, b)));
  expect_goaway(ErrorCode::kEnhanceYourCalm);
}

TEST_F(SessionTest, EvenOrDecreasingStreamIds) {
  open();
  EXPECT_FALSE(session->receive(get(2)));
  expect_goaway(ErrorCode::kProtocolError);
  // h2spec 5.1.1 #2: stream 3 was never opened and 5 was: ids only go up (RFC 9113 5.1.1).
  start({});
  ASSERT_TRUE(session->receive(get(5)));
  EXPECT_FALSE(session->receive(get(3)));
  EXPECT_EQ(events.requests.size(), 1u);
  EXPECT_EQ(session->last_stream_id(), 5);
  expect_goaway(ErrorCode::kProtocolError);
  // Skipped from the start: stream 1 is below the first stream opened.
  start({});
  ASSERT_TRUE(session->receive(get(7)));
  EXPECT_FALSE(session->receive(get(1)));
  expect_goaway(ErrorCode::kProtocolError);
}

// RFC 9113 5.1: frames in flight when we reset a stream are ignored, its trailers' block still
// decoded (the HPACK table stays in step with the client's).
TEST_F(SessionTest, FramesOnAStreamWeResetAreIgnored) {
  open();
  ASSERT_TRUE(session->receive(get(1, false)));
  session->submit_rst_stream(1, ErrorCode::kInternalError);
  expect_rst(out(), 1, ErrorCode::kInternalError);
  ASSERT_TRUE(session->receive(frame(DATA, 0, 1, "in flight")));
  std::string t;
  client.encode(t, "x-trailer", "1");
  ASSERT_TRUE(session->receive(frame(HEADERS, 0x5, 1, t)));
  EXPECT_TRUE(out().empty());
  ASSERT_TRUE(session->receive(get(3, true, {{"x-trailer", "1"}}))) << "table in step";
  EXPECT_EQ(events.requests.back().fields.back().second, "1");
}

// h2spec 5.1 #8, #9: after the client's RST_STREAM, DATA or HEADERS on the stream are a stream
// error STREAM_CLOSED.
TEST_F(SessionTest, FramesAfterTheClientsResetAreStreamClosed) {
  open();
  ASSERT_TRUE(session->receive(get(1, false)));
  ASSERT_TRUE(session->receive(frame(RST_STREAM, 0, 1, be32(8))));
  ASSERT_TRUE(session->receive(frame(DATA, 1, 1, "test")));
  expect_rst(out(), 1, ErrorCode::kStreamClosed);
  start({});
  ASSERT_TRUE(session->receive(get(1, false)));
  ASSERT_TRUE(session->receive(frame(RST_STREAM, 0, 1, be32(8))));
  ASSERT_TRUE(session->receive(get(1)));
  expect_rst(out(), 1, ErrorCode::kStreamClosed);
  EXPECT_EQ(events.requests.size(), 1u);
  ASSERT_TRUE(session->receive(get(3))) << "the connection goes on";
  EXPECT_EQ(events.requests.size(), 2u);
}

// h2spec 5.1 #11, #12: a stream closed after both END_STREAMs takes nothing more: a connection
// error STREAM_CLOSED.
TEST_F(SessionTest, FramesOnAClosedStreamAreAConnectionError) {
  Session::Header h[] = {{":status", "204"}};
  for (const bool headers : {false, true}) {
    start({});
    ASSERT_TRUE(session->receive(get(1)));
    ASSERT_TRUE(session->submit_response(1, h, false));
    ASSERT_EQ(out().size(), 1u);
    ASSERT_EQ(events.closes.size(), 1u);
    EXPECT_FALSE(session->receive(headers ? get(1) : frame(DATA, 1, 1, "test")));
    expect_goaway(ErrorCode::kStreamClosed);
    EXPECT_EQ(events.requests.size(), 1u);
  }
  // WINDOW_UPDATE, RST_STREAM and PRIORITY may still come (RFC 9113 5.1).
  start({});
  ASSERT_TRUE(session->receive(get(1)));
  ASSERT_TRUE(session->submit_response(1, h, false));
  out();
  ASSERT_TRUE(session->receive(frame(WINDOW_UPDATE, 0, 1, be32(10))));
  ASSERT_TRUE(session->receive(frame(RST_STREAM, 0, 1, be32(8))));
  ASSERT_TRUE(session->receive(frame(PRIORITY, 0, 1, be32(0) + "x")));
  EXPECT_TRUE(out().empty());
}

// The memory of closed streams is short: a stream closed long ago (64 closes later) is
// forgotten, and its frames are dropped as a reset stream's are.
TEST_F(SessionTest, OldClosedStreamsAreForgotten) {
  open();
  Session::Header h[] = {{":status", "204"}};
  for (uint32_t id = 1; id < 2 * 70; id += 2) {
    ASSERT_TRUE(session->receive(get(id)));
    ASSERT_TRUE(session->submit_response(id, h, false));
    out();
  }
  ASSERT_TRUE(session->receive(frame(DATA, 1, 1, "old")));
  EXPECT_FALSE(session->receive(frame(DATA, 1, 137, "recent")));
  expect_goaway(ErrorCode::kStreamClosed);
}

// h2spec 5.3.1 #2 and 6.3 #2: PRIORITY is checked in every state: on a stream known to the
// session a stream error; on an idle one (nothing to reset) the connection ends.
TEST_F(SessionTest, BadPriorityFrames) {
  open();
  EXPECT_FALSE(session->receive(frame(PRIORITY, 0, 1, be32(1) + "x")));
  expect_goaway(ErrorCode::kProtocolError);
  start({});
  EXPECT_FALSE(session->receive(frame(PRIORITY, 0, 1, be32(0))));
  expect_goaway(ErrorCode::kFrameSizeError);
  start({});
  ASSERT_TRUE(session->receive(get(1, false)));
  ASSERT_TRUE(session->receive(frame(PRIORITY, 0, 1, be32(1) + "x")));
  expect_rst(out(), 1, ErrorCode::kProtocolError);
  start({});
  ASSERT_TRUE(session->receive(get(1)));
  Session::Header h[] = {{":status", "204"}};
  ASSERT_TRUE(session->submit_response(1, h, false));
  out();
  ASSERT_TRUE(session->receive(frame(PRIORITY, 0, 1, be32(0))));  // closed, 4 bytes
  expect_rst(out(), 1, ErrorCode::kFrameSizeError);
}

TEST_F(SessionTest, MalformedFieldsResetTheStream) {
  const std::vector<std::pair<std::string, std::string>> bad[] = {
      {{"X-Upper", "1"}},
      {{"connection", "close"}},
      {{"te", "gzip"}},
      {{"x-nul", std::string("a\0b", 3)}},
      {{"x-space", " lead"}},
      {{"x-bad", "app says no"}},
      {{"keep-alive", "5"}},
      {{"proxy-connection", "x"}},
      {{"upgrade", "h2c"}},
      {{"transfer-encoding", "chunked"}},
      {{"http2-settings", "AAMAAABkAAQAAP__"}},
      {{"x(y)", "1"}},
      {{"a/b", "1"}},
      {{"x-cr", "a\rb"}},
      {{"x-lf", "a\nb"}},
      {{"x-tab", "v\t"}},
      {{"x y", "1"}},
  };
  for (const auto& fields : bad) {
    start({});
    events.reject_field = true;
    ASSERT_TRUE(session->receive(get(1, true, fields)));
    std::vector<Frame> f = out();
    expect_rst(f, 1, ErrorCode::kProtocolError);
    EXPECT_EQ(events.closes.size(), 1u) << fields[0].first;
    EXPECT_EQ(session->errors_sent(), 1u);
    // The session's own verdicts say why, for the log; the application's refusal ("x-bad") is
    // its own to report.
    EXPECT_EQ(events.malformed.size(), fields[0].first == "x-bad" ? 0u : 1u) << fields[0].first;
  }
  start({});
  ASSERT_TRUE(session->receive(get(1, true, {{"te", "trailers"}})));
  EXPECT_TRUE(out().empty());
}

TEST_F(SessionTest, MalformedPseudoHeadersResetTheStream) {
  using Fields = std::vector<std::pair<std::string, std::string>>;
  using F = std::pair<std::string, std::string>;
  const F m{":method", "GET"}, sc{":scheme", "http"}, p{":path", "/"}, a{":authority", "x"};
  const Fields cases[] = {
      {m, sc, a},                          // no :path
      {sc, p, a},                          // no :method
      {m, p, a},                           // no :scheme
      {m, sc, p, a, {":foo", "bar"}},      // unknown
      {m, sc, p, {"x-a", "1"}, a},         // after a regular field
      {m, sc, p, a, {":path", "/again"}},  // repeated
      {m, sc, {":path", ""}, a},           // empty :path
      {m, sc, p, a, {":status", "200"}},   // a response's
      {{":method", "CONNECT"}, sc, p, a},  // CONNECT takes neither :scheme nor :path
  };
  for (const Fields& fields : cases) {
    start({});
    std::string b;
    for (const auto& [n, v] : fields) client.encode(b, n, v);
    ASSERT_TRUE(session->receive(frame(HEADERS, 0x5, 1, b)));
    expect_rst(out(), 1, ErrorCode::kProtocolError);
    EXPECT_TRUE(events.requests.empty() || !events.requests[0].head_done);
  }
  start({});
  std::string b;
  for (const auto& [n, v] : Fields{{":method", "CONNECT"}, a}) client.encode(b, n, v);
  ASSERT_TRUE(session->receive(frame(HEADERS, 0x4, 1, b)));
  EXPECT_TRUE(out().empty());
  ASSERT_EQ(events.requests.size(), 1u);
  EXPECT_TRUE(events.requests[0].head_done);
}

TEST_F(SessionTest, MaxConcurrentStreamsRefusesTheExtraOne) {
  Options o;
  o.max_concurrent_streams = 2;
  start(o);
  // Encoded in order: the client's HPACK table follows the blocks' order on the wire.
  std::string input = get(1);
  input += get(3);
  input += get(5);
  ASSERT_TRUE(session->receive(input)) << events.last_error;
  EXPECT_EQ(events.requests.size(), 2u);
  std::vector<Frame> f = out();
  expect_rst(f, 5, ErrorCode::kRefusedStream);
  EXPECT_EQ(session->last_stream_id(), 3);
  EXPECT_TRUE(session->want_read());
}

// ---- Responses and bodies ----

TEST_F(SessionTest, ResponseWithoutBodyClosesTheStream) {
  open();
  ASSERT_TRUE(session->receive(get(1)));
  Session::Header h[] = {{":status", "204"}, {"server", "p"}};
  ASSERT_TRUE(session->submit_response(1, h, false));
  EXPECT_FALSE(session->submit_response(1, h, false));  // once only
  std::vector<Frame> f = out();
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].type, HEADERS);
  EXPECT_EQ(f[0].flags, 0x5);
  hpack::Decoder d;
  std::vector<std::string> got;
  ASSERT_EQ(d.decode(f[0].payload, [&](const hpack::Field& x) { got.emplace_back(x.value); }),
            hpack::DecodeResult::kOk);
  EXPECT_EQ(got, (std::vector<std::string>{"204", "p"}));
  EXPECT_EQ(events.completes, 1);
  ASSERT_EQ(events.closes.size(), 1u);
  EXPECT_EQ(events.closes[0].second, ErrorCode::kNoError);
  EXPECT_EQ(session->live_streams(), 0u);
}

TEST_F(SessionTest, LargeHeadIsSplitIntoContinuation) {
  open();
  ASSERT_TRUE(session->receive(get(1)));
  std::string big(40000, 'z');
  Session::Header h[] = {{":status", "200"}, {"x-big", big}};
  ASSERT_TRUE(session->submit_response(1, h, false));
  std::vector<Frame> f = out();
  ASSERT_GE(f.size(), 3u);
  EXPECT_EQ(f[0].type, HEADERS);
  EXPECT_EQ(f[0].flags, 0x1);
  EXPECT_EQ(f[1].type, CONTINUATION);
  EXPECT_EQ(f.back().flags, 0x4);
  std::string joined;
  for (const Frame& x : f) joined += x.payload;
  hpack::Decoder d(4096, 1 << 20);
  size_t n = 0;
  EXPECT_EQ(d.decode(joined, [&](const hpack::Field& x) { n += x.value.size(); }),
            hpack::DecodeResult::kOk);
  EXPECT_EQ(n, 3 + big.size());
}

// A head submitted with a key that left the HPACK table alone is sent again as the same bytes
// for the same key, until anything changes the table.
TEST_F(SessionTest, ARepeatedHeadReusesItsBlockWhileTheTableIsUnchanged) {
  open();
  for (uint32_t id = 1; id <= 11; id += 2) ASSERT_TRUE(session->receive(get(id)));
  const Session::Header head[] = {
      {":status", "200"}, {"content-type", "text/plain"}, {"etag", "\"a\""}};
  EXPECT_FALSE(session->remembers_response("k"));
  ASSERT_TRUE(session->submit_response(1, head, false, "k"));
  EXPECT_FALSE(session->remembers_response("k"));  // that one added entries
  ASSERT_TRUE(session->submit_response(3, head, false, "k"));
  EXPECT_TRUE(session->remembers_response("k"));
  EXPECT_FALSE(session->remembers_response("j"));
  ASSERT_TRUE(session->submit_remembered_response(5, false));
  EXPECT_FALSE(session->submit_remembered_response(5, false));  // answered already
  EXPECT_TRUE(session->remembers_response("k"));
  // A head without a key that adds an entry changes the table: the block would be wrong now.
  const Session::Header other[] = {{":status", "200"}, {"x-new", "1"}};
  ASSERT_TRUE(session->submit_response(7, other, false));
  EXPECT_FALSE(session->remembers_response("k"));
  ASSERT_TRUE(session->submit_response(9, head, false, "k"));
  EXPECT_TRUE(session->remembers_response("k"));
  // So does the client's new table size, signalled at the start of the next block.
  ASSERT_TRUE(session->receive(frame(SETTINGS, 0, 0, setting(1, 100))));
  EXPECT_FALSE(session->remembers_response("k"));
  ASSERT_TRUE(session->submit_response(11, head, false, "k"));

  std::vector<Frame> f = out();
  hpack::Decoder d;
  std::vector<std::string> blocks;
  for (const Frame& x : f) {
    if (x.type != HEADERS) continue;
    blocks.push_back(x.payload);
    std::vector<std::pair<std::string, std::string>> got;
    ASSERT_EQ(
        d.decode(x.payload, [&](const hpack::Field& y) { got.emplace_back(y.name, y.value); }),
        hpack::DecodeResult::kOk)
        << x.stream;
    if (x.stream == 7) continue;
    EXPECT_EQ(got, (std::vector<std::pair<std::string, std::string>>{
                       {":status", "200"}, {"content-type", "text/plain"}, {"etag", "\"a\""}}))
        << x.stream;
  }
  ASSERT_EQ(blocks.size(), 6u);
  EXPECT_EQ(blocks[1], blocks[2]);  // streams 3 and 5
  EXPECT_EQ(blocks[2].size(), 3u);  // one byte a field
  EXPECT_EQ(events.completes, 6);
}

TEST_F(SessionTest, BodyFollowsStreamWindowAndWindowUpdates) {
  open();
  ASSERT_TRUE(session->receive(frame(SETTINGS, 0, 0, setting(4, 10))));
  out();
  ASSERT_TRUE(session->receive(get(1)));
  events.body_to_send = std::string(25, 'b');
  Session::Header h[] = {{":status", "200"}};
  ASSERT_TRUE(session->submit_response(1, h, true));
  std::vector<Frame> f = out();
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[1].type, DATA);
  EXPECT_EQ(f[1].payload.size(), 10u);
  EXPECT_FALSE(session->want_write());
  EXPECT_FALSE(session->receive(frame(WINDOW_UPDATE, 0, 9, be32(1))));  // idle stream 9
  expect_goaway(ErrorCode::kProtocolError);
}

TEST_F(SessionTest, WindowUpdateReleasesTheRestAndEndStream) {
  open();
  ASSERT_TRUE(session->receive(frame(SETTINGS, 0, 0, setting(4, 10))));
  out();
  ASSERT_TRUE(session->receive(get(1)));
  events.body_to_send = std::string(25, 'b');
  Session::Header h[] = {{":status", "200"}};
  ASSERT_TRUE(session->submit_response(1, h, true));
  out();
  ASSERT_TRUE(session->receive(frame(WINDOW_UPDATE, 0, 1, be32(100))));
  EXPECT_TRUE(session->want_write());
  std::vector<Frame> f = out();
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].payload.size(), 15u);
  EXPECT_EQ(f[0].flags, 1);
  EXPECT_EQ(events.completes, 1);
  EXPECT_EQ(events.closes.size(), 1u);
}

// A response submitted from an event inside produce() still sends its HEADERS before its DATA.
TEST_F(SessionTest, HeadersSubmittedDuringProducePrecedeTheirData) {
  open();
  std::string input = get(1);
  input += get(3);
  ASSERT_TRUE(session->receive(input));
  Session::Header h[] = {{":status", "200"}};
  events.body_to_send = "a";
  events.on_complete = [&](Stream& s) {
    if (s.id != 1) return;
    events.body_to_send = "bb";
    EXPECT_TRUE(session->submit_response(3, h, true));
  };
  ASSERT_TRUE(session->submit_response(1, h, true));
  std::vector<Frame> f = out();
  ASSERT_EQ(f.size(), 4u);
  auto is = [&](size_t i, uint8_t type, uint32_t stream) {
    return f[i].type == type && f[i].stream == stream;
  };
  EXPECT_TRUE(is(0, HEADERS, 1));
  EXPECT_TRUE(is(1, DATA, 1));
  EXPECT_TRUE(is(2, HEADERS, 3));
  EXPECT_TRUE(is(3, DATA, 3));
  EXPECT_EQ(f[3].payload, "bb");
}

TEST_F(SessionTest, InitialWindowChangeMovesOpenStreams) {
  open();
  ASSERT_TRUE(session->receive(get(1)));
  ASSERT_TRUE(session->receive(frame(SETTINGS, 0, 0, setting(4, 0))));
  out();
  EXPECT_EQ(session->find(1)->send_window, 0);
  events.body_to_send = "abc";
  Session::Header h[] = {{":status", "200"}};
  ASSERT_TRUE(session->submit_response(1, h, true));
  EXPECT_EQ(out().size(), 1u);  // the head only
  ASSERT_TRUE(session->receive(frame(SETTINGS, 0, 0, setting(4, 5))));
  std::vector<Frame> f = out();
  ASSERT_EQ(f.size(), 2u);  // the ACK, then the body
  EXPECT_EQ(f[1].payload, "abc");
}

TEST_F(SessionTest, DeferredBodyResumes) {
  open();
  ASSERT_TRUE(session->receive(get(1)));
  events.defer = true;
  Session::Header h[] = {{":status", "200"}};
  ASSERT_TRUE(session->submit_response(1, h, true));
  EXPECT_EQ(out().size(), 1u);
  EXPECT_TRUE(session->find(1)->deferred);
  EXPECT_FALSE(session->want_write());
  events.defer = false;
  events.body_to_send = "late";
  session->resume_data(1);
  EXPECT_TRUE(session->want_write());
  std::vector<Frame> f = out();
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].payload, "late");
  EXPECT_EQ(f[0].flags, 1);
}

TEST_F(SessionTest, WindowUpdateOverflow) {
  open();
  ASSERT_TRUE(session->receive(get(1)));
  ASSERT_TRUE(session->receive(frame(WINDOW_UPDATE, 0, 1, be32(0x7fffffff))));
  expect_rst(out(), 1, ErrorCode::kFlowControlError);
  EXPECT_FALSE(session->receive(frame(WINDOW_UPDATE, 0, 0, be32(0x7fffffff))));
  expect_goaway(ErrorCode::kFlowControlError);
}

TEST_F(SessionTest, WindowUpdateOfZero) {
  open();
  EXPECT_FALSE(session->receive(frame(WINDOW_UPDATE, 0, 0, be32(0))));
  expect_goaway(ErrorCode::kProtocolError);
}

// ---- Request bodies and flow control ----

TEST_F(SessionTest, DataWithPaddingAndContentLength) {
  open();
  ASSERT_TRUE(session->receive(get(1, false, {{"content-length", "5"}})));
  ASSERT_TRUE(session->receive(frame(DATA, 0x8, 1, std::string(1, '\2') + "hel" + "pp")));
  ASSERT_TRUE(session->receive(frame(DATA, 0x1, 1, "lo")));
  ASSERT_EQ(events.requests.size(), 1u);
  EXPECT_EQ(events.requests[0].body, "hello");
  EXPECT_TRUE(events.requests[0].ended);
  EXPECT_EQ(session->find(1)->unconsumed, 5u);  // padding given back, data waits for consume
}

TEST_F(SessionTest, ContentLengthMismatchResetsTheStream) {
  open();
  ASSERT_TRUE(session->receive(get(1, false, {{"content-length", "5"}})));
  ASSERT_TRUE(session->receive(frame(DATA, 0x1, 1, "abc")));
  expect_rst(out(), 1, ErrorCode::kProtocolError);
  ASSERT_TRUE(session->receive(get(3, false, {{"content-length", "2"}})));
  ASSERT_TRUE(session->receive(frame(DATA, 0, 3, "abc")));
  expect_rst(out(), 3, ErrorCode::kProtocolError);
  ASSERT_TRUE(session->receive(get(5, true, {{"content-length", "2"}})));
  expect_rst(out(), 5, ErrorCode::kProtocolError);
}

TEST_F(SessionTest, WindowsReopenOnlyAsTheApplicationConsumes) {
  open();
  ASSERT_TRUE(session->receive(get(1, false)));
  const std::string chunk(16384, 'd');
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(session->receive(frame(DATA, 0, 1, chunk)));
  EXPECT_TRUE(out().empty());  // nothing consumed: no WINDOW_UPDATE
  session->consume(1, 3 * 16384);
  std::vector<Frame> f = out();
  const Frame* w = first(f, WINDOW_UPDATE);
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->stream, 1u);
  EXPECT_EQ(w->u32(), 3u * 16384);
}

TEST_F(SessionTest, ClosingReleasesUnconsumedBytesOnce) {
  Options o;
  o.connection_window = 100000;  // a WINDOW_UPDATE once 50,000 bytes are owed
  start(o);
  const std::string chunk(16000, 'd');
  for (uint32_t id : {1u, 3u}) {
    ASSERT_TRUE(session->receive(get(id, false)));
    ASSERT_TRUE(session->receive(frame(DATA, 0, id, chunk)));
    ASSERT_TRUE(session->receive(frame(DATA, 0, id, chunk)));
    ASSERT_TRUE(session->receive(frame(DATA, 0, id, chunk.substr(0, 8000))));
  }
  ASSERT_TRUE(session->receive(frame(RST_STREAM, 0, 1, be32(8))));  // 40,000 released
  EXPECT_TRUE(out().empty());
  // The application catches up late: stream 1's bytes were released already, stream 3's stay.
  session->consume(1, 40000);
  EXPECT_TRUE(out().empty());
  session->consume(3, 10000);
  std::vector<Frame> f = out();
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].type, WINDOW_UPDATE);
  EXPECT_EQ(f[0].stream, 0u);
  EXPECT_EQ(f[0].u32(), 50000u);
}

TEST_F(SessionTest, DataPastTheStreamWindowIsAFlowControlError) {
  open();
  ASSERT_TRUE(session->receive(get(1, false)));
  const std::string chunk(16384, 'd');
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(session->receive(frame(DATA, 0, 1, chunk)));
  ASSERT_TRUE(session->receive(frame(DATA, 0, 1, chunk)));  // 81,920 > 65,535
  expect_rst(out(), 1, ErrorCode::kFlowControlError);
}

TEST_F(SessionTest, DataPastTheConnectionWindowIsAConnectionError) {
  Options o;
  o.connection_window = 65535;
  o.max_concurrent_streams = 10;
  start(o);
  const std::string chunk(16384, 'd');
  bool ok = true;
  for (uint32_t id = 1; id < 12 && ok; id += 2) {
    ok = session->receive(get(id, false)) && session->receive(frame(DATA, 0, id, chunk));
  }
  EXPECT_FALSE(ok);
  expect_goaway(ErrorCode::kFlowControlError);
}

TEST_F(SessionTest, DataStateRules) {
  open();
  EXPECT_FALSE(session->receive(frame(DATA, 0, 7, "x")));  // idle
  expect_goaway(ErrorCode::kProtocolError);
  start({});
  ASSERT_TRUE(session->receive(get(1)));  // half-closed (remote)
  ASSERT_TRUE(session->receive(frame(DATA, 0, 1, "x")));
  expect_rst(out(), 1, ErrorCode::kStreamClosed);
  // Closed now, and the client had ended it: nothing of it can be in flight (RFC 9113 5.1).
  EXPECT_FALSE(session->receive(frame(DATA, 0, 1, "x")));
  expect_goaway(ErrorCode::kStreamClosed);
}

TEST_F(SessionTest, TrailersEndTheStream) {
  open();
  ASSERT_TRUE(session->receive(get(1, false)));
  ASSERT_TRUE(session->receive(frame(DATA, 0, 1, "abc")));
  std::string t;
  client.encode(t, "x-checksum", "1");
  ASSERT_TRUE(session->receive(frame(HEADERS, 0x5, 1, t)));
  EXPECT_TRUE(events.requests[0].ended);
  EXPECT_EQ(events.requests[0].fields.back().first, "x-checksum");
  ASSERT_TRUE(session->receive(get(3, false))) << events.last_error;
  std::string t2;
  client.encode(t2, "x-more", "1");
  ASSERT_TRUE(session->receive(frame(HEADERS, 0x4, 3, t2)));  // no END_STREAM: malformed
  expect_rst(out(), 3, ErrorCode::kProtocolError);
}

TEST_F(SessionTest, ResponseBeforeTheRequestEndsResetsWithNoError) {
  open();
  ASSERT_TRUE(session->receive(get(1, false)));
  Session::Header h[] = {{":status", "413"}};
  ASSERT_TRUE(session->submit_response(1, h, false));
  std::vector<Frame> f = out();
  ASSERT_EQ(f.size(), 2u);
  expect_rst(f, 1, ErrorCode::kNoError);
  EXPECT_EQ(session->errors_sent(), 0u);
  ASSERT_TRUE(session->receive(frame(DATA, 0, 1, "late")));  // in flight: dropped
  EXPECT_EQ(events.requests[0].body, "");
}

// ---- RST_STREAM, GOAWAY ----

TEST_F(SessionTest, ClientResetClosesTheStream) {
  open();
  ASSERT_TRUE(session->receive(get(1, false)));
  ASSERT_TRUE(session->receive(frame(RST_STREAM, 0, 1, be32(8))));
  ASSERT_EQ(events.closes.size(), 1u);
  EXPECT_EQ(events.closes[0].second, ErrorCode::kCancel);
  EXPECT_EQ(session->client_resets(), 1u);
  EXPECT_FALSE(session->submit_response(1, {}, false));
  EXPECT_FALSE(session->receive(frame(RST_STREAM, 0, 9, be32(8))));  // idle
  expect_goaway(ErrorCode::kProtocolError);
}

// Defence: Rapid Reset (CVE-2023-44487).
TEST_F(SessionTest, RapidResetEndsWithEnhanceYourCalm) {
  Options o;
  o.reset_budget = 10;
  start(o);
  bool ok = true;
  uint32_t id = 1;
  for (; id < 100 && ok; id += 2)
    ok = session->receive(get(id)) && session->receive(frame(RST_STREAM, 0, id, be32(8)));
  EXPECT_FALSE(ok);
  EXPECT_EQ(id, 23u);  // the 11th reset was stream 21's
  expect_goaway(ErrorCode::kEnhanceYourCalm);
}

// Defence: MadeYouReset (CVE-2025-8671): resets we provoke are budgeted too.
TEST_F(SessionTest, ProvokedResetsEndWithEnhanceYourCalm) {
  Options o;
  o.error_budget = 5;
  start(o);
  bool ok = true;
  for (uint32_t id = 1; id < 100 && ok; id += 2) {
    ok = session->receive(get(id) + frame(WINDOW_UPDATE, 0, id, be32(0)));
    out();
  }
  EXPECT_FALSE(ok);
  EXPECT_EQ(session->errors_sent(), 6u);
  EXPECT_EQ(session->error(), ErrorCode::kEnhanceYourCalm);
}

// Defence: SETTINGS and PING floods from a peer that does not read.
TEST_F(SessionTest, ControlFrameFloodEndsWithEnhanceYourCalm) {
  Options o;
  o.max_queued_control = 50;
  start(o);
  std::string pings;
  for (int i = 0; i < 30; ++i) pings += frame(PING, 0, 0, "12345678");
  ASSERT_TRUE(session->receive(pings));
  out();  // the peer reads: the queue drains
  std::string flood;
  for (int i = 0; i < 30; ++i) flood += frame(SETTINGS, 0, 0, "") + frame(PING, 0, 0, "12345678");
  EXPECT_FALSE(session->receive(flood));
  expect_goaway(ErrorCode::kEnhanceYourCalm);
}

// Defence: empty frame flood (CVE-2019-9518): DATA without bytes, empty CONTINUATION.
TEST_F(SessionTest, EmptyFrameFloodEndsWithEnhanceYourCalm) {
  Options o;
  o.empty_frame_budget = 20;
  start(o);
  ASSERT_TRUE(session->receive(get(1, false)));
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(session->receive(frame(DATA, 0, 1, "")));
  EXPECT_FALSE(session->receive(frame(DATA, 0, 1, "")));
  expect_goaway(ErrorCode::kEnhanceYourCalm);
  start(o);
  ASSERT_TRUE(session->receive(frame(HEADERS, 0x1, 1, block())));
  bool ok = true;
  for (int i = 0; i < 30 && ok; ++i) ok = session->receive(frame(CONTINUATION, 0, 1, ""));
  EXPECT_FALSE(ok);
  expect_goaway(ErrorCode::kEnhanceYourCalm);
}

TEST_F(SessionTest, GracefulGoawayLetsStreamsFinish) {
  open();
  ASSERT_TRUE(session->receive(get(1)));
  session->submit_goaway(ErrorCode::kNoError);
  EXPECT_FALSE(session->terminated());
  std::vector<Frame> f = out();
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].u32(), 1u);
  ASSERT_TRUE(session->receive(get(3)));  // past the GOAWAY: ignored
  EXPECT_EQ(events.requests.size(), 1u);
  Session::Header h[] = {{":status", "200"}};
  EXPECT_TRUE(session->submit_response(1, h, false));
  EXPECT_EQ(out().size(), 1u);
}

TEST_F(SessionTest, GoawayFromTheClientIsReported) {
  open();
  ASSERT_TRUE(session->receive(frame(GOAWAY, 0, 0, be32(0) + be32(0))));
  EXPECT_TRUE(session->goaway_received());
  EXPECT_EQ(events.goaways, 1);
}

TEST_F(SessionTest, CompressionErrorEndsTheConnection) {
  open();
  EXPECT_FALSE(session->receive(frame(HEADERS, 0x5, 1, "\xff\xff\xff\xff\xff\xff")));
  expect_goaway(ErrorCode::kCompressionError);
}

// Steady state: streams come from the per-thread spares, so a request allocates no stream.
TEST_F(SessionTest, StreamsAreReused) {
  open();
  ASSERT_TRUE(session->receive(get(1)));
  Stream* first_stream = session->find(1);
  Session::Header h[] = {{":status", "204"}};
  ASSERT_TRUE(session->submit_response(1, h, false));
  out();
  ASSERT_TRUE(session->receive(get(3)));
  if (kRecycleAllocations) {
    EXPECT_EQ(session->find(3), first_stream);
  }
}

}  // namespace
}  // namespace peregrine::http2::session
