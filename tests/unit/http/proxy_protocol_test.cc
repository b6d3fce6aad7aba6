#include "http/proxy_protocol.h"

#include <gtest/gtest.h>

#include <string>

#include "core/address_text.h"

namespace peregrine::http {
namespace {

using namespace std::string_literals;

std::string text_of(const sockaddr_storage& address) {
  AddressText text(reinterpret_cast<const sockaddr*>(&address));
  return std::string(text.ip_view()) + " " + std::string(text.port_view());
}

const std::string kSignature = "\r\n\r\n\0\r\nQUIT\n"s;

std::string v2(unsigned char ver_cmd, unsigned char family, std::string body) {
  std::string out = kSignature;
  out += static_cast<char>(ver_cmd);
  out += static_cast<char>(family);
  out += static_cast<char>(body.size() >> 8);
  out += static_cast<char>(body.size() & 0xff);
  return out + body;
}

const std::string kTcp4Addresses = "\xc0\x00\x02\x01\xc0\x00\x02\x02\xdc\x04\x01\xbb"s;

TEST(ProxyProtocol, V1Tcp4) {
  const std::string input = "PROXY TCP4 192.0.2.1 192.0.2.2 56324 443\r\nGET / HTTP/1.1\r\n";
  ProxyHeader h = parse_proxy_header(input);
  ASSERT_EQ(h.status, ProxyStatus::kDone) << h.error;
  EXPECT_EQ(h.version, 1);
  EXPECT_EQ(h.length, input.find('\n') + 1);
  EXPECT_TRUE(h.has_address);
  EXPECT_EQ(text_of(h.source), "192.0.2.1 56324");
  EXPECT_EQ(text_of(h.destination), "192.0.2.2 443");
}

TEST(ProxyProtocol, V1Tcp6AndUnknown) {
  ProxyHeader h = parse_proxy_header("PROXY TCP6 2001:db8::1 ::1 4711 80\r\n");
  ASSERT_EQ(h.status, ProxyStatus::kDone) << h.error;
  EXPECT_EQ(text_of(h.source), "2001:db8::1 4711");
  h = parse_proxy_header("PROXY UNKNOWN ffff:f...f:ffff 1.2.3.4 65535 65535\r\n");
  ASSERT_EQ(h.status, ProxyStatus::kDone);
  EXPECT_FALSE(h.has_address);
  h = parse_proxy_header("PROXY UNKNOWN\r\n");
  ASSERT_EQ(h.status, ProxyStatus::kDone);
}

TEST(ProxyProtocol, V1NeedsMoreUntilTheLineEnds) {
  const std::string input = "PROXY TCP4 192.0.2.1 192.0.2.2 56324 443\r\n";
  for (size_t cut = 0; cut < input.size(); ++cut)
    EXPECT_EQ(parse_proxy_header(input.substr(0, cut)).status, ProxyStatus::kNeedMore) << cut;
}

TEST(ProxyProtocol, V1Malformed) {
  for (const char* bad : {
           "PROXY TCP4 192.0.2.1 192.0.2.2 56324 443\n",      // no CR
           "PROXY TCP4 192.0.2.1 192.0.2.2 56324\r\n",        // a field missing
           "PROXY TCP4 192.0.2.1 192.0.2.2 56324 443 x\r\n",  // one too many
           "PROXY TCP4 192.0.2.1  192.0.2.2 56324 443\r\n",   // double space
           "PROXY TCP4 2001:db8::1 ::1 1 2\r\n",              // family mismatch
           "PROXY TCP6 192.0.2.1 192.0.2.2 1 2\r\n",
           "PROXY TCP4 192.0.2.1 192.0.2.2 65536 443\r\n",  // port range
           "PROXY TCP4 192.0.2.1 192.0.2.2 0443 443\r\n",   // leading zero
           "PROXY TCP4 192.0.2.300 192.0.2.2 1 2\r\n",
           "PROXY UDP4 192.0.2.1 192.0.2.2 1 2\r\n",
           "PROXY \r\n",
           "GET / HTTP/1.1\r\n",  // no header at all
           "proxy TCP4 192.0.2.1 192.0.2.2 1 2\r\n",
       }) {
    ProxyHeader h = parse_proxy_header(bad);
    EXPECT_EQ(h.status, ProxyStatus::kError) << bad;
    EXPECT_STRNE(h.error, "") << bad;
  }
}

TEST(ProxyProtocol, V1TooLong) {
  std::string input = "PROXY UNKNOWN " + std::string(200, 'x');
  EXPECT_EQ(parse_proxy_header(input).status, ProxyStatus::kError);
  // 107 bytes with the CRLF is the most allowed.
  std::string longest = "PROXY UNKNOWN " + std::string(107 - 16, 'x') + "\r\n";
  ASSERT_EQ(longest.size(), 107u);
  EXPECT_EQ(parse_proxy_header(longest).status, ProxyStatus::kDone);
  std::string over = "PROXY UNKNOWN " + std::string(107 - 15, 'x') + "\r\n";
  EXPECT_EQ(parse_proxy_header(over).status, ProxyStatus::kError);
}

TEST(ProxyProtocol, V2Tcp4WithTlvs) {
  std::string header = v2(0x21, 0x11,
                          kTcp4Addresses +
                              "\x04\x00\x03"
                              "abc"
                              "\x20\x00\x00"s);
  ProxyHeader h = parse_proxy_header(header + "GET /");
  ASSERT_EQ(h.status, ProxyStatus::kDone) << h.error;
  EXPECT_EQ(h.version, 2);
  EXPECT_EQ(h.length, header.size());
  ASSERT_TRUE(h.has_address);
  EXPECT_EQ(text_of(h.source), "192.0.2.1 56324");
  EXPECT_EQ(text_of(h.destination), "192.0.2.2 443");
  for (size_t cut = 0; cut < header.size(); ++cut)
    EXPECT_EQ(parse_proxy_header(header.substr(0, cut)).status, ProxyStatus::kNeedMore) << cut;
}

TEST(ProxyProtocol, V2Tcp6) {
  std::string addresses(36, '\0');
  addresses[0] = 0x20, addresses[1] = 0x01, addresses[2] = 0x0d,
  addresses[3] = static_cast<char>(0xb8);
  addresses[15] = 1;
  addresses[31] = 1;
  addresses[32] = 0x12, addresses[33] = 0x67, addresses[34] = 0, addresses[35] = 80;
  ProxyHeader h = parse_proxy_header(v2(0x21, 0x21, addresses));
  ASSERT_EQ(h.status, ProxyStatus::kDone) << h.error;
  EXPECT_EQ(text_of(h.source), "2001:db8::1 4711");
  EXPECT_EQ(text_of(h.destination), "::1 80");
}

TEST(ProxyProtocol, V2LocalAndUnspecKeepTheSocketAddress) {
  ProxyHeader h = parse_proxy_header(v2(0x20, 0x00, ""));
  ASSERT_EQ(h.status, ProxyStatus::kDone) << h.error;
  EXPECT_FALSE(h.has_address);
  EXPECT_EQ(h.length, 16u);
  // LOCAL with addresses: they are ignored.
  h = parse_proxy_header(v2(0x20, 0x11, kTcp4Addresses));
  ASSERT_EQ(h.status, ProxyStatus::kDone);
  EXPECT_FALSE(h.has_address);
  h = parse_proxy_header(v2(0x21, 0x00, "\x01\x00\x00"s));  // PROXY, AF_UNSPEC, one TLV
  ASSERT_EQ(h.status, ProxyStatus::kDone);
  EXPECT_FALSE(h.has_address);
  h = parse_proxy_header(v2(0x21, 0x31, std::string(216, '\0')));  // AF_UNIX
  ASSERT_EQ(h.status, ProxyStatus::kDone);
  EXPECT_FALSE(h.has_address);
  h = parse_proxy_header(v2(0x21, 0x12, kTcp4Addresses));  // UDP
  ASSERT_EQ(h.status, ProxyStatus::kDone);
  EXPECT_FALSE(h.has_address);
}

TEST(ProxyProtocol, V2Malformed) {
  EXPECT_EQ(parse_proxy_header(v2(0x11, 0x11, kTcp4Addresses)).status, ProxyStatus::kError);
  EXPECT_EQ(parse_proxy_header(v2(0x22, 0x11, kTcp4Addresses)).status, ProxyStatus::kError);
  EXPECT_EQ(parse_proxy_header(v2(0x21, 0x41, kTcp4Addresses)).status, ProxyStatus::kError);
  EXPECT_EQ(parse_proxy_header(v2(0x21, 0x13, kTcp4Addresses)).status, ProxyStatus::kError);
  EXPECT_EQ(parse_proxy_header(v2(0x21, 0x11, "\x01\x02"s)).status, ProxyStatus::kError);
  EXPECT_EQ(parse_proxy_header(v2(0x21, 0x21, kTcp4Addresses)).status, ProxyStatus::kError);
  // TLVs that overrun or are cut.
  EXPECT_EQ(parse_proxy_header(v2(0x21, 0x11,
                                  kTcp4Addresses + "\x04\x00\x09"
                                                   "ab"s))
                .status,
            ProxyStatus::kError);
  EXPECT_EQ(parse_proxy_header(v2(0x21, 0x11, kTcp4Addresses + "\x04\x00"s)).status,
            ProxyStatus::kError);
  // Too long: refused from the 16-byte head, before the body arrives.
  std::string head = kSignature + "\x21\x11\xff\xff"s;
  EXPECT_EQ(parse_proxy_header(head).status, ProxyStatus::kError);
  // A wrong signature byte.
  std::string wrong = v2(0x21, 0x11, kTcp4Addresses);
  wrong[7] = 'X';
  EXPECT_EQ(parse_proxy_header(wrong).status, ProxyStatus::kError);
}

}  // namespace
}  // namespace peregrine::http
