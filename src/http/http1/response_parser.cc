// HTTP/1.x response parser: see response_parser.h for the contract.
//
// Errors (error() says which): a status line that is not "HTTP/1.<digit> <3 digits>[ reason]";
// a head over max_head_bytes or more than max_interim 1xx heads; a field name that is not a
// token or has whitespace before ':'; a control character (other than HTAB) in a field value or
// the reason phrase; obs-fold on the first field line; a Content-Length that is not 1*DIGIT,
// over 2^62, or disagreeing with another; 101 Switching Protocols; a malformed chunked body;
// the connection closing before a response not delimited by the close is complete.
// Being a client we are lenient where RFC 9112 allows it: bare LF line ends, obs-fold after the
// first field (ignored), HTTP/1.x minor versions above 1 (treated as 1.1).
#include "http/http1/response_parser.h"

#include <cstring>

#include "core/strings.h"
#include "http/http1/word_scan.h"

namespace peregrine::http1 {
namespace {

constexpr uint64_t kMaxContentLength = uint64_t{1} << 62;

bool IsDigit(char c) {
  return c >= '0' && c <= '9';
}

// Calls f(token) for each element of a comma-separated list, trimmed; empty elements skipped.
template <typename F>
void ForEachListElement(std::string_view list, F&& f) {
  while (!list.empty()) {
    size_t comma = list.find(',');
    std::string_view element = trim_ows(list.substr(0, comma));
    if (!element.empty()) f(element);
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
}

// The rest of the line from `p` (a field value, or an obs-fold continuation) without its line
// end, and where the next line starts; false when a byte a field value may not hold comes
// first (a control character other than HTAB, DEL, or a CR not followed by LF). The head ends
// with an LF, so every line has an end before `end`.
bool RestOfLine(const char* p, const char* end, std::string_view* value, const char** next) {
  const char* stop = word_scan::SkipFieldValue(p, end);
  if (*stop == '\n') {
    *next = stop + 1;
  } else if (*stop == '\r' && stop + 1 < end && stop[1] == '\n') {
    *next = stop + 2;
  } else {
    return false;
  }
  *value = std::string_view(p, static_cast<size_t>(stop - p));
  return true;
}

// A reason phrase may hold what a field value may.
bool ValidValue(std::string_view v) {
  for (char ch : v) {
    const auto c = static_cast<unsigned char>(ch);
    if ((c < 0x20 && c != '\t') || c == 0x7f) return false;
  }
  return true;
}

// Strips the line end ("\n" or "\r\n") of a line that includes it.
std::string_view StripEol(std::string_view line) {
  if (!line.empty() && line.back() == '\n') line.remove_suffix(1);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return line;
}

}  // namespace

void ResponseParser::start(bool head_request, bool capture_server) {
  phase_ = Phase::kHead;
  framing_ = BodyFraming::kNone;
  head_request_ = head_request;
  capture_server_ = capture_server;
  started_ = false;
  interim_count_ = 0;
  scanned_ = line_start_ = head_start_ = 0;
  remaining_ = body_bytes_ = body_wire_bytes_ = 0;
  chunked_.reset();
  head_.version_minor = 1;
  head_.status = 0;
  head_.content_length = -1;
  head_.has_content_length = head_.chunked = head_.transfer_encoding = false;
  head_.connection_close = head_.connection_keep_alive = false;
  head_.head_bytes = head_.interim_bytes = 0;
  head_.server.clear();
  error_ = "";
}

ResponseParser::Result ResponseParser::fail(const char* why, size_t consumed) {
  phase_ = Phase::kError;
  error_ = why;
  return {Status::kError, consumed};
}

bool ResponseParser::keep_alive() const {
  if (phase_ != Phase::kDone || framing_ == BodyFraming::kClose) return false;
  if (head_.transfer_encoding && head_.has_content_length) return false;
  if (head_.connection_close) return false;
  return head_.version_minor >= 1 || head_.connection_keep_alive;
}

bool ResponseParser::parse_field(std::string_view name, std::string_view value) {
  switch (name.size()) {
    case 6:
      if (capture_server_ && token_is(name, "server")) head_.server.assign(value);
      return true;
    case 10:
      if (token_is(name, "connection")) {
        ForEachListElement(value, [&](std::string_view token) {
          if (token_is(token, "close"))
            head_.connection_close = true;
          else if (token_is(token, "keep-alive"))
            head_.connection_keep_alive = true;
        });
      }
      return true;
    case 14:
      if (token_is(name, "content-length")) {
        bool ok = true;
        bool any = false;
        ForEachListElement(value, [&](std::string_view digits) {
          uint64_t n = 0;
          for (char c : digits) {
            if (!IsDigit(c)) {
              ok = false;
              return;
            }
            n = n * 10 + static_cast<uint64_t>(c - '0');
            if (n > kMaxContentLength) {
              ok = false;
              return;
            }
          }
          if (head_.has_content_length && static_cast<uint64_t>(head_.content_length) != n)
            ok = false;
          head_.has_content_length = true;
          head_.content_length = static_cast<int64_t>(n);
          any = true;
        });
        if (!ok || !any) {
          error_ = "malformed or conflicting Content-Length";
          return false;
        }
      }
      return true;
    case 17:
      if (token_is(name, "transfer-encoding")) {
        head_.transfer_encoding = true;
        std::string_view last;
        ForEachListElement(value, [&](std::string_view coding) { last = coding; });
        // Only the last coding matters for framing: chunked last means chunked framing.
        size_t semi = last.find(';');
        head_.chunked = token_is(trim_ows(last.substr(0, semi)), "chunked");
      }
      return true;
    default:
      return true;
  }
}

bool ResponseParser::parse_head(std::string_view head) {
  // Status line.
  size_t nl = head.find('\n');
  std::string_view line = StripEol(head.substr(0, nl + 1));
  head.remove_prefix(nl + 1);
  if (line.size() < 12 || line.compare(0, 7, "HTTP/1.") != 0 || !IsDigit(line[7]) ||
      line[8] != ' ' || !IsDigit(line[9]) || !IsDigit(line[10]) || !IsDigit(line[11]) ||
      (line.size() > 12 && line[12] != ' ')) {
    error_ = "malformed status line";
    return false;
  }
  head_.version_minor = line[7] == '0' ? 0 : 1;
  head_.status = (line[9] - '0') * 100 + (line[10] - '0') * 10 + (line[11] - '0');
  if (head_.status < 100) {
    error_ = "status code below 100";
    return false;
  }
  if (line.size() > 12 && !ValidValue(line.substr(13))) {
    error_ = "control character in the reason phrase";
    return false;
  }
  head_.content_length = -1;
  head_.has_content_length = head_.chunked = head_.transfer_encoding = false;
  head_.connection_close = head_.connection_keep_alive = false;

  // The fields: the name is checked while looking for ':', the value once its line's end is
  // found (this runs for every header of every proxied response).
  const char* p = head.data();
  const char* const end = p + head.size();  // the head ends with the empty line's LF
  if (fields_) fields_->clear();
  bool first_field = true;
  while (p < end) {
    if (*p == '\n' || (*p == '\r' && p + 1 < end && p[1] == '\n')) break;  // the empty line
    if (is_ows(*p)) {
      if (first_field) {
        error_ = "obs-fold before the first field";
        return false;
      }
      std::string_view ignored;
      if (!RestOfLine(p, end, &ignored, &p)) {
        error_ = "control character in a field value";
        return false;
      }
      continue;  // obs-fold continuation of a field we do not interpret
    }
    first_field = false;
    const char* name_start = p;
    while (p < end && is_tchar(static_cast<unsigned char>(*p))) ++p;
    if (p == end || *p != ':' || p == name_start) {
      const char* line_end = static_cast<const char*>(std::memchr(p, '\n', end - p));
      const bool colon_later =
          p < end && *p != ':' && std::memchr(p, ':', (line_end ? line_end : end) - p) != nullptr;
      error_ = colon_later ? "invalid field name (or whitespace before ':')"
                           : "field line without a name or ':'";
      return false;
    }
    std::string_view name(name_start, static_cast<size_t>(p - name_start));
    ++p;  // ':'
    while (p < end && is_ows(*p)) ++p;
    std::string_view value;
    if (!RestOfLine(p, end, &value, &p)) {
      error_ = "control character in a field value";
      return false;
    }
    while (!value.empty() && is_ows(value.back())) value.remove_suffix(1);
    if (!parse_field(name, value)) return false;
    if (fields_) fields_->push_back({name, value});
  }
  return true;
}

ResponseParser::Result ResponseParser::parse(std::string_view input) {
  if (!input.empty()) started_ = true;
  size_t consumed = 0;
  if (phase_ == Phase::kHead) {
    const char* base = input.data();
    size_t pos = scanned_;
    for (;;) {
      const void* lf =
          pos < input.size() ? std::memchr(base + pos, '\n', input.size() - pos) : nullptr;
      if (!lf) {
        scanned_ = input.size();
        if (input.size() - head_start_ > limits_.max_head_bytes)
          return fail("response head too large");
        return {Status::kNeedMore, 0};
      }
      size_t p = static_cast<size_t>(static_cast<const char*>(lf) - base);
      pos = p + 1;
      if (p + 1 - head_start_ > limits_.max_head_bytes) return fail("response head too large");
      std::string_view line = StripEol(input.substr(line_start_, p + 1 - line_start_));
      if (!line.empty()) {
        line_start_ = p + 1;
        continue;
      }
      if (line_start_ == head_start_) {
        // An empty line before a status line (some servers send a stray CRLF after a body).
        head_.interim_bytes += p + 1 - head_start_;
        head_start_ = line_start_ = p + 1;
        continue;
      }
      std::string_view head = input.substr(head_start_, p + 1 - head_start_);
      if (!parse_head(head)) return fail(error_);
      if (head_.status < 200) {
        if (head_.status == 101) return fail("101 Switching Protocols without an upgrade request");
        if (++interim_count_ > limits_.max_interim) return fail("too many 1xx responses");
        head_.interim_bytes += head.size();
        head_start_ = line_start_ = p + 1;
        continue;
      }
      head_.head_bytes = head.size();
      consumed = p + 1;
      break;
    }
    if (head_request_ || head_.status == 204 || head_.status == 304) {
      framing_ = BodyFraming::kNone;
    } else if (head_.transfer_encoding) {
      framing_ = head_.chunked ? BodyFraming::kChunked : BodyFraming::kClose;
    } else if (head_.has_content_length) {
      framing_ = BodyFraming::kLength;
      remaining_ = static_cast<uint64_t>(head_.content_length);
    } else {
      framing_ = BodyFraming::kClose;
    }
    phase_ = Phase::kBody;
    if (framing_ == BodyFraming::kNone || (framing_ == BodyFraming::kLength && remaining_ == 0)) {
      phase_ = Phase::kDone;
      return {Status::kDone, consumed};
    }
  }

  if (phase_ == Phase::kDone) return {Status::kDone, 0};
  if (phase_ == Phase::kError) return {Status::kError, 0};

  std::string_view body = input.substr(consumed);
  switch (framing_) {
    case BodyFraming::kLength: {
      uint64_t take = body.size() < remaining_ ? body.size() : remaining_;
      remaining_ -= take;
      body_bytes_ += take;
      body_wire_bytes_ += take;
      consumed += take;
      if (remaining_ == 0) {
        phase_ = Phase::kDone;
        return {Status::kDone, consumed};
      }
      return {Status::kNeedMore, consumed};
    }
    case BodyFraming::kChunked:
      for (;;) {
        ChunkedDecoder::Result r = chunked_.decode(body);
        body.remove_prefix(r.consumed);
        consumed += r.consumed;
        body_wire_bytes_ += r.consumed;
        switch (r.status) {
          case ChunkedDecoder::Status::kData:
            body_bytes_ += r.data.size();
            continue;
          case ChunkedDecoder::Status::kDone:
            phase_ = Phase::kDone;
            return {Status::kDone, consumed};
          case ChunkedDecoder::Status::kNeedMore:
            return {Status::kNeedMore, consumed};
          case ChunkedDecoder::Status::kError:
            return fail("malformed chunked body", consumed);
        }
      }
    case BodyFraming::kClose:
      body_bytes_ += body.size();
      body_wire_bytes_ += body.size();
      return {Status::kNeedMore, input.size()};
    case BodyFraming::kNone:
      break;
  }
  phase_ = Phase::kDone;
  return {Status::kDone, consumed};
}

ResponseParser::Result ResponseParser::finish() {
  if (phase_ == Phase::kDone) return {Status::kDone, 0};
  if (phase_ == Phase::kError) return {Status::kError, 0};
  if (phase_ == Phase::kBody && framing_ == BodyFraming::kClose) {
    phase_ = Phase::kDone;
    return {Status::kDone, 0};
  }
  return fail(started_ ? "connection closed before the response was complete"
                       : "connection closed before any byte of the response");
}

}  // namespace peregrine::http1
