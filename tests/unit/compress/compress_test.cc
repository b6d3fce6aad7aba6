#include "compress/compress.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "unit/compress/decode.h"

namespace peregrine::compress {
namespace {

using test_support::decode;
using test_support::page_like;

Request request_with(std::vector<Header> headers, Method method = Method::kGet) {
  Request r;
  r.method = method;
  for (const Header& h : headers) r.headers[r.header_count++] = h;
  return r;
}

std::string body_of(const Response& r) {
  std::string out;
  for (const Response::Segment& s : r.segments()) {
    if (s.kind == Response::Segment::Kind::kOwned) out += r.owned_bytes(s);
    if (s.kind == Response::Segment::Kind::kBorrowed) out.append(s.data, s.length);
  }
  return out;
}

Options on() {
  Options o;
  o.enabled = true;
  return o;
}

TEST(CompressResponse, CompressesACompleteResponseAndRewritesItsHead) {
  const std::string page = page_like(20000);
  for (auto [accept, coding] : {std::pair{"gzip", Coding::kGzip}, std::pair{"br", Coding::kBrotli},
                                std::pair{"zstd", Coding::kZstd}}) {
    Request req = request_with({{"Accept-Encoding", accept}});
    Response res;
    res.set_status(200);
    res.add_header("Content-Type", "text/html; charset=utf-8");
    res.add_header("ETag", "\"v1\"");
    res.add_header("X-Custom", "kept");
    res.add_header("Accept-Ranges", "bytes");
    res.close_connection();
    res.append_borrowed_body(std::string_view(page).substr(0, 5000));
    res.append_body(std::string_view(page).substr(5000));
    maybe_compress(req, res, on());
    const std::string headers(res.extra_headers());
    EXPECT_NE(headers.find("Content-Encoding: " + std::string(accept) + "\r\n"), std::string::npos)
        << headers;
    EXPECT_NE(headers.find("Vary: Accept-Encoding\r\n"), std::string::npos);
    EXPECT_NE(headers.find("ETag: W/\"v1\"\r\n"), std::string::npos);
    EXPECT_NE(headers.find("X-Custom: kept\r\n"), std::string::npos);
    EXPECT_EQ(headers.find("Accept-Ranges"), std::string::npos);
    EXPECT_TRUE(res.closes_connection());
    EXPECT_EQ(res.status(), 200);
    EXPECT_LT(res.body_length(), page.size() / 2);
    EXPECT_EQ(decode(coding, body_of(res)), page);
  }
}

TEST(CompressResponse, IdentityForAClientWithoutCodingsButVary) {
  const std::string page = page_like(2000);
  Request req = request_with({});
  Response res;
  res.add_header("Content-Type", "text/plain");
  res.set_body(page);
  maybe_compress(req, res, on());
  EXPECT_EQ(body_of(res), page);
  EXPECT_EQ(res.extra_headers(), "Content-Type: text/plain\r\nVary: Accept-Encoding\r\n");
}

TEST(CompressResponse, LeavesAloneWhatMustNotBeCompressed) {
  const std::string page = page_like(2000);
  struct Case {
    std::vector<Header> request;
    int status;
    const char* extra;
    Method method;
  };
  const Case cases[] = {
      {{{"Accept-Encoding", "gzip"}}, 206, "", Method::kGet},
      {{{"Accept-Encoding", "gzip"}}, 200, "Content-Encoding: gzip\r\n", Method::kGet},
      {{{"Accept-Encoding", "gzip"}}, 200, "Cache-Control: public, no-transform\r\n", Method::kGet},
  };
  for (const Case& c : cases) {
    Request req = request_with(c.request, c.method);
    Response res;
    res.set_status(c.status);
    res.add_header("Content-Type", "text/html");
    std::string_view extra = c.extra;
    if (!extra.empty()) {
      const size_t colon = extra.find(':');
      res.add_header(extra.substr(0, colon), extra.substr(colon + 2, extra.size() - colon - 4));
    }
    res.set_body(page);
    const std::string before(res.extra_headers());
    maybe_compress(req, res, on());
    EXPECT_EQ(res.extra_headers(), before) << c.status << " " << c.extra;
    EXPECT_EQ(body_of(res), page);
  }
  // Below the minimum length, and an unlisted type: untouched, no Vary.
  Request req = request_with({{"Accept-Encoding", "gzip"}});
  Response small;
  small.add_header("Content-Type", "text/html");
  small.set_body("tiny");
  maybe_compress(req, small, on());
  EXPECT_EQ(small.extra_headers(), "Content-Type: text/html\r\n");
  Response png;
  png.add_header("Content-Type", "image/png");
  png.set_body(page);
  maybe_compress(req, png, on());
  EXPECT_EQ(png.extra_headers(), "Content-Type: image/png\r\n");
}

TEST(CompressResponse, RangeAndHeadRequestsGetIdentityWithVary) {
  const std::string page = page_like(2000);
  for (Request req : {request_with({{"Accept-Encoding", "gzip"}, {"Range", "bytes=0-10"}}),
                      request_with({{"Accept-Encoding", "gzip"}}, Method::kHead)}) {
    Response res;
    res.add_header("Content-Type", "text/html");
    res.add_header("Vary", "Origin");
    res.set_body(page);
    maybe_compress(req, res, on());
    EXPECT_EQ(body_of(res), page);
    EXPECT_EQ(res.extra_headers(),
              "Content-Type: text/html\r\nVary: Origin\r\nVary: Accept-Encoding\r\n");
  }
}

// A Downstream that records what the decorator hands the client.
class RecordingDownstream final : public handlers::Downstream {
 public:
  void resume_body() override {}
  void respond(Response& r) override {
    responded = true;
    headers = std::string(r.extra_headers());
    body = body_of(r);
  }
  bool send_head(Response& head, int64_t content_length) override {
    headers = std::string(head.extra_headers());
    length = content_length;
    body = body_of(head);
    return true;
  }
  Sent send_body(std::string_view bytes) override {
    body.append(bytes);
    ++writes;
    return Sent::kMore;
  }
  Sent hold_if_queued() override {
    ++looks;
    return queued ? Sent::kFull : Sent::kMore;
  }
  void finish() override { finished = true; }
  void fail(int status) override { failed = status; }
  bool head_sent() const override { return false; }

  bool responded = false, finished = false;
  bool queued = false;  // what hold_if_queued() reports: the client has not written out its bytes
  int failed = 0, writes = 0, looks = 0;
  int64_t length = -2;
  std::string headers, body;
};

TEST(CompressStream, CompressesAStreamedBodyWithUnknownLength) {
  const std::string page = page_like(200000);
  Options options = on();
  for (auto [accept, coding] : {std::pair{"gzip", Coding::kGzip}, std::pair{"br", Coding::kBrotli},
                                std::pair{"zstd", Coding::kZstd}}) {
    Request req = request_with({{"Accept-Encoding", accept}});
    RecordingDownstream client;
    StreamSlot slot;
    handlers::Downstream& d = slot.wrap(client, req, options);
    ASSERT_NE(&d, &client);
    Response head;
    head.add_header("Content-Type", "text/html");
    head.append_body(std::string_view(page).substr(0, 1000));  // bytes sent with the head
    ASSERT_TRUE(d.send_head(head, static_cast<int64_t>(page.size())));
    EXPECT_EQ(client.length, -1);  // the compressed length is not known in advance
    EXPECT_NE(client.headers.find("Content-Encoding: " + std::string(accept)), std::string::npos);
    for (size_t at = 1000; at < page.size(); at += 4096)
      EXPECT_EQ(d.send_body(std::string_view(page).substr(at, 4096)),
                handlers::Downstream::Sent::kMore);
    d.finish();
    EXPECT_TRUE(client.finished);
    EXPECT_EQ(decode(coding, client.body), page) << accept;
  }
}

TEST(CompressStream, EventStreamsAreFlushedAtEveryWrite) {
  Request req = request_with({{"Accept-Encoding", "gzip"}});
  RecordingDownstream client;
  StreamSlot slot;
  const Options options = on();  // the slot keeps a reference, as to a route's options
  handlers::Downstream& d = slot.wrap(client, req, options);
  Response head;
  head.add_header("Content-Type", "text/event-stream");
  ASSERT_TRUE(d.send_head(head, -1));
  std::string expected;
  for (int i = 0; i < 5; ++i) {
    const std::string event = "data: event " + std::to_string(i) + "\n\n";
    expected += event;
    d.send_body(event);
    EXPECT_EQ(test_support::gunzip_partial(client.body), expected);
  }
  d.finish();
  EXPECT_EQ(test_support::gunzip(client.body), expected);
}

// The decorator of a streamed response of `type` and unknown length, its head sent.
handlers::Downstream& streaming(StreamSlot& slot, RecordingDownstream& client, const Request& req,
                                const Options& options, const char* type) {
  handlers::Downstream& d = slot.wrap(client, req, options);
  Response head;
  head.add_header("Content-Type", type);
  EXPECT_TRUE(d.send_head(head, -1));
  return d;
}

// Input that compresses to almost nothing never fills the client's queue; the decorator looks at
// it every kInputWindow bytes of input and stops the upstream while the client holds output.
TEST(CompressStream, PausesEveryInputWindowWhileTheClientHoldsOutput) {
  constexpr size_t kPiece = 4096;
  constexpr size_t kPiecesPerWindow = CompressingDownstream::kInputWindow / kPiece;
  const std::string piece(kPiece, 'a');
  for (const char* accept : {"gzip", "br", "zstd"}) {
    Request req = request_with({{"Accept-Encoding", accept}});
    RecordingDownstream client;
    StreamSlot slot;
    const Options options = on();
    handlers::Downstream& d = streaming(slot, client, req, options, "text/plain");
    std::string sent;
    // A client that takes everything: never paused, looked at once per window.
    for (size_t i = 0; i < 3 * kPiecesPerWindow; ++i) {
      EXPECT_EQ(d.send_body(piece), handlers::Downstream::Sent::kMore) << accept << " " << i;
      sent += piece;
    }
    EXPECT_EQ(client.looks, 3) << accept;
    // A client that holds output: the piece that ends a window says kFull; after on_writable()
    // the exchange feeds a fresh window.
    client.queued = true;
    for (int window = 0; window < 2; ++window) {
      for (size_t i = 1; i <= kPiecesPerWindow; ++i) {
        EXPECT_EQ(d.send_body(piece), i < kPiecesPerWindow ? handlers::Downstream::Sent::kMore
                                                           : handlers::Downstream::Sent::kFull)
            << accept << " " << i;
        sent += piece;
      }
    }
    d.finish();  // the final flush goes out whatever the queue holds
    EXPECT_TRUE(client.finished);
    const Coding coding = std::string_view(accept) == "gzip" ? Coding::kGzip
                          : std::string_view(accept) == "br" ? Coding::kBrotli
                                                             : Coding::kZstd;
    EXPECT_EQ(decode(coding, client.body), sent) << accept;
  }
}

// An event stream still hands the client every event at once, held or not.
TEST(CompressStream, AHeldEventStreamStillFlushesEachEvent) {
  Request req = request_with({{"Accept-Encoding", "gzip"}});
  RecordingDownstream client;
  client.queued = true;
  StreamSlot slot;
  const Options options = on();
  handlers::Downstream& d = streaming(slot, client, req, options, "text/event-stream");
  const std::string event = "data: " + std::string(40000, 'e') + "\n\n";
  std::string expected;
  for (int i = 0; i < 2; ++i) {
    expected += event;
    EXPECT_EQ(d.send_body(event),
              i == 0 ? handlers::Downstream::Sent::kMore : handlers::Downstream::Sent::kFull);
    EXPECT_EQ(test_support::gunzip_partial(client.body), expected);
  }
}

TEST(CompressStream, PassesThroughWhatIsNotCompressed) {
  Request req = request_with({{"Accept-Encoding", "gzip"}});
  RecordingDownstream client;
  StreamSlot slot;
  const Options options = on();  // the slot keeps a reference, as to a route's options
  handlers::Downstream& d = slot.wrap(client, req, options);
  Response head;
  head.add_header("Content-Type", "image/png");
  ASSERT_TRUE(d.send_head(head, 5000));
  EXPECT_EQ(client.length, 5000);
  d.send_body("raw bytes");
  d.finish();
  EXPECT_EQ(client.body, "raw bytes");
  EXPECT_EQ(client.headers, "Content-Type: image/png\r\n");
}

TEST(CompressStream, OffMeansTheClientItself) {
  Request req = request_with({{"Accept-Encoding", "gzip"}});
  RecordingDownstream client;
  StreamSlot slot;
  EXPECT_EQ(&slot.wrap(client, req, Options{}), &client);
}

TEST(CompressStream, RespondCompressesInOneGo) {
  const std::string page = page_like(3000);
  Request req = request_with({{"Accept-Encoding", "br"}});
  RecordingDownstream client;
  StreamSlot slot;
  const Options options = on();  // the slot keeps a reference, as to a route's options
  handlers::Downstream& d = slot.wrap(client, req, options);
  Response res;
  res.add_header("Content-Type", "application/json");
  res.set_body(page);
  d.respond(res);
  EXPECT_TRUE(client.responded);
  EXPECT_NE(client.headers.find("Content-Encoding: br"), std::string::npos);
  EXPECT_EQ(test_support::unbrotli(client.body), page);
}

}  // namespace
}  // namespace peregrine::compress
