#include "compress/decision.h"

#include "core/strings.h"
#include "http/accept_encoding.h"

namespace peregrine::compress {

Coding negotiate(const std::string_view* accept_encoding, const Options& options) {
  if (!accept_encoding) return Coding::kIdentity;
  const http::CodingWeights weights = http::parse_coding_weights(*accept_encoding);
  Coding best = Coding::kIdentity;
  int best_weight = 0;  // a weight of 0 means "not acceptable"
  for (Coding coding : options.order) {
    int weight = -1;
    switch (coding) {
      case Coding::kGzip:
        weight = weights.gzip;
        break;
      case Coding::kBrotli:
        weight = weights.br;
        break;
      case Coding::kZstd:
        weight = weights.zstd;
        break;
      case Coding::kIdentity:
        break;
    }
    if (weight > best_weight) {
      best = coding;
      best_weight = weight;
    }
  }
  // A client that prefers identity to every coding we have gets identity.
  if (best != Coding::kIdentity && weights.identity > best_weight) return Coding::kIdentity;
  return best;
}

bool media_type_listed(std::string_view type, const Options& options) {
  const size_t semi = type.find(';');
  if (semi != std::string_view::npos) type = type.substr(0, semi);
  type = trim_ows(type);
  if (type.empty()) return false;
  for (const std::string& listed : options.types) {
    std::string_view pattern = listed;
    if (pattern.size() >= 2 && pattern.ends_with("/*")) {
      const std::string_view major = pattern.substr(0, pattern.size() - 1);  // "text/"
      if (type.size() > major.size() && ascii_iequals(type.substr(0, major.size()), major))
        return true;
    } else if (ascii_iequals(type, pattern)) {
      return true;
    }
  }
  return false;
}

Verdict decide(const ResponseFacts& facts, const Options& options, Coding coding) {
  if (!options.enabled) return Verdict::kNever;
  const int status = facts.status;
  // No body (1xx, 204, 304), a part of a representation (206), or already encoded.
  if (status < 200 || status == 204 || status == 304 || status == 206) return Verdict::kNever;
  if (facts.has_content_encoding || facts.no_transform) return Verdict::kNever;
  if (!media_type_listed(facts.content_type, options)) return Verdict::kNever;
  if (facts.length >= 0 && static_cast<uint64_t>(facts.length) < options.min_length)
    return Verdict::kNever;
  // From here the representation depends on Accept-Encoding, whatever this client gets.
  if (coding == Coding::kIdentity || facts.head_request || facts.range_request)
    return Verdict::kIdentity;
  return Verdict::kCompress;
}

}  // namespace peregrine::compress
