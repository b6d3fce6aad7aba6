// The proxy's response codec without a socket: http1::ResponseParser for the head, then
// BodyReader (handlers/proxy/body_reader.h) for the body, fed whole or in pieces of every size,
// as ProxyExchange feeds them from its read buffer.
#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "handlers/proxy/body_reader.h"
#include "http/http1/response_parser.h"

namespace peregrine::proxy {
namespace {

struct Events {
  int status = 0;
  std::string body;
  bool end = false;
  bool error = false;
  bool head_error = false;
  std::string rest;  // bytes after the end (the next response on the connection)
};

// Reads like the exchange does: a buffer that grows by `step` bytes (0: all at once); the head is
// parsed from the buffer's start until complete, then the body is decoded from what follows.
// `closed`: the connection closed after the last byte.
Events run(std::string_view bytes, size_t step = 0, bool head_request = false,
           bool closed = false) {
  http1::ResponseParser parser;
  parser.start(head_request);
  BodyReader body;
  Events e;
  std::string buffer;
  size_t used = 0;  // of buffer
  bool head_done = false;
  size_t fed = 0;
  while (!e.end && !e.error && !e.head_error) {
    if (fed == bytes.size()) {
      if (closed && head_done && body.framing() == http1::BodyFraming::kClose) e.end = true;
      break;
    }
    const size_t n = step == 0 ? bytes.size() : std::min(step, bytes.size() - fed);
    buffer.append(bytes.substr(fed, n));
    fed += n;
    if (!head_done) {
      http1::ResponseParser::Result r = parser.parse(buffer);
      // As ProxyExchange::process_head(): the parser also looks at body bytes after a complete
      // head, but only a head it could not parse is its verdict; the body is BodyReader's.
      if (r.status == http1::ResponseParser::Status::kError && r.consumed == 0) {
        e.head_error = true;
        break;
      }
      if (!parser.head_complete()) continue;
      head_done = true;
      const http1::ResponseHead& head = parser.head();
      e.status = head.status;
      used = head.interim_bytes + head.head_bytes;
      body.start(parser.framing(), parser.framing() == http1::BodyFraming::kLength
                                       ? static_cast<uint64_t>(head.content_length)
                                       : 0);
    }
    for (;;) {
      std::string_view input = std::string_view(buffer).substr(used);
      const size_t before = input.size();
      std::string_view data;
      BodyReader::Event event = body.next(input, data);
      used += before - input.size();
      if (event == BodyReader::Event::kData) {
        EXPECT_FALSE(data.empty());
        e.body.append(data);
        continue;
      }
      if (event == BodyReader::Event::kEnd) {
        e.end = true;
        e.rest = buffer.substr(used) + std::string(bytes.substr(fed));
      }
      if (event == BodyReader::Event::kError) e.error = true;
      break;
    }
  }
  return e;
}

TEST(ProxyResponseCodecTest, ContentLength) {
  const std::string response =
      "HTTP/1.1 200 OK\r\nContent-Length: 11\r\nServer: x\r\n\r\nhello world";
  for (size_t step : {size_t{0}, size_t{1}, size_t{2}, size_t{9}, size_t{64}}) {
    Events e = run(response + "HTTP/1.1 204 No Content\r\n\r\n", step);
    EXPECT_EQ(e.status, 200) << step;
    EXPECT_EQ(e.body, "hello world") << step;
    EXPECT_TRUE(e.end) << step;
    EXPECT_EQ(e.rest, "HTTP/1.1 204 No Content\r\n\r\n") << step;
  }
}

TEST(ProxyResponseCodecTest, Chunked) {
  const std::string response =
      "HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n"
      "5\r\nhello\r\n1;ext=1\r\n,\r\n6\r\n world\r\n0\r\nTrailer: t\r\n\r\n";
  for (size_t step : {size_t{0}, size_t{1}, size_t{3}, size_t{17}}) {
    Events e = run(response, step);
    EXPECT_EQ(e.status, 201) << step;
    EXPECT_EQ(e.body, "hello, world") << step;
    EXPECT_TRUE(e.end) << step;
    EXPECT_FALSE(e.error) << step;
  }
}

TEST(ProxyResponseCodecTest, MalformedChunkedBody) {
  Events e = run("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n");
  EXPECT_EQ(e.status, 200);
  EXPECT_TRUE(e.error);
  EXPECT_FALSE(e.end);
}

TEST(ProxyResponseCodecTest, CloseDelimitedEndsWithTheConnection) {
  const std::string response = "HTTP/1.0 200 OK\r\n\r\nuntil the end";
  Events open = run(response, 4);
  EXPECT_EQ(open.body, "until the end");
  EXPECT_FALSE(open.end);  // more may come until the close
  Events closed = run(response, 4, false, /*closed=*/true);
  EXPECT_TRUE(closed.end);
}

TEST(ProxyResponseCodecTest, NoBodyForHeadAnd204And304) {
  Events head = run("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", 0, /*head_request=*/true);
  EXPECT_TRUE(head.end);
  EXPECT_EQ(head.body, "");
  EXPECT_TRUE(run("HTTP/1.1 204 No Content\r\n\r\n").end);
  EXPECT_TRUE(run("HTTP/1.1 304 Not Modified\r\nContent-Length: 9\r\n\r\n").end);
}

TEST(ProxyResponseCodecTest, InterimResponsesAreSkipped) {
  Events e = run("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", 5);
  EXPECT_EQ(e.status, 200);
  EXPECT_EQ(e.body, "ok");
  EXPECT_TRUE(e.end);
}

TEST(ProxyResponseCodecTest, MalformedHead) {
  EXPECT_TRUE(run("HTTP/1.1 2000 OK\r\n\r\n").head_error);
  EXPECT_TRUE(run("hello\r\n\r\n").head_error);
  EXPECT_TRUE(run("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n").head_error);
}

}  // namespace
}  // namespace peregrine::proxy
