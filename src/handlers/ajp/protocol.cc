#include "handlers/ajp/protocol.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "core/strings.h"

namespace peregrine::ajp {

namespace {

constexpr uint8_t kForwardRequest = 0x02;
constexpr uint8_t kCping = 0x0A;
constexpr uint8_t kSendBodyChunk = 3;
constexpr uint8_t kSendHeaders = 4;
constexpr uint8_t kEndResponse = 5;
constexpr uint8_t kGetBodyChunk = 6;
constexpr uint8_t kCpongReply = 9;
constexpr uint8_t kStoredMethod = 0xFF;
// Past this many, a response head's header list grows with the headers that really come.
constexpr size_t kHeadersReservedAtMost = 64;

// Request attributes.
constexpr uint8_t kAttrRemoteUser = 0x03;
constexpr uint8_t kAttrAuthType = 0x04;
constexpr uint8_t kAttrQueryString = 0x05;
constexpr uint8_t kAttrRoute = 0x06;
constexpr uint8_t kAttrSslCert = 0x07;
constexpr uint8_t kAttrSslCipher = 0x08;
constexpr uint8_t kAttrSslSession = 0x09;
constexpr uint8_t kAttrRequest = 0x0A;  // a named attribute: name, value
constexpr uint8_t kAttrSslKeySize = 0x0B;
constexpr uint8_t kAttrSecret = 0x0C;
constexpr uint8_t kAttrStoredMethod = 0x0D;
constexpr uint8_t kAttrsDone = 0xFF;

constexpr uint16_t kNullString = 0xFFFF;

// Methods with a code, in code order from 1.
constexpr std::array<std::string_view, 27> kMethods = {"OPTIONS",
                                                       "GET",
                                                       "HEAD",
                                                       "POST",
                                                       "PUT",
                                                       "DELETE",
                                                       "TRACE",
                                                       "PROPFIND",
                                                       "PROPPATCH",
                                                       "MKCOL",
                                                       "COPY",
                                                       "MOVE",
                                                       "LOCK",
                                                       "UNLOCK",
                                                       "ACL",
                                                       "REPORT",
                                                       "VERSION-CONTROL",
                                                       "CHECKIN",
                                                       "CHECKOUT",
                                                       "UNCHECKOUT",
                                                       "SEARCH",
                                                       "MKWORKSPACE",
                                                       "UPDATE",
                                                       "LABEL",
                                                       "MERGE",
                                                       "BASELINE-CONTROL",
                                                       "MKACTIVITY"};

// Request headers with a code (0xA001 + index); names compared case-insensitively.
constexpr std::array<std::string_view, 14> kRequestHeaders = {
    "accept",     "accept-charset", "accept-encoding", "accept-language", "authorization",
    "connection", "content-type",   "content-length",  "cookie",          "cookie2",
    "host",       "pragma",         "referer",         "user-agent"};

// Response headers with a code (0xA001 + index), spelled as a client expects them.
constexpr std::array<std::string_view, 11> kResponseHeaders = {
    "Content-Type", "Content-Language", "Content-Length", "Date",   "Last-Modified",   "Location",
    "Set-Cookie",   "Set-Cookie2",      "Servlet-Engine", "Status", "WWW-Authenticate"};

class Writer {
 public:
  explicit Writer(std::string& out) : out_(out) {}
  void byte(uint8_t b) { out_.push_back(static_cast<char>(b)); }
  void u16(uint16_t v) {
    byte(static_cast<uint8_t>(v >> 8));
    byte(static_cast<uint8_t>(v & 0xFF));
  }
  // A string: 16-bit length, the bytes, a NUL. False when too long for the length field.
  bool string(std::string_view s) {
    if (s.size() >= kNullString) return false;
    u16(static_cast<uint16_t>(s.size()));
    out_.append(s);
    byte(0);
    return true;
  }

 private:
  std::string& out_;
};

class Cursor {
 public:
  explicit Cursor(std::string_view bytes) : bytes_(bytes) {}
  bool byte(uint8_t* v) {
    if (bytes_.empty()) return false;
    *v = static_cast<uint8_t>(bytes_[0]);
    bytes_.remove_prefix(1);
    return true;
  }
  bool u16(uint16_t* v) {
    if (bytes_.size() < 2) return false;
    *v = static_cast<uint16_t>((static_cast<uint8_t>(bytes_[0]) << 8) |
                               static_cast<uint8_t>(bytes_[1]));
    bytes_.remove_prefix(2);
    return true;
  }
  // A string (a null string reads as empty).
  bool string(std::string_view* s) {
    uint16_t length = 0;
    if (!u16(&length)) return false;
    if (length == kNullString) {
      *s = {};
      return true;
    }
    if (bytes_.size() < static_cast<size_t>(length) + 1) return false;
    *s = bytes_.substr(0, length);
    bytes_.remove_prefix(static_cast<size_t>(length) + 1);  // the NUL
    return true;
  }
  size_t remaining() const { return bytes_.size(); }
  bool peek(uint8_t* v) const {
    if (bytes_.empty()) return false;
    *v = static_cast<uint8_t>(bytes_[0]);
    return true;
  }
  bool take(size_t n, std::string_view* s) {
    if (bytes_.size() < n) return false;
    *s = bytes_.substr(0, n);
    bytes_.remove_prefix(n);
    return true;
  }

 private:
  std::string_view bytes_;
};

int request_header_code(std::string_view name) {
  for (size_t i = 0; i < kRequestHeaders.size(); ++i)
    if (ascii_iequals(name, kRequestHeaders[i])) return 0xA001 + static_cast<int>(i);
  return -1;
}

bool attribute(Writer& w, uint8_t code, std::string_view value) {
  if (value.empty()) return true;
  w.byte(code);
  return w.string(value);
}

}  // namespace

uint8_t method_code(std::string_view method) {
  for (size_t i = 0; i < kMethods.size(); ++i)
    if (method == kMethods[i]) return static_cast<uint8_t>(i + 1);
  return kStoredMethod;
}

bool encode_forward_request(const ForwardRequest& r, size_t packet_size, std::string& out,
                            std::string* error) {
  const size_t start = out.size();
  out.append(kPacketHeader, '\0');  // filled once the length is known
  Writer w(out);
  const uint8_t code = method_code(r.method);
  w.byte(kForwardRequest);
  w.byte(code);
  bool ok = w.string(r.protocol) && w.string(r.uri) && w.string(r.remote_addr) &&
            w.string(r.remote_addr) && w.string(r.server_name);
  w.u16(r.server_port);
  w.byte(r.is_ssl ? 1 : 0);
  const size_t count_at = out.size();
  w.u16(0);
  uint16_t count = 0;
  for (const Header& h : r.headers) {
    if (!ok) break;
    int header_code = request_header_code(h.name);
    if (header_code == 0xA008 && r.drop_content_length) continue;
    if (header_code > 0) {
      w.u16(static_cast<uint16_t>(header_code));
    } else {
      ok = w.string(h.name);
    }
    ok = ok && w.string(h.value);
    ++count;
  }
  out[count_at] = static_cast<char>(count >> 8);
  out[count_at + 1] = static_cast<char>(count & 0xFF);
  ok = ok && attribute(w, kAttrQueryString, r.query) &&
       attribute(w, kAttrRemoteUser, r.remote_user) && attribute(w, kAttrAuthType, r.auth_type) &&
       attribute(w, kAttrRoute, r.route) && attribute(w, kAttrSslCert, r.ssl_cert) &&
       attribute(w, kAttrSslCipher, r.ssl_cipher) && attribute(w, kAttrSslSession, r.ssl_session);
  if (ok && r.ssl_key_size >= 0) {
    w.byte(kAttrSslKeySize);
    w.u16(static_cast<uint16_t>(r.ssl_key_size));
  }
  if (ok && !r.remote_port.empty()) {
    w.byte(kAttrRequest);
    ok = w.string("AJP_REMOTE_PORT") && w.string(r.remote_port);
  }
  if (ok && !r.ssl_protocol.empty()) {  // no code of its own: Tomcat reads this name
    w.byte(kAttrRequest);
    ok = w.string("AJP_SSL_PROTOCOL") && w.string(r.ssl_protocol);
  }
  if (ok && code == kStoredMethod) ok = attribute(w, kAttrStoredMethod, r.method);
  ok = ok && attribute(w, kAttrSecret, r.secret);
  w.byte(kAttrsDone);
  const size_t length = out.size() - start - kPacketHeader;
  if (!ok || out.size() - start > packet_size) {
    *error = ok ? "the request head needs " + std::to_string(out.size() - start) +
                      " bytes, more than ajp_packet_size (" + std::to_string(packet_size) + ")"
                : "a request field is longer than AJP's 65534-byte limit";
    out.resize(start);
    return false;
  }
  out[start] = 0x12;
  out[start + 1] = 0x34;
  out[start + 2] = static_cast<char>(length >> 8);
  out[start + 3] = static_cast<char>(length & 0xFF);
  return true;
}

void append_body_packet(std::string& out, std::string_view data) {
  Writer w(out);
  w.byte(0x12);
  w.byte(0x34);
  if (data.empty()) {
    w.u16(0);
    return;
  }
  w.u16(static_cast<uint16_t>(data.size() + 2));
  w.u16(static_cast<uint16_t>(data.size()));
  out.append(data);
}

std::string_view cping_packet() {
  static constexpr char kPacket[] = {0x12, 0x34, 0x00, 0x01, kCping};
  return {kPacket, sizeof kPacket};
}

void ResponseReader::reset() {
  partial_.clear();
  head_done_ = ended_ = failed_ = false;
  status_ = 0;
  reason_ = {};
  headers_.clear();
  requested_ = 0;
  reuse_ = false;
  error_.clear();
}

ResponseReader::Event ResponseReader::fail(std::string message) {
  failed_ = true;
  error_ = std::move(message);
  return Event::kError;
}

ResponseReader::Event ResponseReader::next(std::string_view& input, std::string_view& data) {
  if (failed_) return Event::kError;
  // The packet decoded last time lived in partial_: its views are spent now.
  if (partial_.size() >= kPacketHeader) {
    size_t length = (static_cast<uint8_t>(partial_[2]) << 8) | static_cast<uint8_t>(partial_[3]);
    if (partial_.size() == kPacketHeader + length) partial_.clear();
  }
  if (input.empty()) return Event::kNeedMore;
  std::string_view packet;
  if (partial_.empty() && input.size() >= kPacketHeader) {
    packet = input;  // the common case: decode in place
  } else {
    size_t want = kPacketHeader;
    if (partial_.size() >= kPacketHeader)
      want += (static_cast<uint8_t>(partial_[2]) << 8) | static_cast<uint8_t>(partial_[3]);
    size_t take = std::min(input.size(), want - partial_.size());
    partial_.append(input.substr(0, take));
    input.remove_prefix(take);
    if (partial_.size() < kPacketHeader) return Event::kNeedMore;
    packet = partial_;
  }
  if (packet[0] != 'A' || packet[1] != 'B') {
    if (packet.starts_with("HT"))
      return fail("the back end answered HTTP, not AJP: is the address Tomcat's HTTP connector?");
    return fail("bad packet signature (expected \"AB\")");
  }
  const size_t length = (static_cast<uint8_t>(packet[2]) << 8) | static_cast<uint8_t>(packet[3]);
  if (length == 0) return fail("empty packet");
  if (length + kPacketHeader > packet_size_)
    return fail("a packet of " + std::to_string(length + kPacketHeader) +
                " bytes exceeds ajp_packet_size (" + std::to_string(packet_size_) +
                "): set the connector's packetSize and ajp_packet_size alike");
  if (packet.data() == partial_.data()) {
    if (partial_.size() < kPacketHeader + length) {
      size_t take = std::min(input.size(), kPacketHeader + length - partial_.size());
      partial_.append(input.substr(0, take));
      input.remove_prefix(take);
      if (partial_.size() < kPacketHeader + length) return Event::kNeedMore;
    }
    return decode(std::string_view(partial_).substr(kPacketHeader, length), data);
  }
  if (input.size() < kPacketHeader + length) {  // split: keep what came
    partial_.assign(input);
    input = {};
    return Event::kNeedMore;
  }
  std::string_view payload = input.substr(kPacketHeader, length);
  input.remove_prefix(kPacketHeader + length);
  return decode(payload, data);
}

ResponseReader::Event ResponseReader::decode(std::string_view payload, std::string_view& data) {
  Cursor c(payload);
  uint8_t type = 0;
  c.byte(&type);
  if (ended_) return fail("a packet after END_RESPONSE");
  switch (type) {
    case kSendHeaders:
      if (head_done_) return fail("a second SEND_HEADERS");
      return decode_headers(payload.substr(1));
    case kSendBodyChunk: {
      uint16_t length = 0;
      if (!head_done_) return fail("SEND_BODY_CHUNK before SEND_HEADERS");
      if (!c.u16(&length) || !c.take(length, &data))
        return fail("SEND_BODY_CHUNK shorter than its length");
      return Event::kBody;
    }
    case kEndResponse: {
      uint8_t reuse = 0;
      if (!c.byte(&reuse)) return fail("END_RESPONSE without its reuse flag");
      reuse_ = reuse == 1;
      ended_ = true;
      return Event::kEnd;
    }
    case kGetBodyChunk: {
      uint16_t length = 0;
      if (!c.u16(&length)) return fail("GET_BODY_CHUNK without a length");
      requested_ = length;
      return Event::kGetBody;
    }
    case kCpongReply:
      return Event::kCpong;
    default:
      return fail("unknown packet type " + std::to_string(type));
  }
}

ResponseReader::Event ResponseReader::decode_headers(std::string_view payload) {
  Cursor c(payload);
  uint16_t status = 0, count = 0;
  if (!c.u16(&status) || !c.string(&reason_) || !c.u16(&count))
    return fail("truncated SEND_HEADERS");
  if (status < 100 || status > 999) return fail("invalid status " + std::to_string(status));
  headers_.clear();
  // One allocation instead of one per doubling. The count is the container's word: no more
  // headers than the payload has room for (4 bytes each at least: a coded name, a null value).
  headers_.reserve(std::min<size_t>({count, c.remaining() / 4, kHeadersReservedAtMost}));
  for (uint16_t i = 0; i < count; ++i) {
    ResponseHeader h;
    uint8_t first = 0;
    if (!c.peek(&first)) return fail("truncated SEND_HEADERS");
    if (first == 0xA0) {
      uint16_t code = 0;
      c.u16(&code);
      size_t index = code & 0xFF;
      if (index == 0 || index > kResponseHeaders.size())
        return fail("unknown response header code " + std::to_string(code));
      h.name = kResponseHeaders[index - 1];
    } else if (!c.string(&h.name) || h.name.empty()) {
      return fail("truncated SEND_HEADERS");
    }
    if (!c.string(&h.value)) return fail("truncated SEND_HEADERS");
    headers_.push_back(h);
  }
  status_ = status;
  head_done_ = true;
  return Event::kHead;
}

}  // namespace peregrine::ajp
