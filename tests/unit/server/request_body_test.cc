// Tests for RequestBody (src/server/request_body.h): the one reader of HTTP/1.1 request bodies,
// for buffered and streamed bodies alike. Content-Length and chunked framing, input split at
// every byte, the max_body_bytes limit and malformed chunks.
#include "server/request_body.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>

namespace peregrine::server {
namespace {

Request content_length(int64_t length) {
  Request r;
  r.content_length = length;
  return r;
}

Request chunked() {
  Request r;
  r.chunked = true;
  return r;
}

struct Outcome {
  std::string body;
  size_t consumed = 0;
  int error = 0;
  bool done = false;
};

// Feeds `input` in pieces of at most `step` bytes, the way a connection does: the unconsumed rest
// of one read is offered again together with the next.
Outcome read(const Request& request, std::string_view input, size_t step,
             uint64_t limit = 1 << 20) {
  RequestBody body;
  body.start(request, limit);
  Outcome out;
  size_t available = 0;
  while (!body.done() && out.error == 0) {
    available = std::min(input.size(), available + step);
    std::string_view window = input.substr(out.consumed, available - out.consumed);
    RequestBody::Piece piece = body.next(window);
    out.consumed += piece.consumed;
    out.body.append(piece.data);
    out.error = piece.error;
    if (piece.last) {
      EXPECT_TRUE(body.done());
    }
    if (piece.consumed == 0 && piece.error == 0 && available == input.size()) break;  // starved
  }
  out.done = body.done();
  return out;
}

TEST(RequestBody, NoBodyIsDoneAtOnce) {
  RequestBody body;
  body.start(Request{}, 100);
  EXPECT_TRUE(body.done());
  body.start(content_length(0), 100);
  EXPECT_TRUE(body.done());
  RequestBody::Piece piece = body.next("GET / HTTP/1.1\r\n\r\n");
  EXPECT_EQ(piece.consumed, 0u) << "the next request's bytes are not the body's";
}

TEST(RequestBody, ContentLengthStopsAtTheLength) {
  const std::string_view input = "hello worldGET /next HTTP/1.1\r\n\r\n";
  for (size_t step = 1; step <= input.size(); ++step) {
    Outcome out = read(content_length(11), input, step);
    EXPECT_EQ(out.body, "hello world") << step;
    EXPECT_EQ(out.consumed, 11u) << step;
    EXPECT_TRUE(out.done) << step;
  }
}

TEST(RequestBody, ChunkedIsDecodedWhateverTheSplit) {
  const std::string_view input =
      "5\r\nhello\r\n1;ext=1\r\n \r\n5\r\nworld\r\n0\r\nTrailer: x\r\n\r\nGET / HTTP/1.1\r\n";
  const size_t framed = input.find("GET");
  for (size_t step = 1; step <= input.size(); ++step) {
    Outcome out = read(chunked(), input, step);
    EXPECT_EQ(out.body, "hello world") << step;
    EXPECT_EQ(out.consumed, framed) << step;
    EXPECT_TRUE(out.done) << step;
    EXPECT_EQ(out.error, 0) << step;
  }
}

TEST(RequestBody, MalformedChunksAre400) {
  for (std::string_view input : {"zz\r\nhello\r\n0\r\n\r\n", "5\r\nhelloXX0\r\n\r\n"}) {
    Outcome out = read(chunked(), input, input.size());
    EXPECT_EQ(out.error, 400) << input;
    EXPECT_FALSE(out.done) << input;
  }
}

TEST(RequestBody, ChunkedBodyOverTheLimitIs413) {
  std::string input;
  for (int i = 0; i < 4; ++i) input += "1f4\r\n" + std::string(500, 'y') + "\r\n";
  input += "0\r\n\r\n";
  Outcome out = read(chunked(), input, input.size(), /*limit=*/1024);
  EXPECT_EQ(out.error, 413);
  EXPECT_FALSE(out.done);
  EXPECT_LE(out.body.size(), 1024u) << "nothing beyond the limit is handed on";

  out = read(chunked(), input, 7, /*limit=*/2000);
  EXPECT_EQ(out.error, 0) << "exactly the limit is fine";
  EXPECT_EQ(out.body.size(), 2000u);
  EXPECT_TRUE(out.done);
}

TEST(RequestBody, ContentLengthOverTheLimitIsRefusedByTheReaderToo) {
  // The route table refuses a declared length over the limit before the body is read; the
  // reader holds the line on its own as well.
  std::string input(300, 'x');
  Outcome out = read(content_length(300), input, 100, /*limit=*/250);
  EXPECT_EQ(out.error, 413);
}

TEST(RequestBody, StartResetsEverything) {
  RequestBody body;
  body.start(chunked(), 100);
  RequestBody::Piece piece = body.next("5\r\nhel");
  EXPECT_EQ(piece.data, "hel");
  body.start(content_length(3), 100);
  piece = body.next("abcdef");
  EXPECT_EQ(piece.data, "abc");
  EXPECT_TRUE(piece.last);
  EXPECT_EQ(body.received(), 3u);
}

}  // namespace
}  // namespace peregrine::server
