// Reading the TLS keys of the configuration: a site's `tls = { ... }` and the global [tls] table.
// Certificates, keys, OCSP responses and ticket keys are read into memory here, once per load,
// and checked (a key that does not match its certificate, an unreadable chain, a certificate
// that has expired or soon will), so `peregrine -t` and a SIGHUP see every problem at its
// file:line:col, and the workers build their contexts from bytes that cannot change under them.
#pragma once

#include <toml++/toml.h>

#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"
#include "config/reader.h"

namespace peregrine::tls {

// Warn about certificates expiring within this long.
inline constexpr int kExpiryWarningDays = 14;

// [[site]] tls = { certificate = "...", key = "..." } or { certificates = [{...}, {...}] }, plus
// ocsp_response and hsts.
void read_site_tls(config::Reader& reader, const toml::node& node, config::SiteTls* out);
// The global [tls] table.
void read_tls_options(config::Reader& reader, const toml::table& table, config::TlsOptions* out);
// After all sites and listeners are read: a TLS listener needs a certificate somewhere.
void check_tls_listeners(config::Reader& reader, const config::Config& config);

// Parses PEM text into a chain (leaf first) and a key and checks them against each other.
// Returns "" when usable, else what is wrong; *key_type gets "ECDSA", "RSA", ... and
// *days_left the days until the leaf expires (negative: expired).
std::string check_certificate(const std::string& chain_pem, const std::string& key_pem,
                              std::string* key_type, int* days_left, bool* key_problem);

// An in-memory self-signed ECDSA P-256 certificate for `names` (DNS names and IP literals),
// valid for a year. Returns "" or an error; *sha256 gets the certificate's SHA-256 fingerprint
// as colon-separated upper-case hex (as `openssl x509 -fingerprint -sha256` prints it).
std::string make_self_signed(const std::vector<std::string>& names, config::TlsCertificate* out,
                             std::string* sha256);

}  // namespace peregrine::tls
