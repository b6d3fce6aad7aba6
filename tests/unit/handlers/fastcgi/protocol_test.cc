// Tests for the FastCGI protocol layer (src/handlers/fastcgi/protocol.h).
#include "handlers/fastcgi/protocol.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace peregrine::fastcgi {
namespace {

std::string Header(uint8_t type, uint16_t id, uint16_t content_length, uint8_t padding,
                   uint8_t version = 1) {
  std::string h(8, '\0');
  h[0] = static_cast<char>(version);
  h[1] = static_cast<char>(type);
  h[2] = static_cast<char>(id >> 8);
  h[3] = static_cast<char>(id & 0xff);
  h[4] = static_cast<char>(content_length >> 8);
  h[5] = static_cast<char>(content_length & 0xff);
  h[6] = static_cast<char>(padding);
  return h;
}

std::string Rec(RecordType type, uint16_t id, std::string_view content, uint8_t padding = 0) {
  return Header(static_cast<uint8_t>(type), id, static_cast<uint16_t>(content.size()), padding) +
         std::string(content) + std::string(padding, 'P');
}

std::string EndRequest(uint16_t id, uint32_t app_status, uint8_t protocol_status,
                       uint8_t padding = 0) {
  std::string body(8, '\0');
  body[0] = static_cast<char>(app_status >> 24);
  body[1] = static_cast<char>(app_status >> 16);
  body[2] = static_cast<char>(app_status >> 8);
  body[3] = static_cast<char>(app_status);
  body[4] = static_cast<char>(protocol_status);
  return Rec(RecordType::kEndRequest, id, body, padding);
}

struct Outcome {
  std::string out;
  std::string err;
  int out_ends = 0;
  int err_ends = 0;
  int records = 0;
  bool ended = false;
  uint32_t app_status = 0;
  ProtocolStatus protocol_status = ProtocolStatus::kRequestComplete;
  std::vector<std::pair<std::string, std::string>> values;
  int unknown_type = -1;
  bool error = false;
  DecodeError error_code = DecodeError::kNone;
  bool boundary_after_end = false;

  bool operator==(const Outcome& o) const {
    return out == o.out && err == o.err && out_ends == o.out_ends && err_ends == o.err_ends &&
           ended == o.ended && app_status == o.app_status && protocol_status == o.protocol_status &&
           values == o.values && unknown_type == o.unknown_type && error == o.error &&
           error_code == o.error_code;
  }
};

// Feeds `in` to a fresh decoder in pieces of `step` bytes (0: all at once), or split at `cuts`.
Outcome Decode(std::string_view in, std::vector<size_t> cuts, uint16_t id = 1) {
  Decoder dec(id);
  Outcome o;
  cuts.push_back(in.size());
  size_t from = 0;
  for (size_t cut : cuts) {
    std::string_view piece = in.substr(from, cut - from);
    from = cut;
    while (true) {
      size_t used = 0;
      Record rec;
      const auto st = dec.decode(piece, used, rec);
      EXPECT_LE(used, piece.size());
      piece.remove_prefix(used);
      if (st == Decoder::Status::kError) {
        o.error = true;
        o.error_code = dec.error();
        return o;
      }
      if (st == Decoder::Status::kNeedMore) {
        EXPECT_TRUE(piece.empty());
        break;
      }
      EXPECT_GT(used, 0u);
      ++o.records;
      switch (rec.type) {
        case RecordType::kStdout:
          o.out += rec.data;
          o.out_ends += rec.end_of_stream;
          break;
        case RecordType::kStderr:
          o.err += rec.data;
          o.err_ends += rec.end_of_stream;
          break;
        case RecordType::kEndRequest:
          o.ended = true;
          o.app_status = rec.app_status;
          o.protocol_status = rec.protocol_status;
          o.boundary_after_end = dec.at_record_boundary();
          break;
        case RecordType::kGetValuesResult: {
          NameValueReader r(rec.data);
          NameValue nv;
          while (r.next(nv)) o.values.emplace_back(nv.name, nv.value);
          EXPECT_FALSE(r.error());
          break;
        }
        case RecordType::kUnknownType:
          o.unknown_type = rec.unknown_type;
          break;
        default:
          ADD_FAILURE() << "unexpected record type";
      }
    }
  }
  return o;
}

Outcome Decode(std::string_view in, uint16_t id = 1) {
  return Decode(in, {}, id);
}

Outcome DecodeBytewise(std::string_view in, uint16_t id = 1) {
  std::vector<size_t> cuts;
  for (size_t i = 1; i < in.size(); ++i) cuts.push_back(i);
  return Decode(in, cuts, id);
}

// A typical php-fpm response: stdout in two records, stderr, end of streams, END_REQUEST.
std::string TypicalResponse() {
  return Rec(RecordType::kStdout, 1, "Content-type: text/html\r\n\r\n", 5) +
         Rec(RecordType::kStderr, 1, "PHP Notice: x", 3) +
         Rec(RecordType::kStdout, 1, "<p>hello</p>") + Rec(RecordType::kStdout, 1, "") +
         Rec(RecordType::kStderr, 1, "") + EndRequest(1, 0, 0);
}

// ---------------------------------------------------------------------------------------------
// Encoding

TEST(FastCgiEncode, BeginRequestKeepConn) {
  std::string out;
  append_begin_request(out, 0x1234, true);
  ASSERT_EQ(out.size(), 16u);
  EXPECT_EQ(out.substr(0, 8), Header(1, 0x1234, 8, 0));
  EXPECT_EQ(out.substr(8), std::string("\x00\x01\x01\x00\x00\x00\x00\x00", 8));
}

TEST(FastCgiEncode, BeginRequestNoKeepConnOtherRole) {
  std::string out = "x";
  append_begin_request(out, 1, false, Role::kAuthorizer);
  EXPECT_EQ(out, "x" + Header(1, 1, 8, 0) + std::string("\x00\x02\x00\x00\x00\x00\x00\x00", 8));
}

TEST(FastCgiEncode, AbortRequest) {
  std::string out;
  append_abort_request(out, 65535);
  EXPECT_EQ(out, Header(2, 65535, 0, 0));
}

TEST(FastCgiEncode, ParamsShortLengths) {
  std::string out;
  const NameValue p[] = {{"A", "bc"}};
  ASSERT_TRUE(append_params(out, 1, p));
  // content: 01 02 'A' 'b' 'c' = 5 bytes, padded to 8; then the empty PARAMS record.
  EXPECT_EQ(out, Header(4, 1, 5, 3) +
                     std::string("\x01\x02"
                                 "Abc",
                                 5) +
                     std::string(3, '\0') + Header(4, 1, 0, 0));
}

TEST(FastCgiEncode, ParamsEmptyListIsJustTheTerminator) {
  std::string out;
  ASSERT_TRUE(append_params(out, 7, {}));
  EXPECT_EQ(out, Header(4, 7, 0, 0));
}

TEST(FastCgiEncode, NameValueLength127UsesOneByte) {
  std::string out;
  const std::string name(127, 'n');
  const NameValue p[] = {{name, ""}};
  ASSERT_TRUE(append_params(out, 1, p));
  EXPECT_EQ(static_cast<unsigned char>(out[8]), 127);
  EXPECT_EQ(out[9], 0);
  EXPECT_EQ(name_value_size(name, ""), 129u);
}

TEST(FastCgiEncode, NameValueLength128UsesFourBytes) {
  std::string out;
  const std::string value(128, 'v');
  const NameValue p[] = {{"N", value}};
  ASSERT_TRUE(append_params(out, 1, p));
  EXPECT_EQ(out.substr(8, 5), std::string("\x01\x80\x00\x00\x80", 5));
  EXPECT_EQ(name_value_size("N", value), 1u + 1 + 4 + 128);
}

TEST(FastCgiEncode, NameValueLargeLengthBigEndian) {
  std::string out;
  const std::string value(70000, 'v');  // 0x11170
  {
    StreamEncoder enc(out, RecordType::kParams, 1);
    ASSERT_TRUE(enc.add("N", value));
  }
  EXPECT_EQ(out.substr(8, 5), std::string("\x01\x80\x01\x11\x70", 5));
}

TEST(FastCgiEncode, ParamsRoundTripThroughReader) {
  const std::string big(300, 'b');
  const NameValue p[] = {{"SCRIPT_FILENAME", "/srv/index.php"}, {"", ""}, {big, "x"}, {"Q", big}};
  std::string out;
  ASSERT_TRUE(append_params(out, 3, p));
  // Single data record: strip header and padding.
  const size_t clen =
      (static_cast<unsigned char>(out[4]) << 8) | static_cast<unsigned char>(out[5]);
  NameValueReader r(std::string_view(out).substr(8, clen));
  NameValue nv;
  for (const auto& want : p) {
    ASSERT_TRUE(r.next(nv));
    EXPECT_EQ(nv.name, want.name);
    EXPECT_EQ(nv.value, want.value);
  }
  EXPECT_FALSE(r.next(nv));
  EXPECT_FALSE(r.error());
}

// Reads back a stream of records of `type`: concatenated content; checks padding/alignment and
// that exactly the last record is empty.
std::string ReadStream(std::string_view wire, uint8_t type, uint16_t id, size_t* records) {
  std::string content;
  *records = 0;
  while (!wire.empty()) {
    EXPECT_GE(wire.size(), 8u);
    EXPECT_EQ(wire[0], 1);
    EXPECT_EQ(static_cast<uint8_t>(wire[1]), type);
    EXPECT_EQ((static_cast<unsigned char>(wire[2]) << 8) | static_cast<unsigned char>(wire[3]), id);
    const size_t clen =
        (static_cast<unsigned char>(wire[4]) << 8) | static_cast<unsigned char>(wire[5]);
    const size_t plen = static_cast<unsigned char>(wire[6]);
    EXPECT_EQ((clen + plen) % 8, 0u);
    EXPECT_LT(plen, 8u);
    content.append(wire.substr(8, clen));
    wire.remove_prefix(8 + clen + plen);
    ++*records;
    if (clen == 0) {
      EXPECT_TRUE(wire.empty()) << "empty record before the end";
    }
  }
  return content;
}

TEST(FastCgiEncode, ParamsSplitAcrossRecordsAt65535) {
  const std::string value(200000, 'z');
  const NameValue p[] = {{"BIG", value}, {"SMALL", "1"}};
  std::string out;
  ASSERT_TRUE(append_params(out, 9, p));
  size_t records = 0;
  const std::string content = ReadStream(out, 4, 9, &records);
  EXPECT_EQ(records, 5u);  // 200014 bytes -> 4 data records + terminator
  EXPECT_EQ(content.size(), name_value_size("BIG", value) + name_value_size("SMALL", "1"));
  EXPECT_EQ((static_cast<unsigned char>(out[4]) << 8) | static_cast<unsigned char>(out[5]), 65535);
  EXPECT_EQ(out[6], 1);  // 65535 + 1 padding
  NameValueReader r(content);
  NameValue nv;
  ASSERT_TRUE(r.next(nv));
  EXPECT_EQ(nv.name, "BIG");
  EXPECT_EQ(nv.value, value);
  ASSERT_TRUE(r.next(nv));
  EXPECT_EQ(nv.name, "SMALL");
  EXPECT_FALSE(r.next(nv));
}

// The pairs a ParamsBuilder wrote, read back in order.
std::vector<std::pair<std::string, std::string>> BuiltPairs(const ParamsBuilder& b, uint16_t id,
                                                            size_t* records) {
  std::string out;
  b.write(out, id);
  append_params_end(out, id);
  const std::string content = ReadStream(out, 4, id, records);
  std::vector<std::pair<std::string, std::string>> pairs;
  NameValueReader r(content);
  NameValue nv;
  while (r.next(nv)) pairs.emplace_back(nv.name, nv.value);
  EXPECT_FALSE(r.error());
  return pairs;
}

TEST(FastCgiParamsBuilder, PairsTailsHeadersAndEncodedRunsInOrder) {
  std::string encoded;
  append_name_value(encoded, "DOCUMENT_ROOT", "/srv");
  append_name_value(encoded, "REDIRECT_STATUS", "200");
  ParamsBuilder b;
  ASSERT_TRUE(b.add("SCRIPT_FILENAME", "/srv", "/index.php"));
  b.add_encoded(encoded);
  ASSERT_TRUE(b.add("QUERY_STRING", ""));
  ASSERT_TRUE(b.add_header("Accept-Language", "en"));
  ASSERT_TRUE(b.add_header("x-mixed_Case-9", "v"));
  b.add_encoded("");  // nothing
  size_t records = 0;
  const auto pairs = BuiltPairs(b, 5, &records);
  EXPECT_EQ(records, 2u);  // one data record, then the terminator
  const std::vector<std::pair<std::string, std::string>> want = {
      {"SCRIPT_FILENAME", "/srv/index.php"},
      {"DOCUMENT_ROOT", "/srv"},
      {"REDIRECT_STATUS", "200"},
      {"QUERY_STRING", ""},
      {"HTTP_ACCEPT_LANGUAGE", "en"},
      {"HTTP_X_MIXED_CASE_9", "v"}};
  EXPECT_EQ(pairs, want);
}

TEST(FastCgiParamsBuilder, SameBytesAsTheStreamEncoder) {
  const std::string long_value(300, 'v');
  const std::string long_name(130, 'N');
  ParamsBuilder b;
  b.add("A", "bc");
  b.add(long_name, std::string_view(long_value).substr(0, 100),
        std::string_view(long_value).substr(100));
  const std::string header_name(123, 'h');  // HTTP_ + 123 = 128: a 4-byte name length
  b.add_header(header_name, "x");
  std::string built;
  b.write(built, 1);
  std::string streamed;
  {
    StreamEncoder enc(streamed, RecordType::kParams, 1);
    enc.add("A", "bc");
    enc.add(long_name, long_value);
    enc.add("HTTP_" + std::string(123, 'H'), "x");
  }
  EXPECT_EQ(built, streamed);
}

// Each pair is encoded when added: what it was made of may be gone before write().
TEST(FastCgiParamsBuilder, ValuesNeedNotOutliveAdd) {
  ParamsBuilder b;
  {
    std::string value(200, 'v');
    std::string header = "X-Temp";
    ASSERT_TRUE(b.add("NAME", value, std::string("tail")));
    ASSERT_TRUE(b.add_header(header, value));
    value.assign(200, 'w');  // overwritten before write()
    header.assign("Overwritten");
  }
  size_t records = 0;
  const auto pairs = BuiltPairs(b, 1, &records);
  ASSERT_EQ(pairs.size(), 2u);
  EXPECT_EQ(pairs[0], std::make_pair(std::string("NAME"), std::string(200, 'v') + "tail"));
  EXPECT_EQ(pairs[1], std::make_pair(std::string("HTTP_X_TEMP"), std::string(200, 'v')));
}

// Growing past the first buffer keeps what was encoded before.
TEST(FastCgiParamsBuilder, ManyPairsGrowTheBuffer) {
  ParamsBuilder b;
  for (int i = 0; i < 500; ++i) ASSERT_TRUE(b.add("N" + std::to_string(i), std::to_string(i)));
  size_t records = 0;
  const auto pairs = BuiltPairs(b, 3, &records);
  ASSERT_EQ(pairs.size(), 500u);
  EXPECT_EQ(pairs[499], std::make_pair(std::string("N499"), std::string("499")));
  b.clear();  // reused: starts over with its capacity
  b.add("A", "1");
  EXPECT_EQ(BuiltPairs(b, 3, &records).size(), 1u);
}

TEST(FastCgiParamsBuilder, NothingAddedWritesNothing) {
  ParamsBuilder b;
  std::string out = "x";
  b.write(out, 1);
  EXPECT_EQ(out, "x");
  b.add("A", "1");
  b.clear();
  b.write(out, 1);
  EXPECT_EQ(out, "x");
}

TEST(FastCgiParamsBuilder, MoreThanOneRecordIsCutAt65535) {
  const std::string big(70000, 'z');
  std::string encoded;
  append_name_value(encoded, "FIXED", "1");
  ParamsBuilder b;
  b.add("BIG", std::string_view(big).substr(0, 40000), std::string_view(big).substr(40000));
  b.add_encoded(encoded);
  b.add_header("Cookie", big);
  size_t records = 0;
  const auto pairs = BuiltPairs(b, 2, &records);
  EXPECT_EQ(records, 4u);  // 140,000-odd bytes: 3 data records and the terminator
  ASSERT_EQ(pairs.size(), 3u);
  EXPECT_EQ(pairs[0], std::make_pair(std::string("BIG"), big));
  EXPECT_EQ(pairs[1], std::make_pair(std::string("FIXED"), std::string("1")));
  EXPECT_EQ(pairs[2], std::make_pair(std::string("HTTP_COOKIE"), big));
}

TEST(FastCgiEncode, StreamEncoderIncrementalAndExactRecordFill) {
  std::string out;
  {
    StreamEncoder enc(out, RecordType::kParams, 2);
    enc.write(std::string(65535, 'a'));  // fills one record exactly, closes it
    enc.flush();                         // nothing open: no empty record
  }
  EXPECT_EQ(out.size(), 8u + 65535 + 1);
  append_params_end(out, 2);
  size_t records = 0;
  EXPECT_EQ(ReadStream(out, 4, 2, &records).size(), 65535u);
  EXPECT_EQ(records, 2u);
}

TEST(FastCgiEncode, StreamEncoderFlushWithoutContentWritesNothing) {
  std::string out = "keep";
  {
    StreamEncoder enc(out, RecordType::kStdin, 1);
    enc.write("");
    enc.flush();
  }
  EXPECT_EQ(out, "keep");
}

TEST(FastCgiEncode, StdinPaddingToEight) {
  for (size_t n = 1; n <= 17; ++n) {
    std::string out;
    append_stdin(out, 1, std::string(n, 's'));
    EXPECT_EQ(out.size() % 8, 0u) << n;
    EXPECT_EQ(out.size(), 8 + ((n + 7) / 8) * 8) << n;
    EXPECT_EQ(static_cast<size_t>(out[6]), (8 - n % 8) % 8) << n;
  }
}

TEST(FastCgiEncode, StdinEmptyBodyAndTerminator) {
  std::string out;
  append_stdin(out, 1, "");
  EXPECT_TRUE(out.empty());
  append_stdin_end(out, 1);
  EXPECT_EQ(out, Header(5, 1, 0, 0));
}

TEST(FastCgiEncode, StdinLargeBodySplits) {
  std::string body(65535 * 2 + 10, '\0');
  for (size_t i = 0; i < body.size(); ++i) body[i] = static_cast<char>(i * 7);
  std::string out;
  append_stdin(out, 4, body);
  append_stdin_end(out, 4);
  size_t records = 0;
  EXPECT_EQ(ReadStream(out, 5, 4, &records), body);
  EXPECT_EQ(records, 4u);
}

TEST(FastCgiEncode, GetValues) {
  std::string out;
  const std::string_view names[] = {"FCGI_MAX_CONNS", "FCGI_MPXS_CONNS"};
  append_get_values(out, names);
  size_t records = 0;
  const std::string content = ReadStream(out, 9, 0, &records);
  EXPECT_EQ(records, 1u);
  NameValueReader r(content);
  NameValue nv;
  ASSERT_TRUE(r.next(nv));
  EXPECT_EQ(nv.name, "FCGI_MAX_CONNS");
  EXPECT_EQ(nv.value, "");
  ASSERT_TRUE(r.next(nv));
  EXPECT_EQ(nv.name, "FCGI_MPXS_CONNS");
}

// ---------------------------------------------------------------------------------------------
// Name-value reader

TEST(FastCgiNameValue, FourByteEncodingOfSmallLengthAccepted) {
  const std::string content = std::string("\x80\x00\x00\x01\x01", 5) + "ab";
  NameValueReader r(content);
  NameValue nv;
  ASSERT_TRUE(r.next(nv));
  EXPECT_EQ(nv.name, "a");
  EXPECT_EQ(nv.value, "b");
  EXPECT_TRUE(valid_name_values(content));
}

TEST(FastCgiNameValue, OverflowingLengthsRejected) {
  EXPECT_FALSE(
      valid_name_values(std::string("\x05\x00"
                                    "abc",
                                    5)));  // name too long
  EXPECT_FALSE(
      valid_name_values(std::string("\x01\x05"
                                    "abc",
                                    5)));                                   // value too long
  EXPECT_FALSE(valid_name_values(std::string("\x01", 1)));                  // no value length
  EXPECT_FALSE(valid_name_values(std::string("\x80\x00\x00", 3)));          // truncated 4-byte
  EXPECT_FALSE(valid_name_values(std::string("\xff\xff\xff\xff\x00", 5)));  // huge
  EXPECT_FALSE(
      valid_name_values(std::string("\x01\x7f\xff\xff\xff\xff"
                                    "a",
                                    7)));
  EXPECT_TRUE(valid_name_values(""));
}

TEST(FastCgiNameValue, ErrorIsSticky) {
  NameValueReader r(
      std::string_view("\x01\x01"
                       "ab"
                       "\x09",
                       5));
  NameValue nv;
  EXPECT_TRUE(r.next(nv));
  EXPECT_FALSE(r.next(nv));
  EXPECT_TRUE(r.error());
  EXPECT_FALSE(r.next(nv));
}

// ---------------------------------------------------------------------------------------------
// Decoder

TEST(FastCgiDecoder, TypicalResponse) {
  const Outcome o = Decode(TypicalResponse());
  EXPECT_FALSE(o.error);
  EXPECT_EQ(o.out, "Content-type: text/html\r\n\r\n<p>hello</p>");
  EXPECT_EQ(o.err, "PHP Notice: x");
  EXPECT_EQ(o.out_ends, 1);
  EXPECT_EQ(o.err_ends, 1);
  EXPECT_TRUE(o.ended);
  EXPECT_TRUE(o.boundary_after_end);
  EXPECT_EQ(o.protocol_status, ProtocolStatus::kRequestComplete);
}

TEST(FastCgiDecoder, EverySplitPositionAgrees) {
  const std::string in = TypicalResponse();
  const Outcome whole = Decode(in);
  for (size_t i = 0; i <= in.size(); ++i) {
    const Outcome o = Decode(in, std::vector<size_t>{i});
    EXPECT_TRUE(o == whole) << "split at " << i;
    EXPECT_TRUE(o.boundary_after_end) << i;
  }
}

TEST(FastCgiDecoder, EveryPairOfSplitPositionsAgrees) {
  const std::string in = Rec(RecordType::kStdout, 1, "Status: 200\n\nabc", 3) +
                         Rec(RecordType::kStdout, 1, "") + EndRequest(1, 7, 0, 2);
  const Outcome whole = Decode(in);
  for (size_t i = 0; i <= in.size(); ++i)
    for (size_t j = i; j <= in.size(); ++j)
      EXPECT_TRUE(Decode(in, {i, j}) == whole) << i << "," << j;
}

TEST(FastCgiDecoder, BytewiseAgrees) {
  const std::string in = TypicalResponse();
  EXPECT_TRUE(DecodeBytewise(in) == Decode(in));
}

TEST(FastCgiDecoder, StdoutFragmentsViewInput) {
  const std::string in = Rec(RecordType::kStdout, 1, "abcdef", 2);
  Decoder dec(1);
  Record rec;
  size_t used = 0;
  ASSERT_EQ(dec.decode(std::string_view(in).substr(0, 11), used, rec), Decoder::Status::kRecord);
  EXPECT_EQ(rec.data, "abc");
  EXPECT_EQ(rec.data.data(), in.data() + 8);  // no copy
  EXPECT_EQ(used, 11u);
  ASSERT_EQ(dec.decode(std::string_view(in).substr(11), used, rec), Decoder::Status::kRecord);
  EXPECT_EQ(rec.data, "def");
  EXPECT_EQ(used, 5u);  // content and the padding
  EXPECT_TRUE(dec.at_record_boundary());
}

TEST(FastCgiDecoder, PaddingSplitFromContent) {
  const std::string in = Rec(RecordType::kStdout, 1, "ab", 6);
  Decoder dec(1);
  Record rec;
  size_t used = 0;
  ASSERT_EQ(dec.decode(std::string_view(in).substr(0, 12), used, rec), Decoder::Status::kRecord);
  EXPECT_EQ(used, 12u);
  EXPECT_FALSE(dec.at_record_boundary());
  ASSERT_EQ(dec.decode(std::string_view(in).substr(12), used, rec), Decoder::Status::kNeedMore);
  EXPECT_EQ(used, 4u);
  EXPECT_TRUE(dec.at_record_boundary());
}

TEST(FastCgiDecoder, MaxPadding255) {
  const std::string in = Rec(RecordType::kStdout, 1, "x", 255) + EndRequest(1, 0, 0);
  const Outcome o = Decode(in);
  EXPECT_FALSE(o.error);
  EXPECT_EQ(o.out, "x");
  EXPECT_TRUE(o.ended);
}

TEST(FastCgiDecoder, MaxContentLength) {
  const std::string body(65535, 'q');
  const Outcome o = Decode(Rec(RecordType::kStdout, 1, body, 1));
  EXPECT_EQ(o.out, body);
}

TEST(FastCgiDecoder, EmptyInputNeedsMore) {
  Decoder dec(1);
  Record rec;
  size_t used = 9;
  EXPECT_EQ(dec.decode({}, used, rec), Decoder::Status::kNeedMore);
  EXPECT_EQ(used, 0u);
  EXPECT_TRUE(dec.at_record_boundary());
}

TEST(FastCgiDecoder, PartialHeaderNeedsMore) {
  Decoder dec(1);
  Record rec;
  size_t used = 0;
  EXPECT_EQ(dec.decode(Header(6, 1, 1, 0).substr(0, 5), used, rec), Decoder::Status::kNeedMore);
  EXPECT_EQ(used, 5u);
  EXPECT_FALSE(dec.at_record_boundary());
}

TEST(FastCgiDecoder, EndRequestFields) {
  const Outcome o = Decode(EndRequest(1, 0xdeadbeef, 2, 8));
  EXPECT_TRUE(o.ended);
  EXPECT_EQ(o.app_status, 0xdeadbeefu);
  EXPECT_EQ(o.protocol_status, ProtocolStatus::kOverloaded);
}

TEST(FastCgiDecoder, EndRequestProtocolStatuses) {
  for (uint8_t ps = 0; ps <= 3; ++ps) {
    const Outcome o = Decode(EndRequest(1, 0, ps));
    EXPECT_EQ(static_cast<uint8_t>(o.protocol_status), ps);
  }
}

TEST(FastCgiDecoder, EndRequestReportedOnlyAfterPadding) {
  const std::string in = EndRequest(1, 0, 0, 4);
  Decoder dec(1);
  Record rec;
  size_t used = 0;
  EXPECT_EQ(dec.decode(std::string_view(in).substr(0, 17), used, rec), Decoder::Status::kNeedMore);
  EXPECT_EQ(dec.decode(std::string_view(in).substr(17), used, rec), Decoder::Status::kRecord);
  EXPECT_EQ(rec.type, RecordType::kEndRequest);
  EXPECT_EQ(used, 3u);
  EXPECT_TRUE(dec.at_record_boundary());
}

TEST(FastCgiDecoder, EndRequestWrongLength) {
  for (uint16_t len : {0, 7, 9, 16}) {
    const Outcome o = Decode(Header(3, 1, len, 0) + std::string(len, '\0'));
    EXPECT_TRUE(o.error) << len;
    EXPECT_EQ(o.error_code, DecodeError::kBadEndRequestLength) << len;
  }
}

TEST(FastCgiDecoder, GetValuesResult) {
  const std::string content = std::string("\x0e\x02", 2) + "FCGI_MAX_CONNS" + "10" +
                              std::string("\x0f\x01", 2) + "FCGI_MPXS_CONNS" + "0";
  const std::string in = Rec(RecordType::kGetValuesResult, 0, content, 3);
  const Outcome o = Decode(in);
  ASSERT_FALSE(o.error);
  ASSERT_EQ(o.values.size(), 2u);
  EXPECT_EQ(o.values[0], (std::pair<std::string, std::string>("FCGI_MAX_CONNS", "10")));
  EXPECT_EQ(o.values[1], (std::pair<std::string, std::string>("FCGI_MPXS_CONNS", "0")));
  EXPECT_TRUE(DecodeBytewise(in) == o);
}

TEST(FastCgiDecoder, GetValuesResultEmpty) {
  const Outcome o = Decode(Rec(RecordType::kGetValuesResult, 0, ""));
  EXPECT_FALSE(o.error);
  EXPECT_TRUE(o.values.empty());
  EXPECT_EQ(o.records, 1);
}

TEST(FastCgiDecoder, GetValuesResultOverflowingPair) {
  const Outcome o = Decode(Rec(RecordType::kGetValuesResult, 0,
                               std::string("\x0e\x02"
                                           "AB",
                                           4)));
  EXPECT_TRUE(o.error);
  EXPECT_EQ(o.error_code, DecodeError::kBadNameValueLength);
}

TEST(FastCgiDecoder, GetValuesResultFourByteLengthOverflow) {
  const Outcome o = Decode(Rec(RecordType::kGetValuesResult, 0,
                               std::string("\x80\x00\x01\x00\x00"
                                           "A",
                                           6)));
  EXPECT_EQ(o.error_code, DecodeError::kBadNameValueLength);
}

TEST(FastCgiDecoder, GetValuesResultNonZeroId) {
  EXPECT_EQ(Decode(Rec(RecordType::kGetValuesResult, 1, "")).error_code,
            DecodeError::kBadManagementId);
}

TEST(FastCgiDecoder, UnknownTypeRecord) {
  const Outcome o = Decode(Rec(RecordType::kUnknownType, 0, std::string("\x2a\0\0\0\0\0\0\0", 8)));
  EXPECT_FALSE(o.error);
  EXPECT_EQ(o.unknown_type, 42);
}

TEST(FastCgiDecoder, UnknownTypeBadLengthAndId) {
  EXPECT_EQ(Decode(Rec(RecordType::kUnknownType, 0, "abc")).error_code,
            DecodeError::kBadUnknownTypeLength);
  EXPECT_EQ(Decode(Rec(RecordType::kUnknownType, 1, std::string(8, '\0'))).error_code,
            DecodeError::kBadManagementId);
}

TEST(FastCgiDecoder, BadVersion) {
  for (uint8_t v : {0, 2, 255}) {
    const Outcome o = Decode(Header(6, 1, 0, 0, v));
    EXPECT_EQ(o.error_code, DecodeError::kBadVersion) << int(v);
  }
}

TEST(FastCgiDecoder, UnknownTypes) {
  for (int t : {0, 12, 200, 255}) {
    EXPECT_EQ(Decode(Header(static_cast<uint8_t>(t), 1, 0, 0)).error_code,
              DecodeError::kUnknownType)
        << t;
  }
}

TEST(FastCgiDecoder, UnexpectedTypes) {
  for (RecordType t : {RecordType::kBeginRequest, RecordType::kAbortRequest, RecordType::kParams,
                       RecordType::kStdin, RecordType::kData, RecordType::kGetValues}) {
    EXPECT_EQ(Decode(Rec(t, 1, "")).error_code, DecodeError::kUnexpectedType)
        << static_cast<int>(t);
  }
}

TEST(FastCgiDecoder, WrongRequestId) {
  EXPECT_EQ(Decode(Rec(RecordType::kStdout, 2, "x")).error_code, DecodeError::kWrongRequestId);
  EXPECT_EQ(Decode(Rec(RecordType::kStderr, 0, "x")).error_code, DecodeError::kWrongRequestId);
  EXPECT_EQ(Decode(EndRequest(3, 0, 0)).error_code, DecodeError::kWrongRequestId);
  EXPECT_FALSE(Decode(Rec(RecordType::kStdout, 513, "x"), 513).error);
}

TEST(FastCgiDecoder, ErrorAfterGoodRecordsAndSticky) {
  const std::string in = Rec(RecordType::kStdout, 1, "ok") + Header(6, 1, 0, 0, 9);
  const Outcome o = Decode(in);
  EXPECT_EQ(o.out, "ok");
  EXPECT_EQ(o.error_code, DecodeError::kBadVersion);
  Decoder dec(1);
  Record rec;
  size_t used = 0;
  EXPECT_EQ(dec.decode(Header(6, 1, 0, 0, 9), used, rec), Decoder::Status::kError);
  EXPECT_EQ(dec.decode(Rec(RecordType::kStdout, 1, "x"), used, rec), Decoder::Status::kError);
  EXPECT_EQ(used, 0u);
  EXPECT_STRNE(to_string(dec.error()), "");
}

TEST(FastCgiDecoder, ResetForNextRequestOnSameConnection) {
  Decoder dec(1);
  Record rec;
  size_t used = 0;
  const std::string first = EndRequest(1, 0, 0);
  ASSERT_EQ(dec.decode(first, used, rec), Decoder::Status::kRecord);
  dec.reset(2);
  const std::string second = Rec(RecordType::kStdout, 2, "y");
  ASSERT_EQ(dec.decode(second, used, rec), Decoder::Status::kRecord);
  EXPECT_EQ(rec.data, "y");
  EXPECT_EQ(dec.request_id(), 2);
  // Reset also clears a sticky error.
  dec.decode(Header(0, 2, 0, 0), used, rec);
  dec.reset(2);
  EXPECT_EQ(dec.error(), DecodeError::kNone);
  EXPECT_EQ(dec.decode(second, used, rec), Decoder::Status::kRecord);
}

TEST(FastCgiDecoder, EncodedStdoutStreamDecodes) {
  // Our own encoder writing STDOUT-shaped records (as an app would) decodes back.
  std::string body(150000, '\0');
  for (size_t i = 0; i < body.size(); ++i) body[i] = static_cast<char>(i * 31 + 1);
  std::string in;
  {
    StreamEncoder enc(in, RecordType::kStdout, 5);
    enc.write(body);
  }
  append_stream_end(in, RecordType::kStdout, 5);
  in += EndRequest(5, 0, 0);
  const Outcome o = Decode(in, 5);
  EXPECT_EQ(o.out, body);
  EXPECT_EQ(o.out_ends, 1);
  EXPECT_TRUE(o.ended);
  EXPECT_TRUE(Decode(in, {1, 70000, 70001, 140000}, 5) == o);
}

// ---------------------------------------------------------------------------------------------
// CGI head parser

CgiHeadParser::Status ParseHead(CgiHeadParser& p, std::string_view in, size_t* body_at = nullptr) {
  size_t used = 0;
  const auto st = p.feed(in, used);
  if (body_at) *body_at = used;
  return st;
}

TEST(FastCgiCgiHead, ContentTypeOnlyCrlf) {
  CgiHeadParser p;
  size_t at = 0;
  const std::string in = "Content-type: text/html; charset=UTF-8\r\n\r\nbody";
  ASSERT_EQ(ParseHead(p, in, &at), CgiHeadParser::Status::kDone);
  EXPECT_EQ(in.substr(at), "body");
  EXPECT_EQ(p.head().status, 200);
  EXPECT_FALSE(p.head().has_status);
  EXPECT_TRUE(p.head().has_content_type);
  EXPECT_EQ(p.head().content_type, "text/html; charset=UTF-8");
  EXPECT_TRUE(p.head().headers.empty());
}

TEST(FastCgiCgiHead, LfOnlyAndMixed) {
  CgiHeadParser p;
  size_t at = 0;
  const std::string in = "X-A: 1\nX-B: 2\r\n\nrest";
  ASSERT_EQ(ParseHead(p, in, &at), CgiHeadParser::Status::kDone);
  EXPECT_EQ(in.substr(at), "rest");
  ASSERT_EQ(p.head().headers.size(), 2u);
  EXPECT_EQ(p.head().headers[1].value, "2");
}

TEST(FastCgiCgiHead, StatusWithReason) {
  CgiHeadParser p;
  ASSERT_EQ(ParseHead(p, "Status: 404 Not Found\r\nContent-Type: text/plain\r\n\r\n"),
            CgiHeadParser::Status::kDone);
  EXPECT_EQ(p.head().status, 404);
  EXPECT_TRUE(p.head().has_status);
  EXPECT_EQ(p.head().reason, "Not Found");
}

TEST(FastCgiCgiHead, StatusWithoutReasonAndCaseInsensitive) {
  CgiHeadParser p;
  ASSERT_EQ(ParseHead(p, "status:503\n\n"), CgiHeadParser::Status::kDone);
  EXPECT_EQ(p.head().status, 503);
  EXPECT_EQ(p.head().reason, "");
}

TEST(FastCgiCgiHead, BadStatuses) {
  for (const char* s :
       {"Status: 99\n\n", "Status: 600 X\n\n", "Status: abc\n\n", "Status: 2000\n\n", "Status:\n\n",
        "Status: 20x OK\n\n", "Status: 099 X\n\n"}) {
    CgiHeadParser p;
    EXPECT_EQ(ParseHead(p, s), CgiHeadParser::Status::kError) << s;
    EXPECT_EQ(p.error(), CgiError::kBadStatus) << s;
  }
}

TEST(FastCgiCgiHead, AbsoluteLocationWithoutStatusIs302) {
  CgiHeadParser p;
  ASSERT_EQ(ParseHead(p, "Location: https://example.com/x\r\n\r\n"), CgiHeadParser::Status::kDone);
  EXPECT_EQ(p.head().status, 302);
  EXPECT_EQ(p.head().location, "https://example.com/x");
  EXPECT_FALSE(p.head().local_redirect);
}

TEST(FastCgiCgiHead, LocationWithStatusKeepsStatus) {
  CgiHeadParser p;
  ASSERT_EQ(ParseHead(p, "Location: http://a/\r\nStatus: 301 Moved Permanently\r\n\r\n"),
            CgiHeadParser::Status::kDone);
  EXPECT_EQ(p.head().status, 301);
}

TEST(FastCgiCgiHead, LocalLocationIsLocalRedirect) {
  CgiHeadParser p;
  ASSERT_EQ(ParseHead(p, "Location: /index.php?x=1\n\n"), CgiHeadParser::Status::kDone);
  EXPECT_TRUE(p.head().local_redirect);
  EXPECT_EQ(p.head().status, 200);
  CgiHeadParser q;
  ASSERT_EQ(ParseHead(q, "Location: //cdn.example/x\n\n"), CgiHeadParser::Status::kDone);
  EXPECT_FALSE(q.head().local_redirect);
  EXPECT_EQ(q.head().status, 302);
}

TEST(FastCgiCgiHead, MultipleSetCookieInOrder) {
  CgiHeadParser p;
  ASSERT_EQ(ParseHead(p,
                      "Set-Cookie: a=1\r\nX-Powered-By: PHP/8.2\r\nSet-Cookie: b=2\r\n"
                      "set-cookie: c=3\r\n\r\n"),
            CgiHeadParser::Status::kDone);
  const auto& h = p.head().headers;
  ASSERT_EQ(h.size(), 4u);
  EXPECT_EQ(h[0].name, "Set-Cookie");
  EXPECT_EQ(h[0].value, "a=1");
  EXPECT_EQ(h[1].name, "X-Powered-By");
  EXPECT_EQ(h[2].value, "b=2");
  EXPECT_EQ(h[3].name, "set-cookie");
  EXPECT_EQ(h[3].value, "c=3");
}

TEST(FastCgiCgiHead, ValuesTrimmedEmptyValueAllowed) {
  CgiHeadParser p;
  ASSERT_EQ(ParseHead(p, "X-A: \t v w \t\r\nX-B:\r\n\r\n"), CgiHeadParser::Status::kDone);
  EXPECT_EQ(p.head().headers[0].value, "v w");
  EXPECT_EQ(p.head().headers[1].value, "");
}

TEST(FastCgiCgiHead, ImmediateEmptyLine) {
  CgiHeadParser p;
  size_t at = 0;
  ASSERT_EQ(ParseHead(p, "\r\nbody", &at), CgiHeadParser::Status::kDone);
  EXPECT_EQ(at, 2u);
  EXPECT_EQ(p.head().status, 200);
}

TEST(FastCgiCgiHead, Errors) {
  const struct {
    const char* in;
    CgiError want;
  } cases[] = {
      {"X-A: 1\r\n continued\r\n\r\n", CgiError::kObsFold},
      {"X-A: 1\r\n\tcontinued\r\n\r\n", CgiError::kObsFold},
      {"NoColonHere\r\n\r\n", CgiError::kMissingColon},
      {": value\r\n\r\n", CgiError::kBadName},
      {"Bad Name: v\r\n\r\n", CgiError::kBadName},
      {"X-A: a\rb\r\n\r\n", CgiError::kBareCr},
      {"X-A: a\x01"
       "b\r\n\r\n",
       CgiError::kBadValue},
      {"X-A: a\x7f\r\n\r\n", CgiError::kBadValue},
      {"Status: 200\r\nStatus: 404\r\n\r\n", CgiError::kDuplicate},
      {"Location: /a\r\nLocation: /b\r\n\r\n", CgiError::kDuplicate},
      {"Content-Type: a\r\ncontent-type: b\r\n\r\n", CgiError::kDuplicate},
  };
  for (const auto& c : cases) {
    CgiHeadParser p;
    EXPECT_EQ(ParseHead(p, c.in), CgiHeadParser::Status::kError) << c.in;
    EXPECT_EQ(p.error(), c.want) << c.in;
    EXPECT_STRNE(to_string(p.error()), "");
  }
}

TEST(FastCgiCgiHead, NulRejected) {
  CgiHeadParser p;
  EXPECT_EQ(ParseHead(p, std::string("X-A: a\0b\r\n\r\n", 12)), CgiHeadParser::Status::kError);
  EXPECT_EQ(p.error(), CgiError::kNul);
}

TEST(FastCgiCgiHead, HeadLimit) {
  const std::string in = "X-A: " + std::string(100, 'a') + "\r\n\r\n";  // 109 bytes
  CgiHeadParser exact(in.size());
  EXPECT_EQ(ParseHead(exact, in), CgiHeadParser::Status::kDone);
  CgiHeadParser small(in.size() - 1);
  EXPECT_EQ(ParseHead(small, in), CgiHeadParser::Status::kError);
  EXPECT_EQ(small.error(), CgiError::kTooLarge);
}

TEST(FastCgiCgiHead, DefaultLimitIs64K) {
  CgiHeadParser p;
  size_t used = 0;
  const std::string line = "X-A: " + std::string(1000, 'a') + "\r\n";
  CgiHeadParser::Status st = CgiHeadParser::Status::kNeedMore;
  for (int i = 0; i < 70 && st == CgiHeadParser::Status::kNeedMore; ++i) st = p.feed(line, used);
  EXPECT_EQ(st, CgiHeadParser::Status::kError);
  EXPECT_EQ(p.error(), CgiError::kTooLarge);
}

TEST(FastCgiCgiHead, NeedMoreConsumesEverything) {
  CgiHeadParser p;
  size_t used = 0;
  EXPECT_EQ(p.feed("Content-Type: te", used), CgiHeadParser::Status::kNeedMore);
  EXPECT_EQ(used, 16u);
  EXPECT_EQ(p.feed("xt/html\r\n\r", used), CgiHeadParser::Status::kNeedMore);
  EXPECT_EQ(p.feed("\nBODY", used), CgiHeadParser::Status::kDone);
  EXPECT_EQ(used, 1u);
  EXPECT_EQ(p.head().content_type, "text/html");
  // After kDone nothing more is consumed.
  EXPECT_EQ(p.feed("more", used), CgiHeadParser::Status::kDone);
  EXPECT_EQ(used, 0u);
}

TEST(FastCgiCgiHead, EverySplitPositionAgrees) {
  const std::string in =
      "Status: 404 Not Found\r\nSet-Cookie: a=1\nContent-Type: text/html\r\n"
      "Set-Cookie: b=2\r\nX-Other:  v \r\n\r\n<html>";
  CgiHeadParser whole;
  size_t whole_at = 0;
  ASSERT_EQ(ParseHead(whole, in, &whole_at), CgiHeadParser::Status::kDone);
  for (size_t i = 0; i <= in.size(); ++i) {
    CgiHeadParser p;
    size_t u1 = 0, u2 = 0;
    auto st = p.feed(std::string_view(in).substr(0, i), u1);
    if (st == CgiHeadParser::Status::kNeedMore) {
      EXPECT_EQ(u1, i);
      st = p.feed(std::string_view(in).substr(i), u2);
    }
    ASSERT_EQ(st, CgiHeadParser::Status::kDone) << i;
    EXPECT_EQ(u1 + u2, whole_at) << i;
    EXPECT_EQ(p.head().status, 404);
    EXPECT_EQ(p.head().reason, "Not Found");
    EXPECT_EQ(p.head().content_type, "text/html");
    ASSERT_EQ(p.head().headers.size(), 3u);
    EXPECT_EQ(p.head().headers[2].value, "v");
  }
}

TEST(FastCgiCgiHead, ViewsSurviveInputGoingAway) {
  CgiHeadParser p;
  {
    std::string chunk = "Set-Cookie: x=";
    size_t used = 0;
    p.feed(chunk, used);
    chunk.assign("1\r\n\r\n");
    p.feed(chunk, used);
    chunk.assign(5, 'Z');
  }
  ASSERT_TRUE(p.done());
  EXPECT_EQ(p.head().headers[0].value, "x=1");
}

TEST(FastCgiCgiHead, ResetReuses) {
  CgiHeadParser p;
  ASSERT_EQ(ParseHead(p, "Status: 500\r\nX: 1\r\n\r\n"), CgiHeadParser::Status::kDone);
  p.reset();
  ASSERT_EQ(ParseHead(p, "Location: http://x/\r\n\r\n"), CgiHeadParser::Status::kDone);
  EXPECT_EQ(p.head().status, 302);
  EXPECT_FALSE(p.head().has_status);
  EXPECT_TRUE(p.head().headers.empty());
  p.reset();
  ASSERT_EQ(ParseHead(p, "Bad\r\n\r\n"), CgiHeadParser::Status::kError);
  p.reset();
  EXPECT_EQ(p.error(), CgiError::kNone);
  EXPECT_EQ(ParseHead(p, "\n"), CgiHeadParser::Status::kDone);
}

TEST(FastCgiCgiHead, DecoderFeedsHeadParserAcrossRecords) {
  // The head split across three STDOUT records, including between CR and LF.
  const std::string in = Rec(RecordType::kStdout, 1, "Status: 201 Created\r", 4) +
                         Rec(RecordType::kStdout, 1, "\nX-A: 1\r\n\r") +
                         Rec(RecordType::kStdout, 1, "\nbody", 3) +
                         Rec(RecordType::kStdout, 1, "") + EndRequest(1, 0, 0);
  Decoder dec(1);
  CgiHeadParser head;
  std::string body;
  std::string_view rest = in;
  bool ended = false;
  while (!rest.empty()) {
    Record rec;
    size_t used = 0;
    const auto st = dec.decode(rest, used, rec);
    rest.remove_prefix(used);
    ASSERT_NE(st, Decoder::Status::kError);
    if (st == Decoder::Status::kNeedMore) break;
    if (rec.type == RecordType::kStdout && !rec.data.empty()) {
      std::string_view d = rec.data;
      if (!head.done()) {
        size_t hu = 0;
        ASSERT_NE(head.feed(d, hu), CgiHeadParser::Status::kError);
        d.remove_prefix(hu);
      }
      if (head.done()) body += d;
    }
    if (rec.type == RecordType::kEndRequest) ended = true;
  }
  EXPECT_TRUE(ended);
  ASSERT_TRUE(head.done());
  EXPECT_EQ(head.head().status, 201);
  EXPECT_EQ(body, "body");
}

}  // namespace
}  // namespace peregrine::fastcgi
