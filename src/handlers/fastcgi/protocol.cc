// FastCGI 1.0 records and the CGI response head; see protocol.h.
#include "handlers/fastcgi/protocol.h"

#include <algorithm>
#include <cstring>

#include "core/strings.h"

namespace peregrine::fastcgi {

namespace {

constexpr size_t padding_for(size_t content_length) {
  return (8 - (content_length & 7)) & 7;
}

void write_header(char* p, RecordType type, uint16_t request_id, size_t content_length,
                  size_t padding_length) {
  p[0] = static_cast<char>(kVersion1);
  p[1] = static_cast<char>(type);
  p[2] = static_cast<char>(request_id >> 8);
  p[3] = static_cast<char>(request_id & 0xff);
  p[4] = static_cast<char>((content_length >> 8) & 0xff);
  p[5] = static_cast<char>(content_length & 0xff);
  p[6] = static_cast<char>(padding_length);
  p[7] = 0;
}

void append_header(std::string& out, RecordType type, uint16_t request_id, size_t content_length,
                   size_t padding_length) {
  char h[kHeaderSize];
  write_header(h, type, request_id, content_length, padding_length);
  out.append(h, kHeaderSize);
}

// Encodes a name or value length; returns the bytes written (1 or 4).
size_t encode_length(char* p, size_t length) {
  if (length < 128) {
    p[0] = static_cast<char>(length);
    return 1;
  }
  p[0] = static_cast<char>(0x80 | ((length >> 24) & 0x7f));
  p[1] = static_cast<char>((length >> 16) & 0xff);
  p[2] = static_cast<char>((length >> 8) & 0xff);
  p[3] = static_cast<char>(length & 0xff);
  return 4;
}

bool read_length(std::string_view& in, size_t& length) {
  if (in.empty()) return false;
  const auto b0 = static_cast<unsigned char>(in[0]);
  if ((b0 & 0x80) == 0) {
    length = b0;
    in.remove_prefix(1);
    return true;
  }
  if (in.size() < 4) return false;
  length = (static_cast<size_t>(b0 & 0x7f) << 24) |
           (static_cast<size_t>(static_cast<unsigned char>(in[1])) << 16) |
           (static_cast<size_t>(static_cast<unsigned char>(in[2])) << 8) |
           static_cast<size_t>(static_cast<unsigned char>(in[3]));
  in.remove_prefix(4);
  return true;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Encoding

void append_begin_request(std::string& out, uint16_t request_id, bool keep_conn, Role role) {
  char body[8] = {};
  const auto r = static_cast<uint16_t>(role);
  body[0] = static_cast<char>(r >> 8);
  body[1] = static_cast<char>(r & 0xff);
  body[2] = static_cast<char>(keep_conn ? kKeepConn : 0);
  append_header(out, RecordType::kBeginRequest, request_id, sizeof body, 0);
  out.append(body, sizeof body);
}

void append_abort_request(std::string& out, uint16_t request_id) {
  append_header(out, RecordType::kAbortRequest, request_id, 0, 0);
}

void append_stream_end(std::string& out, RecordType type, uint16_t request_id) {
  append_header(out, type, request_id, 0, 0);
}

namespace {

size_t pair_size(size_t name_size, size_t value_size) {
  return (name_size < 128 ? 1 : 4) + (value_size < 128 ? 1 : 4) + name_size + value_size;
}

}  // namespace

size_t name_value_size(std::string_view name, std::string_view value) {
  return pair_size(name.size(), value.size());
}

void StreamEncoder::open_record() {
  record_start_ = out_.size();
  out_.append(kHeaderSize, '\0');
  content_ = 0;
  open_ = true;
}

void StreamEncoder::write(std::string_view bytes) {
  while (!bytes.empty()) {
    if (!open_) open_record();
    const size_t n = std::min(kMaxContentLength - content_, bytes.size());
    out_.append(bytes.data(), n);
    content_ += n;
    bytes.remove_prefix(n);
    if (content_ == kMaxContentLength) flush();
  }
}

bool append_name_value(std::string& out, std::string_view name, std::string_view value) {
  if (name.size() > kMaxNameValueLength || value.size() > kMaxNameValueLength) return false;
  char lengths[8];
  size_t n = encode_length(lengths, name.size());
  n += encode_length(lengths + n, value.size());
  out.append(lengths, n).append(name).append(value);
  return true;
}

bool StreamEncoder::add(std::string_view name, std::string_view value) {
  if (name.size() > kMaxNameValueLength || value.size() > kMaxNameValueLength) return false;
  char lengths[8];
  size_t n = encode_length(lengths, name.size());
  n += encode_length(lengths + n, value.size());
  const size_t total = n + name.size() + value.size();
  if (open_ && content_ + total <= kMaxContentLength) {  // the common case: it fits the record
    // One size change and plain copies: this runs ~20 times per request.
    const size_t at = out_.size();
    out_.resize(at + total);
    char* p = out_.data() + at;
    // char_traits::copy: an empty view may have a null data(), which memcpy must not get.
    std::char_traits<char>::copy(p, lengths, n);
    std::char_traits<char>::copy(p + n, name.data(), name.size());
    std::char_traits<char>::copy(p + n + name.size(), value.data(), value.size());
    content_ += total;
    return true;
  }
  write(std::string_view(lengths, n));
  write(name);
  write(value);
  return true;
}

void StreamEncoder::flush() {
  if (!open_) return;
  open_ = false;
  if (content_ == 0) {  // never emit an empty record: it would end the stream
    out_.resize(record_start_);
    return;
  }
  const size_t padding = padding_for(content_);
  write_header(out_.data() + record_start_, type_, request_id_, content_, padding);
  out_.append(padding, '\0');
}

namespace {

constexpr std::string_view kCgiHeaderPrefix = "HTTP_";

char* put_length(char* p, size_t length) {
  return p + encode_length(p, length);
}

// `name` as a CGI meta-variable's suffix: upper case, '-' as '_'.
char* put_cgi_header_name(char* p, std::string_view name) {
  for (char c : name)
    *p++ = c == '-' ? '_' : (c >= 'a' && c <= 'z') ? static_cast<char>(c - 32) : c;
  return p;
}

char* put_bytes(char* p, std::string_view bytes) {
  std::char_traits<char>::copy(p, bytes.data(), bytes.size());  // safe for an empty view
  return p + bytes.size();
}

}  // namespace

void ParamsBuilder::grow(size_t n) {
  const size_t capacity = std::max({size_ + n, capacity_ * 2, size_t{1024}});
  auto bigger = std::make_unique_for_overwrite<char[]>(capacity);
  std::char_traits<char>::copy(bigger.get(), bytes_.get(), size_);
  bytes_ = std::move(bigger);
  capacity_ = capacity;
}

bool ParamsBuilder::add(std::string_view name, std::string_view value,
                        std::string_view value_tail) {
  const size_t value_size = value.size() + value_tail.size();
  if (name.size() > kMaxNameValueLength || value_size > kMaxNameValueLength) return false;
  char* const start = room(8 + name.size() + value_size);
  char* p = put_length(start, name.size());
  p = put_length(p, value_size);
  p = put_bytes(p, name);
  p = put_bytes(p, value);
  p = put_bytes(p, value_tail);
  size_ += static_cast<size_t>(p - start);
  return true;
}

bool ParamsBuilder::add_header(std::string_view name, std::string_view value) {
  const size_t name_size = kCgiHeaderPrefix.size() + name.size();
  if (name_size > kMaxNameValueLength || value.size() > kMaxNameValueLength) return false;
  char* const start = room(8 + name_size + value.size());
  char* p = put_length(start, name_size);
  p = put_length(p, value.size());
  p = put_bytes(p, kCgiHeaderPrefix);
  p = put_cgi_header_name(p, name);
  p = put_bytes(p, value);
  size_ += static_cast<size_t>(p - start);
  return true;
}

void ParamsBuilder::add_encoded(std::string_view pairs) {
  put_bytes(room(pairs.size()), pairs);
  size_ += pairs.size();
}

void ParamsBuilder::write(std::string& out, uint16_t request_id) const {
  if (size_ == 0) return;  // an empty record would end the stream
  if (size_ <= kMaxContentLength) {
    const size_t padding = padding_for(size_);
    char header[kHeaderSize];
    write_header(header, RecordType::kParams, request_id, size_, padding);
    out.append(header, kHeaderSize).append(bytes_.get(), size_).append(padding, '\0');
    return;
  }
  StreamEncoder stream(out, RecordType::kParams, request_id);  // cuts it into records
  stream.write(std::string_view(bytes_.get(), size_));
}

bool append_params(std::string& out, uint16_t request_id, std::span<const NameValue> params) {
  ParamsBuilder builder;  // the handler's encoder: the fuzz target reaches it through here
  for (const auto& p : params)
    if (!builder.add(p.name, p.value)) return false;
  builder.write(out, request_id);
  append_params_end(out, request_id);
  return true;
}

void append_stdin(std::string& out, uint16_t request_id, std::string_view body) {
  StreamEncoder enc(out, RecordType::kStdin, request_id);
  enc.write(body);
}

void append_get_values(std::string& out, std::span<const std::string_view> names) {
  StreamEncoder enc(out, RecordType::kGetValues, 0);
  for (auto name : names) enc.add(name, {});
}

// ---------------------------------------------------------------------------------------------
// Name-value pairs

bool NameValueReader::next(NameValue& pair) {
  if (error_ || rest_.empty()) return false;
  size_t name_length = 0;
  size_t value_length = 0;
  std::string_view in = rest_;
  if (!read_length(in, name_length) || !read_length(in, value_length) || name_length > in.size() ||
      value_length > in.size() - name_length) {
    error_ = true;
    return false;
  }
  pair.name = in.substr(0, name_length);
  pair.value = in.substr(name_length, value_length);
  rest_ = in.substr(name_length + value_length);
  return true;
}

bool valid_name_values(std::string_view content) {
  NameValueReader reader(content);
  NameValue pair;
  while (reader.next(pair)) {
  }
  return !reader.error();
}

// ---------------------------------------------------------------------------------------------
// Decoder

const char* to_string(DecodeError error) {
  switch (error) {
    case DecodeError::kNone:
      return "no error";
    case DecodeError::kBadVersion:
      return "bad FastCGI version";
    case DecodeError::kUnknownType:
      return "unknown record type";
    case DecodeError::kUnexpectedType:
      return "unexpected record type";
    case DecodeError::kWrongRequestId:
      return "record for another request id";
    case DecodeError::kBadManagementId:
      return "management record with a non-zero request id";
    case DecodeError::kBadEndRequestLength:
      return "END_REQUEST content length is not 8";
    case DecodeError::kBadUnknownTypeLength:
      return "UNKNOWN_TYPE content length is not 8";
    case DecodeError::kBadNameValueLength:
      return "name-value pair lengths overflow the record";
  }
  return "unknown error";
}

void Decoder::reset(uint16_t request_id) {
  request_id_ = request_id;
  state_ = State::kHeader;
  error_ = DecodeError::kNone;
  header_len_ = 0;
  content_left_ = 0;
  padding_left_ = 0;
  pending_ = false;
  small_len_ = 0;
  big_.clear();
}

Decoder::Status Decoder::fail(DecodeError e, size_t pos, size_t& consumed) {
  state_ = State::kError;
  error_ = e;
  consumed = pos;
  return Status::kError;
}

void Decoder::build_control_record(Record& record) {
  record = Record{};
  record.type = type_;
  record.request_id = record_id_;
  switch (type_) {
    case RecordType::kStdout:
    case RecordType::kStderr:
      record.end_of_stream = true;
      break;
    case RecordType::kEndRequest:
      record.app_status = (static_cast<uint32_t>(small_[0]) << 24) |
                          (static_cast<uint32_t>(small_[1]) << 16) |
                          (static_cast<uint32_t>(small_[2]) << 8) | small_[3];
      record.protocol_status = static_cast<ProtocolStatus>(small_[4]);
      break;
    case RecordType::kUnknownType:
      record.unknown_type = small_[0];
      break;
    case RecordType::kGetValuesResult:
      record.data = big_;
      break;
    default:
      break;
  }
}

Decoder::Status Decoder::decode(std::string_view in, size_t& consumed, Record& record) {
  size_t pos = 0;
  for (;;) {
    const size_t avail = in.size() - pos;
    switch (state_) {
      case State::kError:
        consumed = 0;
        return Status::kError;

      case State::kHeader: {
        const size_t n = std::min(kHeaderSize - header_len_, avail);
        if (n > 0) std::memcpy(header_ + header_len_, in.data() + pos, n);  // data() may be null
        header_len_ = static_cast<uint8_t>(header_len_ + n);
        pos += n;
        if (header_len_ < kHeaderSize) {
          consumed = pos;
          return Status::kNeedMore;
        }
        header_len_ = 0;
        if (header_[0] != kVersion1) return fail(DecodeError::kBadVersion, pos, consumed);
        const uint8_t type = header_[1];
        if (type < 1 || type > 11) return fail(DecodeError::kUnknownType, pos, consumed);
        type_ = static_cast<RecordType>(type);
        record_id_ = static_cast<uint16_t>((header_[2] << 8) | header_[3]);
        content_length_ = static_cast<uint32_t>((header_[4] << 8) | header_[5]);
        content_left_ = content_length_;
        padding_left_ = header_[6];
        small_len_ = 0;
        switch (type_) {
          case RecordType::kStdout:
          case RecordType::kStderr:
            if (record_id_ != request_id_) return fail(DecodeError::kWrongRequestId, pos, consumed);
            if (content_length_ == 0) {
              pending_ = true;
              state_ = State::kPadding;
            } else {
              state_ = State::kStreamContent;
            }
            break;
          case RecordType::kEndRequest:
            if (record_id_ != request_id_) return fail(DecodeError::kWrongRequestId, pos, consumed);
            if (content_length_ != 8) return fail(DecodeError::kBadEndRequestLength, pos, consumed);
            state_ = State::kBufferedContent;
            break;
          case RecordType::kUnknownType:
            if (record_id_ != 0) return fail(DecodeError::kBadManagementId, pos, consumed);
            if (content_length_ != 8)
              return fail(DecodeError::kBadUnknownTypeLength, pos, consumed);
            state_ = State::kBufferedContent;
            break;
          case RecordType::kGetValuesResult:
            if (record_id_ != 0) return fail(DecodeError::kBadManagementId, pos, consumed);
            big_.clear();
            state_ = State::kBufferedContent;
            break;
          default:
            return fail(DecodeError::kUnexpectedType, pos, consumed);
        }
        break;
      }

      case State::kStreamContent: {
        if (avail == 0) {
          consumed = pos;
          return Status::kNeedMore;
        }
        const size_t n = std::min<size_t>(content_left_, avail);
        record = Record{};
        record.type = type_;
        record.request_id = record_id_;
        record.data = in.substr(pos, n);
        pos += n;
        content_left_ -= static_cast<uint32_t>(n);
        if (content_left_ == 0) {
          const size_t m = std::min<size_t>(padding_left_, in.size() - pos);
          pos += m;
          padding_left_ -= static_cast<uint32_t>(m);
          state_ = padding_left_ == 0 ? State::kHeader : State::kPadding;
        }
        consumed = pos;
        return Status::kRecord;
      }

      case State::kBufferedContent: {
        const size_t n = std::min<size_t>(content_left_, avail);
        if (type_ == RecordType::kGetValuesResult) {
          if (big_.capacity() < content_length_) big_.reserve(content_length_);
          big_.append(in.data() + pos, n);
        } else {
          std::memcpy(small_ + small_len_, in.data() + pos, n);
          small_len_ += static_cast<uint32_t>(n);
        }
        pos += n;
        content_left_ -= static_cast<uint32_t>(n);
        if (content_left_ > 0) {
          consumed = pos;
          return Status::kNeedMore;
        }
        if (type_ == RecordType::kGetValuesResult && !valid_name_values(big_))
          return fail(DecodeError::kBadNameValueLength, pos, consumed);
        pending_ = true;
        state_ = State::kPadding;
        break;
      }

      case State::kPadding: {
        const size_t m = std::min<size_t>(padding_left_, avail);
        pos += m;
        padding_left_ -= static_cast<uint32_t>(m);
        if (padding_left_ > 0) {
          consumed = pos;
          return Status::kNeedMore;
        }
        state_ = State::kHeader;
        if (pending_) {
          pending_ = false;
          build_control_record(record);
          consumed = pos;
          return Status::kRecord;
        }
        break;
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// CGI response head

const char* to_string(CgiError error) {
  switch (error) {
    case CgiError::kNone:
      return "no error";
    case CgiError::kTooLarge:
      return "CGI header section too large";
    case CgiError::kNul:
      return "NUL in CGI header";
    case CgiError::kBareCr:
      return "bare CR in CGI header";
    case CgiError::kObsFold:
      return "folded CGI header line";
    case CgiError::kMissingColon:
      return "CGI header line without a colon";
    case CgiError::kBadName:
      return "bad CGI header name";
    case CgiError::kBadStatus:
      return "bad CGI Status header";
    case CgiError::kDuplicate:
      return "duplicate CGI Status, Location or Content-Type";
    case CgiError::kBadValue:
      return "control character in CGI header value";
  }
  return "unknown error";
}

void CgiHeadParser::reset() {
  state_ = Status::kNeedMore;
  error_ = CgiError::kNone;
  buf_.clear();
  line_start_ = 0;
  head_.status = 200;
  head_.has_status = false;
  head_.reason = {};
  head_.location = {};
  head_.local_redirect = false;
  head_.content_type = {};
  head_.has_content_type = false;
  head_.headers.clear();
}

CgiHeadParser::Status CgiHeadParser::fail(CgiError e) {
  error_ = e;
  state_ = Status::kError;
  return state_;
}

CgiHeadParser::Status CgiHeadParser::feed(std::string_view data, size_t& consumed) {
  consumed = 0;
  if (state_ != Status::kNeedMore) return state_;
  // Look for the empty line in buf_ + data, then copy what belongs to the head once.
  const size_t base = buf_.size();  // data[i] is byte base + i of the head
  auto at = [&](size_t i) { return i < base ? buf_[i] : data[i - base]; };
  size_t pos = 0;
  bool ended = false;
  while (pos < data.size() && base + pos <= max_head_) {
    const void* nl = std::memchr(data.data() + pos, '\n', data.size() - pos);
    if (!nl) {
      pos = data.size();
      break;
    }
    pos = static_cast<size_t>(static_cast<const char*>(nl) - data.data()) + 1;
    const size_t len = base + pos - line_start_;  // includes the LF
    ended = len == 1 || (len == 2 && at(line_start_) == '\r');
    line_start_ = base + pos;
    if (ended) break;
  }
  if (base + pos > max_head_) return fail(CgiError::kTooLarge);
  consumed = pos;
  if (ended && base == 0) return parse(data.substr(0, pos));  // whole in one fragment: no copy
  buf_.append(data.data(), pos);
  return ended ? parse(buf_) : Status::kNeedMore;
}

namespace {

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

}  // namespace

CgiHeadParser::Status CgiHeadParser::parse(std::string_view all) {
  bool has_location = false;
  size_t start = 0;
  for (;;) {
    const size_t nl = all.find('\n', start);
    std::string_view line = all.substr(start, nl - start);
    start = nl + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) break;  // the terminating empty line (always the last one)
    for (const char c : line) {
      const auto u = static_cast<unsigned char>(c);
      if (u >= 0x20 && u != 0x7f) continue;
      if (c == '\0') return fail(CgiError::kNul);
      if (c == '\r') return fail(CgiError::kBareCr);
      if (c != '\t') return fail(CgiError::kBadValue);
    }
    if (line[0] == ' ' || line[0] == '\t') return fail(CgiError::kObsFold);
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) return fail(CgiError::kMissingColon);
    const std::string_view name = line.substr(0, colon);
    if (name.empty()) return fail(CgiError::kBadName);
    for (const char c : name)
      if (!is_tchar(static_cast<unsigned char>(c))) return fail(CgiError::kBadName);
    const std::string_view value = trim_ows(line.substr(colon + 1));

    if (ascii_iequals(name, "Status")) {
      if (head_.has_status) return fail(CgiError::kDuplicate);
      if (value.size() < 3 || !is_digit(value[0]) || !is_digit(value[1]) || !is_digit(value[2]))
        return fail(CgiError::kBadStatus);
      const int code = (value[0] - '0') * 100 + (value[1] - '0') * 10 + (value[2] - '0');
      if (code < 100 || code > 599) return fail(CgiError::kBadStatus);
      if (value.size() > 3 && value[3] != ' ' && value[3] != '\t')
        return fail(CgiError::kBadStatus);
      head_.status = code;
      head_.has_status = true;
      head_.reason = trim_ows(value.substr(3));
    } else if (ascii_iequals(name, "Location")) {
      if (has_location) return fail(CgiError::kDuplicate);
      has_location = true;
      head_.location = value;
    } else if (ascii_iequals(name, "Content-Type")) {
      if (head_.has_content_type) return fail(CgiError::kDuplicate);
      head_.has_content_type = true;
      head_.content_type = value;
    } else {
      head_.headers.push_back({name, value});
    }
  }
  if (!head_.has_status && !head_.location.empty()) {
    const std::string_view loc = head_.location;
    if (loc[0] == '/' && (loc.size() == 1 || loc[1] != '/')) {
      head_.local_redirect = true;  // RFC 3875 6.2.2: the server redirects internally
    } else {
      // RFC 3875 6.2.3/6.2.4: a client redirect. Absolute URIs are what CGI allows; a relative
      // reference is treated the same way (browsers resolve it).
      head_.status = 302;
    }
  }
  state_ = Status::kDone;
  return state_;
}

// ---------------------------------------------------------------------------------------------

void ResponseReader::reset() {
  decoder_.reset(request_id_);
  head_parser_.reset();
  head_done_ = false;
  pending_body_ = {};
  end_status_ = ProtocolStatus::kRequestComplete;
  error_ = nullptr;
}

ResponseReader::Event ResponseReader::next(std::string_view& input, std::string_view& data) {
  if (!pending_body_.empty()) {
    data = pending_body_;
    pending_body_ = {};
    return Event::kBody;
  }
  if (error_) return Event::kError;
  while (!input.empty()) {
    size_t used = 0;
    Record record;
    Decoder::Status status = decoder_.decode(input, used, record);
    input.remove_prefix(used);
    if (status == Decoder::Status::kNeedMore) return Event::kNeedMore;
    if (status == Decoder::Status::kError) {
      error_ = to_string(decoder_.error());
      return Event::kError;
    }
    switch (record.type) {
      case RecordType::kStdout:
        if (record.end_of_stream || record.data.empty()) break;  // END_REQUEST follows
        if (!head_done_) {
          size_t head_bytes = 0;
          CgiHeadParser::Status head = head_parser_.feed(record.data, head_bytes);
          if (head == CgiHeadParser::Status::kError) {
            error_ = to_string(head_parser_.error());
            return Event::kError;
          }
          if (head == CgiHeadParser::Status::kNeedMore) break;
          head_done_ = true;
          pending_body_ = record.data.substr(head_bytes);
          return Event::kHead;
        }
        data = record.data;
        return Event::kBody;
      case RecordType::kStderr:
        if (record.data.empty()) break;
        data = record.data;
        return Event::kStderr;
      case RecordType::kEndRequest:
        end_status_ = record.protocol_status;
        return Event::kEnd;
      default:
        break;  // GET_VALUES_RESULT / UNKNOWN_TYPE: nothing we asked for
    }
  }
  return Event::kNeedMore;
}

}  // namespace peregrine::fastcgi
