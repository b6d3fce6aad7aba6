#include "config/log_format.h"

#include <utility>

#include "config/validate.h"

namespace peregrine::config {
namespace {

constexpr std::pair<std::string_view, LogVariable> kVariables[] = {
    {"remote_addr", LogVariable::kRemoteAddr},
    {"remote_port", LogVariable::kRemotePort},
    {"remote_user", LogVariable::kRemoteUser},
    {"realip_remote_addr", LogVariable::kRealipRemoteAddr},
    {"time_local", LogVariable::kTimeLocal},
    {"time_iso8601", LogVariable::kTimeIso8601},
    {"msec", LogVariable::kMsec},
    {"request", LogVariable::kRequest},
    {"request_method", LogVariable::kRequestMethod},
    {"request_uri", LogVariable::kRequestUri},
    {"uri", LogVariable::kUri},
    {"args", LogVariable::kArgs},
    {"query_string", LogVariable::kArgs},
    {"server_protocol", LogVariable::kServerProtocol},
    {"status", LogVariable::kStatus},
    {"body_bytes_sent", LogVariable::kBodyBytesSent},
    {"bytes_sent", LogVariable::kBytesSent},
    {"request_length", LogVariable::kRequestLength},
    {"request_time", LogVariable::kRequestTime},
    {"upstream_addr", LogVariable::kUpstreamAddr},
    {"upstream_status", LogVariable::kUpstreamStatus},
    {"upstream_response_time", LogVariable::kUpstreamResponseTime},
    {"host", LogVariable::kHost},
    {"request_id", LogVariable::kRequestId},
    {"tls_version", LogVariable::kTlsVersion},
    {"tls_cipher", LogVariable::kTlsCipher},
    {"ssl_client_verify", LogVariable::kSslClientVerify},
    {"ssl_client_s_dn", LogVariable::kSslClientSDn},
    {"ssl_client_i_dn", LogVariable::kSslClientIDn},
    {"ssl_client_serial", LogVariable::kSslClientSerial},
    {"ssl_client_fingerprint", LogVariable::kSslClientFingerprint},
    {"connection", LogVariable::kConnection},
    {"connection_requests", LogVariable::kConnectionRequests},
};

bool name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

}  // namespace

bool LogFormat::uses(LogVariable variable) const {
  for (const LogPiece& piece : pieces)
    if (piece.variable == variable) return true;
  return false;
}

std::vector<std::string_view> log_variable_names() {
  std::vector<std::string_view> names;
  for (const auto& [name, variable] : kVariables) names.push_back(name);
  names.push_back("http_NAME");
  names.push_back("sent_http_NAME");
  return names;
}

bool compile_log_format(std::string_view text, LogFormat* out, std::string* error, size_t* offset,
                        std::string* hint) {
  out->pieces.clear();
  auto literal = [&](std::string_view piece) {
    if (piece.empty()) return;
    if (out->pieces.empty() || out->pieces.back().variable != LogVariable::kLiteral)
      out->pieces.push_back({LogVariable::kLiteral, {}});
    out->pieces.back().text.append(piece);
  };
  size_t i = 0;
  while (i < text.size()) {
    const size_t dollar = text.find('$', i);
    literal(text.substr(i, dollar == std::string_view::npos ? std::string_view::npos : dollar - i));
    if (dollar == std::string_view::npos) break;
    size_t at = dollar + 1;
    if (at < text.size() && text[at] == '$') {
      literal("$");
      i = at + 1;
      continue;
    }
    const bool braced = at < text.size() && text[at] == '{';
    if (braced) ++at;
    size_t end = at;
    while (end < text.size() && name_char(text[end])) ++end;
    std::string_view name = text.substr(at, end - at);
    if (braced && (end >= text.size() || text[end] != '}')) {
      *error = "unclosed ${ in the access log format";
      *offset = dollar;
      *hint = "write ${name}";
      return false;
    }
    if (name.empty()) {
      *error = "a '$' without a variable name in the access log format";
      *offset = dollar;
      *hint = "write $$ for a dollar sign";
      return false;
    }
    i = braced ? end + 1 : end;
    LogPiece piece;
    std::string lower;
    for (char c : name) lower += static_cast<char>(c >= 'A' && c <= 'Z' ? c | 0x20 : c);
    if (lower.starts_with("http_") && lower.size() > 5) {
      piece.variable = LogVariable::kHttpHeader;
      piece.text = lower.substr(5);
    } else if (lower.starts_with("sent_http_") && lower.size() > 10) {
      piece.variable = LogVariable::kSentHttpHeader;
      piece.text = lower.substr(10);
    } else {
      piece.variable = LogVariable::kLiteral;
      for (const auto& [known, variable] : kVariables)
        if (known == lower) piece.variable = variable;
      if (piece.variable == LogVariable::kLiteral) {
        *error = "unknown access log variable $" + std::string(name);
        *offset = dollar;
        std::string close = detail::closest_match(lower, log_variable_names());
        *hint = close.empty() ? "known variables: $remote_addr, $request, $status, "
                                "$body_bytes_sent, $request_time, $http_NAME, ... (see "
                                "docs/configuration.md)"
                              : "did you mean $" + close + "?";
        return false;
      }
    }
    for (char& c : piece.text)
      if (c == '_') c = '-';
    out->pieces.push_back(std::move(piece));
  }
  return true;
}

}  // namespace peregrine::config
