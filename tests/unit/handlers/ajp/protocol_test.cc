// The AJP13 codec (handlers/ajp/protocol.h) without a socket: the request packets byte for byte
// as Tomcat's AJPv13 document lays them out, and the container's packets decoded whole, split
// and one byte at a time, with each kind of malformed input.
#include "handlers/ajp/protocol.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace peregrine::ajp {
namespace {

std::string u16(uint16_t v) {
  return {static_cast<char>(v >> 8), static_cast<char>(v & 0xFF)};
}
std::string str(std::string_view s) {
  return u16(static_cast<uint16_t>(s.size())) + std::string(s) + std::string(1, '\0');
}
std::string packet(const std::string& payload) {
  return "AB" + u16(static_cast<uint16_t>(payload.size())) + payload;
}
std::string headers_packet(uint16_t status, std::vector<std::pair<std::string, std::string>> hs,
                           bool coded_type = true) {
  std::string p = "\x04" + u16(status) + str("OK") + u16(static_cast<uint16_t>(hs.size()));
  for (auto& [name, value] : hs) {
    if (coded_type && name == "Content-Type")
      p += u16(0xA001);
    else
      p += str(name);
    p += str(value);
  }
  return packet(p);
}
std::string body_packet(std::string_view data) {
  return packet("\x03" + u16(static_cast<uint16_t>(data.size())) + std::string(data) +
                std::string(1, '\0'));
}
std::string end_packet(bool reuse) {
  return packet(std::string("\x05") + (reuse ? '\x01' : '\x00'));
}

struct Decoded {
  std::vector<std::string> events;  // "head 200", "body ...", "get 8186", "end 1", "error ..."
};

Decoded decode_all(const std::string& bytes, size_t step, size_t packet_size = 8192) {
  ResponseReader reader(packet_size);
  Decoded out;
  for (size_t at = 0; at < bytes.size() || at == 0;) {
    size_t n = step == 0 ? bytes.size() : std::min(step, bytes.size() - at);
    std::string_view input(bytes.data() + at, n);
    at += n;
    for (;;) {
      std::string_view data;
      auto e = reader.next(input, data);
      if (e == ResponseReader::Event::kNeedMore) break;
      switch (e) {
        case ResponseReader::Event::kHead: {
          std::string h = "head " + std::to_string(reader.status());
          for (auto& header : reader.headers())
            h += " " + std::string(header.name) + "=" + std::string(header.value);
          out.events.push_back(h);
          break;
        }
        case ResponseReader::Event::kBody:
          out.events.push_back("body " + std::string(data));
          break;
        case ResponseReader::Event::kGetBody:
          out.events.push_back("get " + std::to_string(reader.requested()));
          break;
        case ResponseReader::Event::kEnd:
          out.events.push_back(std::string("end ") + (reader.reuse() ? "1" : "0"));
          break;
        case ResponseReader::Event::kCpong:
          out.events.push_back("cpong");
          break;
        case ResponseReader::Event::kError:
          out.events.push_back("error " + reader.error());
          return out;
        case ResponseReader::Event::kNeedMore:
          break;
      }
    }
    if (bytes.empty()) break;
  }
  return out;
}

TEST(AjpProtocol, MethodCodes) {
  EXPECT_EQ(method_code("OPTIONS"), 1);
  EXPECT_EQ(method_code("GET"), 2);
  EXPECT_EQ(method_code("HEAD"), 3);
  EXPECT_EQ(method_code("POST"), 4);
  EXPECT_EQ(method_code("PUT"), 5);
  EXPECT_EQ(method_code("DELETE"), 6);
  EXPECT_EQ(method_code("PROPFIND"), 8);
  EXPECT_EQ(method_code("MKACTIVITY"), 27);
  EXPECT_EQ(method_code("PATCH"), 0xFF);
  EXPECT_EQ(method_code("get"), 0xFF);  // methods are case-sensitive
}

TEST(AjpProtocol, ForwardRequestLayout) {
  Header headers[] = {
      {"Host", "example.test"}, {"X-Custom", "v"}, {"Content-Length", "5"}, {"user-agent", "ua"}};
  ForwardRequest r;
  r.method = "POST";
  r.protocol = "HTTP/1.1";
  r.uri = "/app/x";
  r.query = "a=1";
  r.remote_addr = "192.0.2.7";
  r.remote_port = "4242";
  r.server_name = "example.test";
  r.server_port = 8080;
  r.is_ssl = true;
  r.headers = headers;
  r.secret = "sec";
  std::string out, error;
  ASSERT_TRUE(encode_forward_request(r, 8192, out, &error)) << error;
  std::string payload = std::string("\x02\x04", 2) + str("HTTP/1.1") + str("/app/x") +
                        str("192.0.2.7") + str("192.0.2.7") + str("example.test") + u16(8080) +
                        std::string(1, '\x01') + u16(4) + u16(0xA00B) + str("example.test") +
                        str("X-Custom") + str("v") + u16(0xA008) + str("5") + u16(0xA00E) +
                        str("ua") + std::string(1, '\x05') + str("a=1") + std::string(1, '\x0A') +
                        str("AJP_REMOTE_PORT") + str("4242") + std::string(1, '\x0C') + str("sec") +
                        std::string(1, '\xFF');
  EXPECT_EQ(out, "\x12\x34" + u16(static_cast<uint16_t>(payload.size())) + payload);
}

TEST(AjpProtocol, SslAttributesInMod_jkOrder) {
  // The attributes mod_jk sends for a TLS client, each coded as Tomcat's AjpProcessor reads it:
  // strings for the certificate, cipher and session; the key size as a bare 16-bit integer;
  // the protocol as the AJP_SSL_PROTOCOL request attribute.
  ForwardRequest r;
  r.method = "GET";
  r.protocol = "HTTP/1.1";
  r.uri = "/";
  r.is_ssl = true;
  r.ssl_cert = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
  r.ssl_cipher = "TLS_AES_256_GCM_SHA384";
  r.ssl_session = "0A1B";
  r.ssl_key_size = 256;
  r.ssl_protocol = "TLSv1.3";
  r.secret = "s";
  std::string out, error;
  ASSERT_TRUE(encode_forward_request(r, 8192, out, &error)) << error;
  const std::string attributes = std::string(1, '\x07') + str(r.ssl_cert) + std::string(1, '\x08') +
                                 str(r.ssl_cipher) + std::string(1, '\x09') + str("0A1B") +
                                 std::string(1, '\x0B') + u16(256) + std::string(1, '\x0A') +
                                 str("AJP_SSL_PROTOCOL") + str("TLSv1.3") + std::string(1, '\x0C') +
                                 str("s") + std::string(1, '\xFF');
  ASSERT_GE(out.size(), attributes.size());
  EXPECT_EQ(out.substr(out.size() - attributes.size()), attributes);
}

TEST(AjpProtocol, NoSslAttributesOnAPlainRequest) {
  ForwardRequest r;
  r.method = "GET";
  r.protocol = "HTTP/1.1";
  r.uri = "/";
  std::string out, error;
  ASSERT_TRUE(encode_forward_request(r, 8192, out, &error)) << error;
  // Nothing after the empty header list but the end of the attributes.
  EXPECT_EQ(out.substr(out.size() - 3), u16(0) + std::string(1, '\xFF'));
  EXPECT_EQ(out.find("AJP_SSL_PROTOCOL"), std::string::npos);
}

TEST(AjpProtocol, ChunkedDropsContentLengthAndStoredMethod) {
  Header headers[] = {{"Content-Length", "5"}};
  ForwardRequest r;
  r.method = "PATCH";
  r.protocol = "HTTP/1.1";
  r.uri = "/";
  r.headers = headers;
  r.drop_content_length = true;
  std::string out, error;
  ASSERT_TRUE(encode_forward_request(r, 8192, out, &error));
  EXPECT_EQ(out.find(u16(0xA008)), std::string::npos);
  EXPECT_EQ(static_cast<uint8_t>(out[5]), 0xFF);  // SC_M_JK_STORED
  EXPECT_NE(out.find(std::string(1, '\x0D') + str("PATCH")), std::string::npos);
  EXPECT_EQ(out.back(), '\xFF');
}

TEST(AjpProtocol, ForwardRequestTooLargeForThePacket) {
  std::string big(9000, 'x');
  Header headers[] = {{"X-Big", big}};
  ForwardRequest r;
  r.method = "GET";
  r.protocol = "HTTP/1.1";
  r.uri = "/";
  r.headers = headers;
  std::string out = "keep", error;
  EXPECT_FALSE(encode_forward_request(r, 8192, out, &error));
  EXPECT_EQ(out, "keep");
  EXPECT_NE(error.find("ajp_packet_size"), std::string::npos);
  EXPECT_TRUE(encode_forward_request(r, 16384, out, &error));
}

TEST(AjpProtocol, BodyPacketsAndCping) {
  std::string out;
  append_body_packet(out, "hello");
  EXPECT_EQ(out, std::string("\x12\x34\x00\x07\x00\x05hello", 11));
  out.clear();
  append_body_packet(out, "");
  EXPECT_EQ(out, std::string("\x12\x34\x00\x00", 4));
  EXPECT_EQ(cping_packet(), std::string_view("\x12\x34\x00\x01\x0A", 5));
  EXPECT_EQ(max_body_chunk(8192), 8186u);
}

TEST(AjpProtocol, ResponseWholeSplitAndByteByByte) {
  std::string bytes = packet(std::string("\x06", 1) + u16(8186)) +
                      headers_packet(200, {{"Content-Type", "text/plain"}, {"X-A", "b"}}) +
                      body_packet("hello ") + body_packet("") + body_packet("world") +
                      end_packet(true);
  std::vector<std::string> expected = {"get 8186",    "head 200 Content-Type=text/plain X-A=b",
                                       "body hello ", "body ",
                                       "body world",  "end 1"};
  for (size_t step : {0, 1, 2, 3, 5, 7, 11}) {
    EXPECT_EQ(decode_all(bytes, step).events, expected) << "step " << step;
  }
}

TEST(AjpProtocol, CodedResponseHeaders) {
  std::string p = "\x04" + u16(302) + str("Found") + u16(3) + u16(0xA006) + str("/next") +
                  u16(0xA007) + str("a=1") + u16(0xA003) + str("0");
  auto events = decode_all(packet(p) + end_packet(false), 0).events;
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0], "head 302 Location=/next Set-Cookie=a=1 Content-Length=0");
  EXPECT_EQ(events[1], "end 0");
}

// The headers are stored in one allocation sized to their count, and a count the payload cannot
// hold (a container's word: up to 65,535) sizes it by the payload instead, 64 at most.
TEST(AjpProtocol, HeaderStorageFollowsTheCountBoundedByThePacket) {
  ResponseReader reader;
  std::string bytes = headers_packet(200, {{"Content-Type", "text/html"}, {"A", "1"}, {"B", "2"}});
  std::string_view input = bytes, data;
  ASSERT_EQ(reader.next(input, data), ResponseReader::Event::kHead);
  EXPECT_EQ(reader.headers().size(), 3u);
  EXPECT_EQ(reader.headers().capacity(), 3u);

  ResponseReader lying;
  std::string claim =
      packet("\x04" + u16(200) + str("OK") + u16(65535) + u16(0xA001) + str("text/html"));
  input = claim;
  ASSERT_EQ(lying.next(input, data), ResponseReader::Event::kError);
  EXPECT_NE(lying.error().find("truncated"), std::string::npos);
  EXPECT_LE(lying.headers().capacity(), 14u / 4);  // the 14 payload bytes after the count

  // Past the reserved 64, the list grows with the headers that come.
  std::vector<std::pair<std::string, std::string>> many;
  for (int i = 0; i < 100; ++i) many.emplace_back("X-" + std::to_string(i), std::to_string(i));
  ResponseReader large;
  std::string big = headers_packet(200, many);
  input = big;
  ASSERT_EQ(large.next(input, data), ResponseReader::Event::kHead);
  ASSERT_EQ(large.headers().size(), 100u);
  EXPECT_EQ(large.headers()[99].name, "X-99");
  EXPECT_EQ(large.headers()[99].value, "99");
}

TEST(AjpProtocol, CpongAndErrors) {
  EXPECT_EQ(decode_all(packet("\x09"), 1).events, std::vector<std::string>{"cpong"});
  auto first_error = [](const std::string& bytes, size_t size = 8192) {
    auto events = decode_all(bytes, 0, size).events;
    return events.empty() ? std::string() : events.back();
  };
  EXPECT_NE(first_error("HTTP/1.1 400 Bad Request\r\n").find("answered HTTP"), std::string::npos);
  EXPECT_NE(first_error(std::string("XY\x00\x01\x09", 5)).find("signature"), std::string::npos);
  EXPECT_NE(first_error(std::string("AB\x00\x00", 4)).find("empty packet"), std::string::npos);
  EXPECT_NE(first_error("AB" + u16(9000) + std::string(9000, '\x03')).find("exceeds"),
            std::string::npos);
  EXPECT_EQ(first_error("AB" + u16(9000) + std::string(9000, '\x03'), 16384).find("exceeds"),
            std::string::npos);
  EXPECT_NE(first_error(body_packet("x")).find("before SEND_HEADERS"), std::string::npos);
  EXPECT_NE(first_error(packet("\x07")).find("unknown packet type"), std::string::npos);
  EXPECT_NE(first_error(packet("\x04\x00")).find("truncated"), std::string::npos);
  EXPECT_NE(first_error(headers_packet(200, {}) + packet("\x03" + u16(10) + "abc"))
                .find("shorter than its length"),
            std::string::npos);
  EXPECT_NE(first_error(headers_packet(200, {}) + end_packet(true) + end_packet(true))
                .find("after END_RESPONSE"),
            std::string::npos);
  EXPECT_NE(first_error(packet("\x04" + u16(200) + str("OK") + u16(1) + u16(0xA0FF) + str("x")))
                .find("unknown response header code"),
            std::string::npos);
  EXPECT_NE(first_error(headers_packet(99, {})).find("invalid status"), std::string::npos);
  EXPECT_NE(first_error(headers_packet(200, {}) + headers_packet(200, {})).find("second"),
            std::string::npos);
}

TEST(AjpProtocol, ResetReadsANewResponse) {
  ResponseReader reader;
  std::string bytes = headers_packet(404, {}) + end_packet(false);
  std::string_view input = bytes, data;
  EXPECT_EQ(reader.next(input, data), ResponseReader::Event::kHead);
  EXPECT_EQ(reader.next(input, data), ResponseReader::Event::kEnd);
  reader.reset();
  std::string again = headers_packet(200, {});
  input = again;
  EXPECT_EQ(reader.next(input, data), ResponseReader::Event::kHead);
  EXPECT_EQ(reader.status(), 200);
}

}  // namespace
}  // namespace peregrine::ajp
