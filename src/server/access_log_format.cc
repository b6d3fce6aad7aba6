// AccessLogBuffer::log_custom: a line of a custom access_log_format, a walk over the pieces the
// configuration compiled. Kept apart from access_log.cc, whose presets it does not touch.
#include <cstring>
#include <ctime>

#include "core/address_text.h"
#include "core/strings.h"
#include "server/access_log.h"

namespace peregrine::server {
namespace {

using config::LogEscape;
using config::LogVariable;

// Escapes a value for the line: JSON string contents (no quotes added: the format has them),
// or, by default, \xHH for quotes, backslashes and bytes outside printable ASCII, as the
// combined preset does, so no value can forge a line or a field.
void append_value(std::string& out, std::string_view text, LogEscape escape) {
  if (escape == LogEscape::kJson) {
    const size_t start = out.size();
    append_json_string(out, text);  // with quotes: drop them
    out.erase(start, 1);
    out.pop_back();
    return;
  }
  append_escaped(out, text);
}

// A missing value is "-", as in nginx; in JSON strings too, so a field is never empty by accident.
void append_or_dash(std::string& out, std::string_view text, LogEscape escape) {
  if (text.empty())
    out += '-';
  else
    append_value(out, text, escape);
}

std::string_view protocol_of(const Request& request) {
  if (request.version_major == 2) return "HTTP/2.0";
  return request.version_minor == 0 ? "HTTP/1.0" : "HTTP/1.1";
}

void append_seconds(std::string& out, int64_t ms) {
  if (ms < 0) ms = 0;
  append_decimal(out, static_cast<uint64_t>(ms / 1000));
  out += '.';
  char digits[3] = {static_cast<char>('0' + ms % 1000 / 100),
                    static_cast<char>('0' + ms % 100 / 10), static_cast<char>('0' + ms % 10)};
  out.append(digits, 3);
}

// The value of the first "Name: value\r\n" line called `name` in `lines`.
std::string_view find_line(std::string_view lines, std::string_view name) {
  while (!lines.empty()) {
    size_t end = lines.find("\r\n");
    std::string_view line = lines.substr(0, end);
    const size_t colon = line.find(':');
    if (colon != std::string_view::npos && ascii_iequals(line.substr(0, colon), name)) {
      std::string_view value = line.substr(colon + 1);
      while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
      return value;
    }
    if (end == std::string_view::npos) break;
    lines.remove_prefix(end + 2);
  }
  return {};
}

// $ssl_client_*: "" on a plain connection (logged as "-").
std::string_view client_certificate_fact(const TlsSession* tls, LogVariable variable) {
  if (tls == nullptr) return {};
  switch (variable) {
    case LogVariable::kSslClientVerify:
      return tls->client_verify();
    case LogVariable::kSslClientSDn:
      return tls->client_subject_dn();
    case LogVariable::kSslClientIDn:
      return tls->client_issuer_dn();
    case LogVariable::kSslClientSerial:
      return tls->client_serial();
    default:
      return tls->client_fingerprint();
  }
}

}  // namespace

void AccessLogBuffer::log_custom(const Request& request, int status, uint64_t body_bytes,
                                 time_t now, const LogContext& context) {
  const config::LogFormat& format = *custom_;
  const LogEscape escape = format.escape;
  if (now != custom_second_) {
    custom_second_ = now;
    tm parts;
    gmtime_r(&now, &parts);
    std::strftime(time_local_, sizeof time_local_, "%d/%b/%Y:%H:%M:%S +0000", &parts);
    std::strftime(time_iso_, sizeof time_iso_, "%Y-%m-%dT%H:%M:%S+00:00", &parts);
  }
  std::string& out = buffer_;
  for (const config::LogPiece& piece : format.pieces) {
    switch (piece.variable) {
      case LogVariable::kLiteral:
        out.append(piece.text);
        break;
      case LogVariable::kRemoteAddr:
      case LogVariable::kRemotePort:
      case LogVariable::kRealipRemoteAddr: {
        const sockaddr* address =
            piece.variable == LogVariable::kRealipRemoteAddr && request.socket_peer
                ? request.socket_peer
                : request.peer;
        AddressText text(address);
        append_or_dash(
            out, piece.variable == LogVariable::kRemotePort ? text.port_view() : text.ip_view(),
            escape);
        break;
      }
      case LogVariable::kRemoteUser:
        append_or_dash(out, request.remote_user, escape);
        break;
      case LogVariable::kTimeLocal:
        out.append(time_local_);
        break;
      case LogVariable::kTimeIso8601:
        out.append(time_iso_);
        break;
      case LogVariable::kMsec:
        append_decimal(out, static_cast<uint64_t>(now));
        out.append(".000");
        break;
      case LogVariable::kRequest:
        append_value(out, request.method_text, escape);
        out += ' ';
        append_value(out, request.target, escape);
        out += ' ';
        out.append(protocol_of(request));
        break;
      case LogVariable::kRequestMethod:
        append_or_dash(out, request.method_text, escape);
        break;
      case LogVariable::kRequestUri:
        append_or_dash(out, request.target, escape);
        break;
      case LogVariable::kUri:
        append_or_dash(out, request.path.empty() ? request.raw_path : request.path, escape);
        break;
      case LogVariable::kArgs:
        append_or_dash(out, request.query, escape);
        break;
      case LogVariable::kServerProtocol:
        out.append(protocol_of(request));
        break;
      case LogVariable::kStatus:
        append_decimal(out, static_cast<uint64_t>(status));
        break;
      case LogVariable::kBodyBytesSent:
        append_decimal(out, body_bytes);
        break;
      case LogVariable::kBytesSent:
        append_decimal(out, context.bytes_sent ? context.bytes_sent : body_bytes);
        break;
      case LogVariable::kRequestLength:
        append_decimal(out, context.request_length);
        break;
      case LogVariable::kRequestTime:
        append_seconds(out, context.request_time_ms);
        break;
      case LogVariable::kUpstreamAddr:
        append_or_dash(out, request.upstream.address, escape);
        break;
      case LogVariable::kUpstreamStatus:
        if (request.upstream.status)
          append_decimal(out, request.upstream.status);
        else
          out += '-';
        break;
      case LogVariable::kUpstreamResponseTime:
        if (request.upstream.status)
          append_seconds(out, request.upstream.time_ms);
        else
          out += '-';
        break;
      case LogVariable::kHttpHeader: {
        std::string_view value;
        for (const Header& h : request.header_list()) {
          if (h.name.size() != piece.text.size()) continue;
          bool same = true;
          for (size_t i = 0; i < h.name.size() && same; ++i) {
            char c = h.name[i];
            if (c >= 'A' && c <= 'Z') c = static_cast<char>(c | 0x20);
            if (c == '_') c = '-';
            same = c == piece.text[i];
          }
          if (same) {
            value = h.value;
            break;
          }
        }
        append_or_dash(out, value, escape);
        break;
      }
      case LogVariable::kSentHttpHeader: {
        std::string_view value;
        if (context.response) {
          value = find_line(context.response->prebuilt_headers(), piece.text);
          if (value.empty()) value = find_line(context.response->extra_headers(), piece.text);
        }
        append_or_dash(out, value, escape);
        break;
      }
      case LogVariable::kHost:
        append_or_dash(out, request.host, escape);
        break;
      case LogVariable::kRequestId:
        append_or_dash(out, request.request_id, escape);
        break;
      case LogVariable::kTlsVersion:
        append_or_dash(out, context.tls_version, escape);
        break;
      case LogVariable::kTlsCipher:
        append_or_dash(out, context.tls_cipher, escape);
        break;
      case LogVariable::kSslClientVerify:
      case LogVariable::kSslClientSDn:
      case LogVariable::kSslClientIDn:
      case LogVariable::kSslClientSerial:
      case LogVariable::kSslClientFingerprint:
        append_or_dash(out, client_certificate_fact(request.tls, piece.variable), escape);
        break;
      case LogVariable::kConnection:
        append_decimal(out, context.connection);
        break;
      case LogVariable::kConnectionRequests:
        append_decimal(out, context.connection_requests);
        break;
    }
  }
  out += '\n';
  if (out.size() >= kFlushAt) flush();
}

}  // namespace peregrine::server
