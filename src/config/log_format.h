// Custom access-log formats: "$remote_addr - $remote_user [$time_local] \"$request\" ...",
// compiled once when the configuration is read into a list of pieces, so a log line is a walk
// over that list with no parsing. See docs/configuration.md, "Access log".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace peregrine::config {

enum class LogVariable : uint8_t {
  kLiteral,  // text: the piece's `text`
  kRemoteAddr,
  kRemotePort,
  kRemoteUser,
  kRealipRemoteAddr,  // the socket's own peer (the balancer), before PROXY/X-Forwarded-For
  kTimeLocal,
  kTimeIso8601,
  kMsec,
  kRequest,
  kRequestMethod,
  kRequestUri,
  kUri,
  kArgs,
  kServerProtocol,
  kStatus,
  kBodyBytesSent,
  kBytesSent,
  kRequestLength,
  kRequestTime,
  kUpstreamAddr,
  kUpstreamStatus,
  kUpstreamResponseTime,
  kHttpHeader,      // $http_NAME: `text` is the header name, '_' read as '-'
  kSentHttpHeader,  // $sent_http_NAME
  kHost,
  kRequestId,
  kTlsVersion,
  kTlsCipher,
  kSslClientVerify,  // the client certificate's facts (tls::Stream, include/peregrine/request.h)
  kSslClientSDn,
  kSslClientIDn,
  kSslClientSerial,
  kSslClientFingerprint,
  kConnection,
  kConnectionRequests,
};

struct LogPiece {
  LogVariable variable = LogVariable::kLiteral;
  std::string text;
};

enum class LogEscape : uint8_t { kDefault, kJson };

struct LogFormat {
  std::vector<LogPiece> pieces;
  LogEscape escape = LogEscape::kDefault;
  bool uses(LogVariable variable) const;
};

// The variable names, for documentation and hints.
std::vector<std::string_view> log_variable_names();

// Compiles `text`. `$name` or `${name}`; `$$` is a dollar sign. On failure returns false with
// *error, *offset (the byte in `text` where the problem is) and *hint (close names).
bool compile_log_format(std::string_view text, LogFormat* out, std::string* error, size_t* offset,
                        std::string* hint);

}  // namespace peregrine::config
