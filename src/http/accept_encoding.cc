#include "http/accept_encoding.h"

#include <cstddef>

#include "core/strings.h"

namespace peregrine::http {
namespace {

// qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] ), in thousandths; -1 if malformed.
int parse_qvalue(std::string_view q) {
  if (q.empty() || (q[0] != '0' && q[0] != '1')) return -1;
  int value = (q[0] - '0') * 1000;
  if (q.size() == 1) return value;
  if (q[1] != '.' || q.size() > 5) return -1;
  int scale = 100;
  for (size_t i = 2; i < q.size(); ++i, scale /= 10) {
    if (q[i] < '0' || q[i] > '9') return -1;
    value += (q[i] - '0') * scale;
  }
  return value > 1000 ? -1 : value;
}

}  // namespace

CodingWeights parse_coding_weights(std::string_view value) {
  // Highest weight seen per coding, -1 = not listed.
  int q_br = -1;
  int q_gzip = -1;
  int q_zstd = -1;
  int q_identity = -1;
  int q_star = -1;

  size_t pos = 0;
  const size_t n = value.size();
  while (pos <= n) {
    size_t end = value.find(',', pos);
    if (end == std::string_view::npos) end = n;
    std::string_view element = value.substr(pos, end - pos);
    pos = end + 1;

    const size_t semi = element.find(';');
    const std::string_view coding = trim_ows(element.substr(0, semi));
    if (coding.empty()) continue;

    int q = 1000;
    bool malformed = false;
    std::string_view params =
        semi == std::string_view::npos ? std::string_view{} : element.substr(semi + 1);
    while (!params.empty()) {
      const size_t next = params.find(';');
      const std::string_view param = trim_ows(params.substr(0, next));
      params = next == std::string_view::npos ? std::string_view{} : params.substr(next + 1);
      const size_t eq = param.find('=');
      if (eq == std::string_view::npos) {
        if (!param.empty()) malformed = true;  // a bare token is not a parameter
        continue;
      }
      if (!ascii_iequals(trim_ows(param.substr(0, eq)), "q")) continue;  // some other parameter
      q = parse_qvalue(trim_ows(param.substr(eq + 1)));
      if (q < 0) malformed = true;
    }
    if (malformed) continue;

    int* slot = nullptr;
    if (ascii_iequals(coding, "br")) {
      slot = &q_br;
    } else if (ascii_iequals(coding, "gzip") || ascii_iequals(coding, "x-gzip")) {
      slot = &q_gzip;
    } else if (ascii_iequals(coding, "zstd")) {
      slot = &q_zstd;
    } else if (ascii_iequals(coding, "identity")) {
      slot = &q_identity;
    } else if (coding == "*") {
      slot = &q_star;
    }
    if (slot != nullptr && q > *slot) *slot = q;
  }

  CodingWeights result;
  result.br = q_br >= 0 ? q_br : q_star;
  result.gzip = q_gzip >= 0 ? q_gzip : q_star;
  result.zstd = q_zstd >= 0 ? q_zstd : q_star;
  result.identity = q_identity >= 0 ? q_identity : (q_star == 0 ? 0 : -1);
  return result;
}

AcceptedEncodings parse_accept_encoding(std::string_view value) {
  const CodingWeights weights = parse_coding_weights(value);
  AcceptedEncodings result;
  result.br = weights.br > 0;
  result.gzip = weights.gzip > 0;
  return result;
}

}  // namespace peregrine::http
