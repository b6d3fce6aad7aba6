#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "http/http1/parser.h"

namespace peregrine::http1 {
namespace {

using namespace std::string_literals;
using Status = ChunkedDecoder::Status;

// Outcome of decoding a whole input, possibly fed in pieces.
struct Decoded {
  Status status = Status::kNeedMore;  // last status: kDone, kError or kNeedMore
  std::string body;
  size_t consumed = 0;  // total input bytes consumed
  uint64_t body_bytes = 0;
};

// Feeds `input` to a fresh decoder as the pieces [0, cuts...) arrive, keeping unconsumed bytes
// for the next call as a connection would.
Decoded DecodeInPieces(std::string_view input, std::initializer_list<size_t> cuts = {}) {
  ChunkedDecoder d;
  Decoded out;
  size_t received = 0;
  auto feed = [&](size_t upto) {
    received = upto;
    for (;;) {
      std::string_view avail = input.substr(out.consumed, received - out.consumed);
      ChunkedDecoder::Result r = d.decode(avail);
      EXPECT_LE(r.consumed, avail.size());
      out.consumed += r.consumed;
      out.status = r.status;
      if (r.status == Status::kData) {
        EXPECT_FALSE(r.data.empty());
        EXPECT_GE(r.data.data(), avail.data());
        EXPECT_LE(r.data.data() + r.data.size(), avail.data() + r.consumed);
        out.body.append(r.data);
        continue;
      }
      if (r.status == Status::kNeedMore) {
        EXPECT_EQ(r.consumed, avail.size());
      }
      return;
    }
  };
  for (size_t c : cuts) {
    feed(c);
    if (out.status == Status::kDone || out.status == Status::kError) break;
  }
  if (out.status != Status::kDone && out.status != Status::kError) feed(input.size());
  out.body_bytes = d.body_bytes();
  return out;
}

Decoded DecodeByteAtATime(std::string_view input) {
  ChunkedDecoder d;
  Decoded out;
  for (size_t i = 0; i < input.size(); ++i) {
    ChunkedDecoder::Result r = d.decode(input.substr(i, 1));
    out.status = r.status;
    out.consumed += r.consumed;
    if (r.status == Status::kData) out.body.append(r.data);
    if (r.status == Status::kDone || r.status == Status::kError) break;
    EXPECT_EQ(r.consumed, 1u);
  }
  out.body_bytes = d.body_bytes();
  return out;
}

void ExpectBody(std::string_view input, std::string_view body) {
  Decoded d = DecodeInPieces(input);
  EXPECT_EQ(d.status, Status::kDone) << input;
  EXPECT_EQ(d.body, body) << input;
  EXPECT_EQ(d.consumed, input.size()) << input;
  EXPECT_EQ(d.body_bytes, body.size());
}

void ExpectError(std::string_view input) {
  Decoded d = DecodeInPieces(input);
  EXPECT_EQ(d.status, Status::kError) << input;
  Decoded b = DecodeByteAtATime(input);
  EXPECT_EQ(b.status, Status::kError) << input;
}

TEST(ChunkedTest, SingleChunk) {
  ExpectBody("5\r\nhello\r\n0\r\n\r\n", "hello");
}

TEST(ChunkedTest, MultipleChunks) {
  ExpectBody("5\r\nhello\r\n1\r\n \r\n6\r\nworld!\r\n0\r\n\r\n", "hello world!");
}

TEST(ChunkedTest, EmptyBody) {
  ExpectBody("0\r\n\r\n", "");
}

TEST(ChunkedTest, HexSizesBothCases) {
  std::string a(0x1a, 'a'), b(0xfF, 'b');
  ExpectBody("1a\r\n" + a + "\r\nfF\r\n" + b + "\r\n0\r\n\r\n", a + b);
  ExpectBody("1A\r\n" + a + "\r\n0\r\n\r\n", a);
}

TEST(ChunkedTest, LeadingZerosInSize) {
  ExpectBody("0005\r\nhello\r\n000\r\n\r\n", "hello");
}

TEST(ChunkedTest, SixteenDigitsAccepted) {
  ExpectBody("0000000000000003\r\nabc\r\n0000000000000000\r\n\r\n", "abc");
}

TEST(ChunkedTest, OneDataRunPerCall) {
  ChunkedDecoder d;
  std::string in = "3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
  std::string_view rest = in;
  ChunkedDecoder::Result r = d.decode(rest);
  ASSERT_EQ(r.status, Status::kData);
  EXPECT_EQ(r.data, "abc");
  EXPECT_EQ(r.consumed, 6u);
  EXPECT_EQ(r.data.data(), in.data() + 3);  // a view into the input, no copy
  rest.remove_prefix(r.consumed);
  r = d.decode(rest);
  ASSERT_EQ(r.status, Status::kData);
  EXPECT_EQ(r.data, "de");
  rest.remove_prefix(r.consumed);
  r = d.decode(rest);
  EXPECT_EQ(r.status, Status::kDone);
  EXPECT_EQ(r.consumed, rest.size());
  EXPECT_EQ(d.body_bytes(), 5u);
}

TEST(ChunkedTest, LargeChunkAcrossFeeds) {
  std::string data(100000, 'z');
  std::string in = "186a0\r\n" + data + "\r\n0\r\n\r\n";
  Decoded d = DecodeInPieces(in, {10, 5000, 70000, 99999, 100007, 100008});
  EXPECT_EQ(d.status, Status::kDone);
  EXPECT_EQ(d.body, data);
}

TEST(ChunkedTest, SplitAtEveryPosition) {
  std::string in =
      "4;ext=1\r\nWiki\r\n5 ;a;b=\"q s\"\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\n"
      "Expires: never\r\nX-Trailer:\tv\r\n\r\n";
  std::string body = "Wikipedia in\r\n\r\nchunks.";
  for (size_t cut = 0; cut <= in.size(); ++cut) {
    Decoded d = DecodeInPieces(in, {cut});
    ASSERT_EQ(d.status, Status::kDone) << cut;
    EXPECT_EQ(d.body, body) << cut;
    EXPECT_EQ(d.consumed, in.size()) << cut;
  }
}

TEST(ChunkedTest, SplitAtEveryPairOfPositions) {
  std::string in = "3;x\r\nabc\r\n1\r\nd\r\n0\r\nT: v\r\n\r\n";
  for (size_t a = 0; a <= in.size(); ++a) {
    for (size_t b = a; b <= in.size(); ++b) {
      Decoded d = DecodeInPieces(in, {a, b});
      ASSERT_EQ(d.status, Status::kDone) << a << "," << b;
      ASSERT_EQ(d.body, "abcd");
    }
  }
}

TEST(ChunkedTest, ByteAtATime) {
  std::string in = "a\r\n0123456789\r\n2;k=v\r\nxy\r\n0\r\nT: 1\r\n\r\n";
  Decoded d = DecodeByteAtATime(in);
  EXPECT_EQ(d.status, Status::kDone);
  EXPECT_EQ(d.body, "0123456789xy");
  EXPECT_EQ(d.consumed, in.size());
  EXPECT_EQ(d.body_bytes, 12u);
}

TEST(ChunkedTest, ChunkExtensions) {
  ExpectBody("5;name\r\nhello\r\n0\r\n\r\n", "hello");
  ExpectBody("5;name=value\r\nhello\r\n0\r\n\r\n", "hello");
  ExpectBody("5;a=1;b=2\r\nhello\r\n0;last\r\n\r\n", "hello");
  ExpectBody("5 ;  name = \"quoted; value\"\r\nhello\r\n0\r\n\r\n", "hello");
  ExpectBody("5\t;\tname\r\nhello\r\n0\r\n\r\n", "hello");
}

TEST(ChunkedTest, ExtensionAtLineLimitAccepted) {
  std::string ext = ";n=" + std::string(4096 - 4, 'v');  // "5" + ext = 4096 bytes
  ExpectBody("5" + ext + "\r\nhello\r\n0\r\n\r\n", "hello");
}

TEST(ChunkedTest, ExtensionTooLong) {
  std::string ext = ";n=" + std::string(5000, 'v');
  ExpectError("5" + ext + "\r\nhello\r\n0\r\n\r\n");
}

TEST(ChunkedTest, ExtensionWithControlCharacter) {
  ExpectError("5;a\x01\r\nhello\r\n0\r\n\r\n");
  ExpectError("5;a\0b\r\nhello\r\n0\r\n\r\n"s);
}

TEST(ChunkedTest, ExtensionWithBareLf) {
  ExpectError("5;a\nhello\r\n0\r\n\r\n");
}

TEST(ChunkedTest, ExtensionWithoutName) {
  ExpectError("5;\r\nhello\r\n0\r\n\r\n");
  ExpectError("5;=v\r\nhello\r\n0\r\n\r\n");
}

TEST(ChunkedTest, Trailers) {
  ExpectBody("3\r\nabc\r\n0\r\nExpires: x\r\nChecksum: abc \t\r\nEmpty:\r\n\r\n", "abc");
}

TEST(ChunkedTest, TrailersUpToLimitAccepted) {
  std::string trailer = "X: " + std::string(16000, 't') + "\r\n";
  ExpectBody("1\r\na\r\n0\r\n" + trailer + "\r\n", "a");
}

TEST(ChunkedTest, TrailersTooLong) {
  std::string trailers;
  for (int i = 0; i < 20; ++i)
    trailers += "X-" + std::to_string(i) + ": " + std::string(1000, 't') + "\r\n";
  ExpectError("1\r\na\r\n0\r\n" + trailers + "\r\n");
}

TEST(ChunkedTest, TrailerObsFold) {
  ExpectError("0\r\nA: b\r\n c\r\n\r\n");
}
TEST(ChunkedTest, TrailerWithoutColon) {
  ExpectError("0\r\nNoColon\r\n\r\n");
}
TEST(ChunkedTest, TrailerWithSpaceBeforeColon) {
  ExpectError("0\r\nA : b\r\n\r\n");
}
TEST(ChunkedTest, TrailerBareLf) {
  ExpectError("0\r\nA: b\n\r\n");
  ExpectError("0\r\n\n");
}
TEST(ChunkedTest, TrailerControlCharacter) {
  ExpectError("0\r\nA: b\x7f\r\n\r\n");
}

TEST(ChunkedTest, NoBytesPastTheEndConsumed) {
  std::string body = "3\r\nabc\r\n0\r\n\r\n";
  std::string next = "GET / HTTP/1.1\r\nHost: h\r\n\r\n";
  ChunkedDecoder d;
  std::string in = body + next;
  std::string_view rest = in;
  ChunkedDecoder::Result r = d.decode(rest);
  ASSERT_EQ(r.status, Status::kData);
  rest.remove_prefix(r.consumed);
  r = d.decode(rest);
  ASSERT_EQ(r.status, Status::kDone);
  rest.remove_prefix(r.consumed);
  EXPECT_EQ(rest, next);
}

TEST(ChunkedTest, DoneIsSticky) {
  ChunkedDecoder d;
  ASSERT_EQ(d.decode("0\r\n\r\n").status, Status::kDone);
  ChunkedDecoder::Result r = d.decode("5\r\nhello");
  EXPECT_EQ(r.status, Status::kDone);
  EXPECT_EQ(r.consumed, 0u);
}

TEST(ChunkedTest, ErrorIsSticky) {
  ChunkedDecoder d;
  ASSERT_EQ(d.decode("x").status, Status::kError);
  EXPECT_EQ(d.decode("0\r\n\r\n").status, Status::kError);
}

TEST(ChunkedTest, ResetStartsOver) {
  ChunkedDecoder d;
  ASSERT_EQ(d.decode("zz").status, Status::kError);
  d.reset();
  ChunkedDecoder::Result r = d.decode("1\r\nq\r\n0\r\n\r\n");
  ASSERT_EQ(r.status, Status::kData);
  EXPECT_EQ(r.data, "q");
  EXPECT_EQ(d.body_bytes(), 1u);
}

TEST(ChunkedTest, EmptyInputNeedsMore) {
  ChunkedDecoder d;
  ChunkedDecoder::Result r = d.decode("");
  EXPECT_EQ(r.status, Status::kNeedMore);
  EXPECT_EQ(r.consumed, 0u);
}

TEST(ChunkedTest, IncompleteNeedsMoreAndConsumesAll) {
  ChunkedDecoder d;
  ChunkedDecoder::Result r = d.decode("1f;ext");
  EXPECT_EQ(r.status, Status::kNeedMore);
  EXPECT_EQ(r.consumed, 6u);
}

TEST(ChunkedTest, MissingSize) {
  ExpectError("\r\nhello\r\n0\r\n\r\n");
  ExpectError(";ext\r\n");
}
TEST(ChunkedTest, NonHexSize) {
  ExpectError("g\r\n");
  ExpectError("-1\r\n");
  ExpectError("+5\r\nhello\r\n");
  ExpectError("0x5\r\nhello\r\n");
}
TEST(ChunkedTest, SeventeenDigits) {
  ExpectError("00000000000000005\r\nhello\r\n0\r\n\r\n");
}
TEST(ChunkedTest, SizeOverflow) {
  ExpectError("4000000000000001\r\n");
  ExpectError("ffffffffffffffff\r\n");
}
TEST(ChunkedTest, SizeAtLimitAccepted) {
  ChunkedDecoder d;
  ChunkedDecoder::Result r = d.decode("4000000000000000\r\nabc");
  ASSERT_EQ(r.status, Status::kData);
  EXPECT_EQ(r.data, "abc");
}
TEST(ChunkedTest, WhitespaceAfterSizeWithoutExtension) {
  ExpectError("5 \r\nhello\r\n0\r\n\r\n");
  ExpectError(" 5\r\nhello\r\n0\r\n\r\n");
}
TEST(ChunkedTest, BareLfAfterSize) {
  ExpectError("5\nhello\r\n0\r\n\r\n");
}
TEST(ChunkedTest, BareCrAfterSize) {
  ExpectError("5\rhello\r\n0\r\n\r\n");
}
TEST(ChunkedTest, BareLfAfterData) {
  ExpectError("5\r\nhello\n0\r\n\r\n");
}
TEST(ChunkedTest, DataLongerThanSize) {
  ExpectError("5\r\nhello!\r\n0\r\n\r\n");
}
TEST(ChunkedTest, MissingCrlfAfterData) {
  ExpectError("5\r\nhello0\r\n\r\n");
}
TEST(ChunkedTest, BareLfAfterLastChunk) {
  ExpectError("0\n\r\n");
}
TEST(ChunkedTest, GarbageAfterLastChunkLine) {
  ExpectError("0\r\n\rX");
}

}  // namespace
}  // namespace peregrine::http1
