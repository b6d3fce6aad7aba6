// The FastCGI response codec (ResponseReader, handlers/fastcgi/protocol.h) without a socket:
// record bytes in, head/body/stderr/end events out, whole or split at every byte.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "handlers/fastcgi/protocol.h"

namespace peregrine::fastcgi {
namespace {

std::string record(RecordType type, std::string_view content, uint16_t id = 1,
                   uint8_t padding = 0) {
  std::string r;
  r += static_cast<char>(1);
  r += static_cast<char>(type);
  r += static_cast<char>(id >> 8);
  r += static_cast<char>(id & 0xff);
  r += static_cast<char>(content.size() >> 8);
  r += static_cast<char>(content.size() & 0xff);
  r += static_cast<char>(padding);
  r += '\0';
  r.append(content);
  r.append(padding, '\0');
  return r;
}

std::string end_request(ProtocolStatus status = ProtocolStatus::kRequestComplete) {
  std::string body(8, '\0');
  body[4] = static_cast<char>(status);
  return record(RecordType::kEndRequest, body);
}

// What the events of one response add up to.
struct Events {
  int heads = 0;
  int status = 0;
  std::string content_type;
  std::string body;
  std::string stderr_text;
  int ends = 0;
  ProtocolStatus end_status = ProtocolStatus::kRequestComplete;
  std::string error;
  std::string after_end;  // bytes left in the input after END_REQUEST
  bool boundary = false;
};

// Feeds `bytes` in pieces of `step` (0: all at once), as reads would deliver them.
Events feed(std::string_view bytes, size_t step = 0) {
  ResponseReader reader(1);
  Events e;
  while (!bytes.empty() && e.ends == 0 && e.error.empty()) {
    size_t n = step == 0 ? bytes.size() : std::min(step, bytes.size());
    std::string_view input = bytes.substr(0, n);
    bytes.remove_prefix(n);
    for (bool more = true; more;) {
      std::string_view data;
      switch (reader.next(input, data)) {
        case ResponseReader::Event::kNeedMore:
          more = false;
          break;
        case ResponseReader::Event::kHead:
          ++e.heads;
          e.status = reader.head().status;
          e.content_type = reader.head().content_type;
          break;
        case ResponseReader::Event::kBody:
          EXPECT_FALSE(data.empty());
          e.body.append(data);
          break;
        case ResponseReader::Event::kStderr:
          e.stderr_text.append(data);
          break;
        case ResponseReader::Event::kEnd:
          ++e.ends;
          e.end_status = reader.end_status();
          e.boundary = reader.at_record_boundary();
          e.after_end = std::string(input) + std::string(bytes);
          more = false;
          break;
        case ResponseReader::Event::kError:
          e.error = reader.error();
          more = false;
          break;
      }
    }
  }
  return e;
}

const std::string kHello =
    record(RecordType::kStdout, "Status: 201 Created\r\nContent-type: text/plain\r\n\r\nhello") +
    record(RecordType::kStdout, ", world") + record(RecordType::kStdout, "") + end_request();

TEST(ResponseReaderTest, HeadBodyEnd) {
  for (size_t step : {size_t{0}, size_t{1}, size_t{3}, size_t{7}, size_t{64}}) {
    Events e = feed(kHello, step);
    EXPECT_EQ(e.heads, 1) << step;
    EXPECT_EQ(e.status, 201) << step;
    EXPECT_EQ(e.content_type, "text/plain") << step;
    EXPECT_EQ(e.body, "hello, world") << step;
    EXPECT_EQ(e.ends, 1) << step;
    EXPECT_TRUE(e.boundary) << step;
    EXPECT_EQ(e.error, "") << step;
  }
}

TEST(ResponseReaderTest, HeadAloneThenBodyInLaterRecords) {
  std::string bytes = record(RecordType::kStdout, "Content-Type: text/html\r\n\r\n") +
                      record(RecordType::kStdout, "<p>", 1, 5) + record(RecordType::kStdout, "") +
                      end_request();
  Events e = feed(bytes);
  EXPECT_EQ(e.heads, 1);
  EXPECT_EQ(e.status, 200);
  EXPECT_EQ(e.body, "<p>");
  EXPECT_EQ(e.ends, 1);
}

TEST(ResponseReaderTest, HeadSplitAcrossRecords) {
  std::string bytes = record(RecordType::kStdout, "Content-Ty") +
                      record(RecordType::kStdout, "pe: a/b\r\n") +
                      record(RecordType::kStdout, "\r\nbody") + end_request();
  for (size_t step : {size_t{0}, size_t{1}, size_t{5}}) {
    Events e = feed(bytes, step);
    EXPECT_EQ(e.heads, 1) << step;
    EXPECT_EQ(e.content_type, "a/b") << step;
    EXPECT_EQ(e.body, "body") << step;
  }
}

TEST(ResponseReaderTest, StderrPassesThroughWithoutEndingTheHead) {
  std::string bytes = record(RecordType::kStderr, "PHP Notice: x\n") +
                      record(RecordType::kStdout, "Status: 500\r\n\r\n") +
                      record(RecordType::kStderr, "more") + end_request();
  Events e = feed(bytes, 2);
  EXPECT_EQ(e.stderr_text, "PHP Notice: x\nmore");
  EXPECT_EQ(e.status, 500);
  EXPECT_EQ(e.body, "");
  EXPECT_EQ(e.ends, 1);
}

TEST(ResponseReaderTest, EndWithoutHead) {
  Events e = feed(record(RecordType::kStdout, "") + end_request());
  EXPECT_EQ(e.heads, 0);
  EXPECT_EQ(e.ends, 1);
}

TEST(ResponseReaderTest, OverloadedIsReportedInTheEnd) {
  Events e = feed(end_request(ProtocolStatus::kOverloaded));
  EXPECT_EQ(e.ends, 1);
  EXPECT_EQ(e.end_status, ProtocolStatus::kOverloaded);
}

TEST(ResponseReaderTest, BytesAfterTheEndAreLeftForTheNextRequest) {
  std::string next = record(RecordType::kStdout, "Status: 204\r\n\r\n");
  Events e = feed(kHello + next);
  EXPECT_EQ(e.ends, 1);
  EXPECT_EQ(e.after_end, next);
}

TEST(ResponseReaderTest, MalformedRecordsAndHeads) {
  std::string bad_version = kHello;
  bad_version[0] = 9;
  EXPECT_NE(feed(bad_version).error, "");
  EXPECT_NE(feed(record(RecordType::kStdout, "not a header\r\n\r\nbody") + end_request()).error,
            "");
  EXPECT_NE(feed(record(RecordType::kStdout, "Status: 99\r\n\r\n")).error, "");
  // Another request's records on our connection.
  EXPECT_NE(feed(record(RecordType::kStdout, "Status: 200\r\n\r\n", 2)).error, "");
}

TEST(ResponseReaderTest, ResetReadsAFreshResponse) {
  ResponseReader reader(1);
  std::string first = kHello;
  std::string_view input = first;
  std::string_view data;
  while (reader.next(input, data) != ResponseReader::Event::kEnd) {
  }
  reader.reset();
  EXPECT_FALSE(reader.head_done());
  std::string second = record(RecordType::kStdout, "Status: 404\r\n\r\n");
  input = second;
  ASSERT_EQ(reader.next(input, data), ResponseReader::Event::kHead);
  EXPECT_EQ(reader.head().status, 404);
}

}  // namespace
}  // namespace peregrine::fastcgi
