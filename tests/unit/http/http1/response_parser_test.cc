#include "http/http1/response_parser.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

namespace peregrine::http1 {
namespace {

using Status = ResponseParser::Status;

// Feeds `input` in pieces of `step` bytes the way a connection does: keep what was not
// consumed, append what arrives. Returns the final status and the bytes consumed in total.
struct Fed {
  Status status = Status::kNeedMore;
  size_t consumed = 0;
};

Fed Feed(ResponseParser& p, std::string_view input, size_t step) {
  std::string pending;
  size_t offset = 0;  // of pending[0] in input
  size_t next = 0;
  for (;;) {
    size_t take = std::min(step, input.size() - next);
    pending.append(input.substr(next, take));
    next += take;
    ResponseParser::Result r = p.parse(pending);
    EXPECT_LE(r.consumed, pending.size());
    pending.erase(0, r.consumed);
    offset += r.consumed;
    if (r.status != Status::kNeedMore) return {r.status, offset};
    if (next == input.size()) return {Status::kNeedMore, offset};
  }
}

TEST(ResponseParser, ContentLength) {
  ResponseParser p;
  p.start(false, true);
  std::string r = "HTTP/1.1 200 OK\r\nServer: test/1.0\r\nContent-Length: 5\r\n\r\nhelloHTTP/1.1";
  auto res = p.parse(r);
  EXPECT_EQ(res.status, Status::kDone);
  EXPECT_EQ(res.consumed, r.size() - 8);
  EXPECT_EQ(p.head().status, 200);
  EXPECT_EQ(p.head().server, "test/1.0");
  EXPECT_EQ(p.body_bytes(), 5u);
  EXPECT_EQ(p.body_wire_bytes(), 5u);
  EXPECT_EQ(p.head().head_bytes, r.size() - 8 - 5);
  EXPECT_EQ(p.framing(), BodyFraming::kLength);
  EXPECT_TRUE(p.keep_alive());
}

// Field values are checked eight bytes at a time: every forbidden byte at every position of a
// long value is found, and what is allowed (HTAB, SP, VCHAR, obs-text) passes wherever it is.
TEST(ResponseParser, ControlCharacterAtEveryValuePosition) {
  const std::string value(29, 'v');
  for (size_t at = 0; at < value.size(); ++at) {
    for (char bad : {'\0', '\x01', '\x1f', '\x7f', '\r', '\x0b'}) {
      std::string v = value;
      v[at] = bad;
      ResponseParser p;
      p.start(false, false);
      std::string r = "HTTP/1.1 200 OK\r\nX-Long: " + v + "\r\nContent-Length: 0\r\n\r\n";
      EXPECT_EQ(p.parse(r).status, Status::kError) << at << " " << int(bad);
      EXPECT_STREQ(p.error(), "control character in a field value");
    }
    for (char good : {'\t', ' ', '~', '\x80', '\xff'}) {
      std::string v = value;
      v[at] = good;
      ResponseParser p;
      p.start(false, false);
      std::string r = "HTTP/1.1 200 OK\r\nX-Long: " + v + "\r\nContent-Length: 0\r\n\r\n";
      EXPECT_EQ(p.parse(r).status, Status::kDone) << at << " " << int(good);
    }
  }
}

TEST(ResponseParser, EveryByteAtATimeGivesTheSameVerdict) {
  const std::string cases[] = {
      "HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\nhello world",
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6;x=y\r\n "
      "world\r\n0\r\nT: v\r\n\r\n",
      "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n",
      "\r\nHTTP/1.0 304 Not Modified\nContent-Length: 10\n\n",
  };
  for (const std::string& c : cases) {
    ResponseParser whole;
    whole.start();
    auto one = whole.parse(c);
    for (size_t step : {1, 2, 3, 7, 64}) {
      ResponseParser p;
      p.start();
      Fed f = Feed(p, c, step);
      EXPECT_EQ(f.status, one.status) << c << " step " << step;
      EXPECT_EQ(f.consumed, one.consumed) << c << " step " << step;
      EXPECT_EQ(p.body_bytes(), whole.body_bytes());
      EXPECT_EQ(p.head().status, whole.head().status);
    }
  }
}

TEST(ResponseParser, ChunkedCountsDecodedAndWireBytes) {
  ResponseParser p;
  p.start();
  std::string body = "5\r\nhello\r\n7\r\n world!\r\n0\r\n\r\n";
  std::string r = "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n" + body;
  auto res = p.parse(r);
  EXPECT_EQ(res.status, Status::kDone);
  EXPECT_EQ(res.consumed, r.size());
  EXPECT_EQ(p.body_bytes(), 12u);
  EXPECT_EQ(p.body_wire_bytes(), body.size());
  EXPECT_EQ(p.framing(), BodyFraming::kChunked);
  EXPECT_TRUE(p.keep_alive());
}

TEST(ResponseParser, MalformedChunkedIsAnError) {
  ResponseParser p;
  p.start();
  auto res = p.parse("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n");
  EXPECT_EQ(res.status, Status::kError);
  EXPECT_STREQ(p.error(), "malformed chunked body");
}

TEST(ResponseParser, CloseDelimitedBodyEndsAtFinish) {
  ResponseParser p;
  p.start();
  auto res = p.parse("HTTP/1.0 200 OK\r\nServer: x\r\n\r\nsome body");
  EXPECT_EQ(res.status, Status::kNeedMore);
  EXPECT_EQ(p.framing(), BodyFraming::kClose);
  res = p.parse(" more");
  EXPECT_EQ(res.status, Status::kNeedMore);
  EXPECT_EQ(res.consumed, 5u);
  res = p.finish();
  EXPECT_EQ(res.status, Status::kDone);
  EXPECT_EQ(p.body_bytes(), 14u);
  EXPECT_FALSE(p.keep_alive());
}

TEST(ResponseParser, FinishTellsNoByteFromMidResponse) {
  ResponseParser p;
  p.start();
  EXPECT_EQ(p.finish().status, Status::kError);
  EXPECT_FALSE(p.started());
  p.start();
  p.parse("HTTP/1.1 200 OK\r\nContent-Le");
  EXPECT_EQ(p.finish().status, Status::kError);
  EXPECT_TRUE(p.started());
  p.start();
  p.parse("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc");
  EXPECT_EQ(p.finish().status, Status::kError);
  EXPECT_STREQ(p.error(), "connection closed before the response was complete");
}

TEST(ResponseParser, KeepAliveRules) {
  struct Case {
    const char* response;
    bool keep;
  } cases[] = {
      {"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", true},
      {"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", false},
      {"HTTP/1.1 200 OK\r\nConnection: Upgrade, Close\r\nContent-Length: 0\r\n\r\n", false},
      {"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", false},
      {"HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 0\r\n\r\n", true},
      {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n0\r\n\r\n",
       false},
      {"HTTP/1.1 204 No Content\r\n\r\n", true},
  };
  for (const Case& c : cases) {
    ResponseParser p;
    p.start();
    auto res = p.parse(c.response);
    ASSERT_EQ(res.status, Status::kDone) << c.response;
    EXPECT_EQ(p.keep_alive(), c.keep) << c.response;
  }
}

TEST(ResponseParser, NoBodyForHeadAnd304And204) {
  ResponseParser p;
  p.start(/*head_request=*/true);
  std::string r = "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n";
  auto res = p.parse(r);
  EXPECT_EQ(res.status, Status::kDone);
  EXPECT_EQ(res.consumed, r.size());
  EXPECT_EQ(p.body_bytes(), 0u);
  p.start();
  const std::string head304 = "HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n";
  res = p.parse(head304 + "NEXT");
  EXPECT_EQ(res.status, Status::kDone);
  EXPECT_EQ(res.consumed, head304.size());
}

TEST(ResponseParser, InterimResponsesAreSkipped) {
  ResponseParser p;
  p.start();
  const std::string c100 = "HTTP/1.1 100 Continue\r\n\r\n";
  const std::string c103 = "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n";
  std::string r = c100 + c103 + "HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok";
  auto res = p.parse(r);
  EXPECT_EQ(res.status, Status::kDone);
  EXPECT_EQ(res.consumed, r.size());
  EXPECT_EQ(p.head().status, 201);
  EXPECT_EQ(p.head().interim_bytes, c100.size() + c103.size());
}

TEST(ResponseParser, SwitchingProtocolsIsAnError) {
  ResponseParser p;
  p.start();
  EXPECT_EQ(p.parse("HTTP/1.1 101 Switching Protocols\r\nUpgrade: ws\r\n\r\n").status,
            Status::kError);
}

TEST(ResponseParser, BareLfLineEndsAreAccepted) {
  ResponseParser p;
  p.start();
  auto res = p.parse("HTTP/1.1 200 OK\nContent-Length: 2\n\nok");
  EXPECT_EQ(res.status, Status::kDone);
  EXPECT_EQ(p.body_bytes(), 2u);
}

TEST(ResponseParser, StatusLineWithoutReason) {
  ResponseParser p;
  p.start();
  EXPECT_EQ(p.parse("HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n").status, Status::kDone);
  p.start();
  EXPECT_EQ(p.parse("HTTP/1.1 200 \r\nContent-Length: 0\r\n\r\n").status, Status::kDone);
}

TEST(ResponseParser, Rejects) {
  const char* bad[] = {
      "HTTP/2.0 200 OK\r\n\r\n",
      "HTTP/1.1 20 OK\r\n\r\n",
      "HTTP/1.1 2000 OK\r\n\r\n",
      "HTTP/1.1 099 Low\r\n\r\n",
      "ICY 200 OK\r\n\r\n",
      "HTTP/1.1  200 OK\r\n\r\n",
      "HTTP/1.1 200 OK\r\nContent-Length: 5x\r\n\r\n",
      "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
      "HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999999\r\n\r\n",
      "HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n",
      "HTTP/1.1 200 OK\r\nName : x\r\n\r\n",
      "HTTP/1.1 200 OK\r\n: x\r\n\r\n",
      "HTTP/1.1 200 OK\r\nNoColon\r\n\r\n",
      "HTTP/1.1 200 OK\r\n continuation first\r\n\r\n",
      "HTTP/1.1 200 OK\r\nX: a\x01z\r\n\r\n",
      "HTTP/1.1 200 O\x02K\r\n\r\n",
  };
  for (const char* r : bad) {
    ResponseParser p;
    p.start();
    auto res = p.parse(r);
    EXPECT_EQ(res.status, Status::kError) << r;
    EXPECT_NE(std::string(p.error()), "") << r;
  }
}

TEST(ResponseParser, EqualContentLengthsAreOne) {
  ResponseParser p;
  p.start();
  auto res = p.parse("HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\nContent-Length: 2\r\n\r\nok");
  EXPECT_EQ(res.status, Status::kDone);
  EXPECT_EQ(p.head().content_length, 2);
}

TEST(ResponseParser, ObsFoldAfterTheFirstFieldIsTolerated) {
  ResponseParser p;
  p.start();
  auto res = p.parse("HTTP/1.1 200 OK\r\nX-Long: a\r\n  b\r\nContent-Length: 0\r\n\r\n");
  EXPECT_EQ(res.status, Status::kDone);
}

TEST(ResponseParser, HeadLimit) {
  ResponseParser::Limits limits;
  limits.max_head_bytes = 64;
  ResponseParser p(limits);
  p.start();
  std::string r = "HTTP/1.1 200 OK\r\nX: " + std::string(100, 'a');
  EXPECT_EQ(p.parse(r).status, Status::kError);
  p.start();
  EXPECT_EQ(p.parse("HTTP/1.1 200 OK\r\nX: " + std::string(30, 'a')).status, Status::kNeedMore);
}

TEST(ResponseParser, TooManyInterims) {
  std::string r;
  for (int i = 0; i < 20; ++i) r += "HTTP/1.1 100 Continue\r\n\r\n";
  ResponseParser p;
  p.start();
  EXPECT_EQ(p.parse(r).status, Status::kError);
}

TEST(ResponseParser, PipelinedResponsesParseInTurn) {
  std::string r =
      "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\na"
      "HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nb\r\n0\r\n\r\n"
      "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nccc";
  ResponseParser p;
  std::string_view in = r;
  int statuses[3];
  for (int i = 0; i < 3; ++i) {
    p.start();
    auto res = p.parse(in);
    ASSERT_EQ(res.status, Status::kDone);
    statuses[i] = p.head().status;
    in.remove_prefix(res.consumed);
  }
  EXPECT_TRUE(in.empty());
  EXPECT_EQ(statuses[0], 200);
  EXPECT_EQ(statuses[1], 404);
  EXPECT_EQ(statuses[2], 200);
}

TEST(ResponseParser, TransferEncodingNotChunkedIsCloseDelimited) {
  ResponseParser p;
  p.start();
  auto res = p.parse("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nabc");
  EXPECT_EQ(res.status, Status::kNeedMore);
  EXPECT_EQ(p.framing(), BodyFraming::kClose);
  EXPECT_EQ(p.finish().status, Status::kDone);
  EXPECT_FALSE(p.keep_alive());
}

}  // namespace
}  // namespace peregrine::http1

namespace peregrine::http1 {
namespace {

TEST(ResponseParser, CollectsTheFinalHeadsFieldsAsViews) {
  ResponseParser p;
  std::vector<FieldView> fields;
  p.collect_fields(&fields);
  p.start();
  const std::string input =
      "HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\n"
      "HTTP/1.1 200 OK\r\nContent-Type:  text/html \r\nX-Multi: a\r\n  folded\r\n"
      "Content-Length: 2\r\n\r\nok";
  auto res = p.parse(input);
  ASSERT_EQ(res.status, ResponseParser::Status::kDone);
  ASSERT_EQ(fields.size(), 3u);  // the 103's Link is gone; the fold is not a field
  EXPECT_EQ(fields[0].name, "Content-Type");
  EXPECT_EQ(fields[0].value, "text/html");
  EXPECT_EQ(fields[1].name, "X-Multi");
  EXPECT_EQ(fields[1].value, "a");
  EXPECT_EQ(fields[2].name, "Content-Length");
  EXPECT_EQ(fields[2].value, "2");
  EXPECT_GE(fields[0].name.data(), input.data());  // views into the input
  EXPECT_LT(fields[0].name.data(), input.data() + input.size());
}

}  // namespace
}  // namespace peregrine::http1
