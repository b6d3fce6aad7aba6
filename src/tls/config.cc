#include "tls/config.h"

#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ocsp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "config/validate.h"

namespace peregrine::tls {

namespace {

using config::Reader;

const std::vector<std::string_view> kSiteTlsKeys = {"certificate",   "key",         "certificates",
                                                    "ocsp_response", "hsts",        "client_ca",
                                                    "verify_client", "verify_depth"};
const std::vector<std::string_view> kPairKeys = {"certificate", "key"};
const std::vector<std::string_view> kHstsKeys = {"max_age", "include_subdomains", "preload"};
const std::vector<std::string_view> kOptionKeys = {
    "protocols",        "ciphers",         "ciphersuites",  "curves",          "tickets",
    "ticket_key_files", "ticket_rotation", "session_cache", "session_timeout", "access_log_tls"};

constexpr size_t kTicketKeyBytes = 80;
constexpr size_t kMaxFileBytes = 1 << 20;

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct PkeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct CtxFree {
  void operator()(SSL_CTX* c) const { SSL_CTX_free(c); }
};

std::string openssl_reason() {
  unsigned long code = ERR_peek_last_error();
  ERR_clear_error();
  if (code == 0) return "no PEM data found";
  const char* reason = ERR_reason_error_string(code);
  return reason ? reason : "unknown OpenSSL error";
}

// The whole file, or "" with *error set.
bool read_whole_file(const std::string& path, std::string* out, std::string* error) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *error = std::strerror(errno);
    return false;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    *error = "not a regular file";
    return false;
  }
  if (static_cast<size_t>(st.st_size) > kMaxFileBytes) {
    ::close(fd);
    *error = "larger than 1 MB";
    return false;
  }
  out->resize(static_cast<size_t>(st.st_size));
  size_t done = 0;
  while (done < out->size()) {
    ssize_t n = ::read(fd, out->data() + done, out->size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  out->resize(done);
  return true;
}

// Reads the file a string key names; false after reporting.
bool read_named_file(Reader& reader, const toml::node& node, std::string_view name,
                     std::string* path, std::string* bytes) {
  std::string value;
  if (!reader.read_string(node, name, &value, false)) return false;
  *path = config::detail::absolute_path(value, reader.base_dir());
  std::string why;
  if (!read_whole_file(*path, bytes, &why)) {
    reader.error(
        node.source(), "cannot read " + std::string(name) + " '" + value + "': " + why,
        value.front() == '/' ? "check the path and its permissions" : reader.relative_hint(value));
    return false;
  }
  return true;
}

void read_certificate_pair(Reader& reader, const toml::table& table, std::string_view prefix,
                           config::SiteTls* out, std::vector<std::string>* key_types) {
  const toml::node* certificate = table.get("certificate");
  const toml::node* key = table.get("key");
  if (!certificate || !key) {
    reader.error(
        table.source(),
        std::string(prefix) + (certificate ? " has no 'key'" : " has no 'certificate'"),
        "write both: { certificate = \"/etc/ssl/site.pem\", key = \"/etc/ssl/site.key\" }");
    return;
  }
  config::TlsCertificate entry;
  entry.pos = reader.pos_of(certificate->source());
  bool ok = read_named_file(reader, *certificate, std::string(prefix) + ".certificate",
                            &entry.certificate_path, &entry.chain_pem);
  ok = read_named_file(reader, *key, std::string(prefix) + ".key", &entry.key_path,
                       &entry.key_pem) &&
       ok;
  if (!ok) return;
  std::string key_type;
  int days_left = 0;
  bool key_problem = false;
  std::string problem =
      check_certificate(entry.chain_pem, entry.key_pem, &key_type, &days_left, &key_problem);
  if (!problem.empty()) {
    reader.error(key_problem ? key->source() : certificate->source(), problem,
                 key_problem ? "name the key file that belongs to '" + entry.certificate_path + "'"
                             : "the file holds the site's certificate first, then its "
                               "intermediates, in PEM");
    return;
  }
  for (const std::string& other : *key_types) {
    if (other == key_type) {
      reader.error(certificate->source(),
                   "the site already has a certificate with a " + key_type + " key",
                   "one certificate per key type (one ECDSA and one RSA at most)");
      return;
    }
  }
  key_types->push_back(key_type);
  if (days_left < 0) {
    reader.warn(entry.pos,
                "certificate '" + entry.certificate_path + "' expired " +
                    std::to_string(-days_left) + " day(s) ago",
                "clients will refuse it; renew it");
  } else if (days_left < kExpiryWarningDays) {
    reader.warn(entry.pos,
                "certificate '" + entry.certificate_path + "' expires in " +
                    std::to_string(days_left) + " day(s)",
                "renew it, then reload (SIGHUP)");
  }
  out->certificates.push_back(std::move(entry));
}

// "365d", "12h", 31536000: seconds.
bool read_max_age(Reader& reader, const toml::node& node, int64_t* seconds) {
  if (node.is_integer())
    return reader.read_int(node, "site.tls.hsts.max_age", 0, 1LL << 40, seconds);
  std::string text;
  if (!reader.read_string(node, "site.tls.hsts.max_age", &text, false)) return false;
  int64_t factor = 1;
  if (text.ends_with('d')) factor = 86400;
  if (text.ends_with('h')) factor = 3600;
  if (text.ends_with('m')) factor = 60;
  if (text.ends_with('s') || factor != 1) text.pop_back();
  if (text.empty() || text.size() > 10 || !config::all_digits(text)) {
    reader.error(node.source(), "invalid HSTS max_age \"" + text + "\"",
                 "a number of seconds, or with a unit: \"365d\", \"12h\"");
    return false;
  }
  *seconds = std::stoll(text) * factor;
  return true;
}

void read_hsts(Reader& reader, const toml::node& node, std::string* out) {
  if (node.is_string()) {
    std::string value;
    if (!reader.read_string(node, "site.tls.hsts", &value, false)) return;
    if (config::detail::has_control_chars(value) || !value.starts_with("max-age=")) {
      reader.error(node.source(), "invalid HSTS value \"" + value + "\"",
                   "e.g. hsts = \"max-age=31536000; includeSubDomains\"");
      return;
    }
    *out = value;
    return;
  }
  const toml::table* table = node.as_table();
  if (!table) {
    reader.type_error(node, "site.tls.hsts", "a string or a table",
                      "e.g. hsts = { max_age = \"365d\", include_subdomains = true }");
    return;
  }
  reader.check_keys(*table, kHstsKeys, "site.tls.hsts");
  int64_t seconds = 365 * 86400;
  bool subdomains = false, preload = false;
  if (const toml::node* n = table->get("max_age")) read_max_age(reader, *n, &seconds);
  if (const toml::node* n = table->get("include_subdomains"))
    reader.read_bool(*n, "site.tls.hsts.include_subdomains", &subdomains);
  if (const toml::node* n = table->get("preload"))
    reader.read_bool(*n, "site.tls.hsts.preload", &preload);
  *out = "max-age=" + std::to_string(seconds);
  if (subdomains) out->append("; includeSubDomains");
  if (preload) out->append("; preload");
}

// The certificates of a CA bundle, or 0 when one is damaged (or there is none).
int count_certificates(const std::string& pem) {
  ERR_clear_error();
  std::unique_ptr<BIO, BioFree> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  int count = 0;
  while (X509* next = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
    X509_free(next);
    ++count;
  }
  unsigned long last = ERR_peek_last_error();
  ERR_clear_error();
  if (last != 0 && ERR_GET_REASON(last) != PEM_R_NO_START_LINE) return 0;
  return count;
}

// client_ca, verify_client and verify_depth: what the site asks of clients' certificates.
void read_client_verification(Reader& reader, const toml::table& table, config::SiteTls* out) {
  using Verify = config::SiteTls::VerifyClient;
  const toml::node* mode = table.get("verify_client");
  const toml::node* ca = table.get("client_ca");
  std::string value;
  if (mode) {
    if (!reader.read_string(*mode, "site.tls.verify_client", &value, false)) return;
    if (value == "off") {
      out->verify_client = Verify::kOff;
    } else if (value == "optional") {
      out->verify_client = Verify::kOptional;
    } else if (value == "on") {
      out->verify_client = Verify::kOn;
    } else if (value == "optional_no_ca") {
      out->verify_client = Verify::kOptionalNoCa;
    } else {
      reader.error(mode->source(), "invalid verify_client \"" + value + "\"",
                   "one of \"off\", \"optional\", \"on\", \"optional_no_ca\"");
      return;
    }
  }
  if (ca) {
    std::string path;
    if (!read_named_file(reader, *ca, "site.tls.client_ca", &path, &out->client_ca)) return;
    if (count_certificates(out->client_ca) == 0) {
      reader.error(ca->source(), "no certificate could be read from '" + path + "'",
                   "client_ca is the PEM bundle of the CAs that sign clients' certificates");
      out->client_ca.clear();
      return;
    }
  }
  if (const toml::node* depth = table.get("verify_depth")) {
    int64_t value = 1;
    if (reader.read_int(*depth, "site.tls.verify_depth", 1, 100, &value))
      out->verify_depth = static_cast<int>(value);
  }
  const bool verifies =
      out->verify_client == Verify::kOn || out->verify_client == Verify::kOptional;
  if (verifies && !ca) {
    reader.error(mode->source(), "verify_client = \"" + value + "\" without client_ca",
                 "add client_ca = \"/etc/ssl/clients-ca.pem\" (the CAs to verify against), or "
                 "use \"optional_no_ca\" to ask for a certificate without verifying it");
  } else if (ca && out->verify_client == Verify::kOff) {
    reader.warn(reader.pos_of(ca->source()), "client_ca has no effect while verify_client is off",
                "add verify_client = \"on\" (or \"optional\")");
  }
  if (out->verify_client != Verify::kOff && out->certificates.empty())
    reader.error((mode ? mode : ca)->source(),
                 "client certificates asked for without a certificate",
                 "client verification is part of the site's TLS: add certificate and key");
}

}  // namespace

std::string check_certificate(const std::string& chain_pem, const std::string& key_pem,
                              std::string* key_type, int* days_left, bool* key_problem) {
  *key_problem = false;
  ERR_clear_error();
  std::unique_ptr<BIO, BioFree> chain_bio(
      BIO_new_mem_buf(chain_pem.data(), static_cast<int>(chain_pem.size())));
  std::unique_ptr<X509, X509Free> leaf(
      PEM_read_bio_X509(chain_bio.get(), nullptr, nullptr, nullptr));
  if (!leaf) return "no certificate could be read from the chain file (" + openssl_reason() + ")";
  while (X509* next = PEM_read_bio_X509(chain_bio.get(), nullptr, nullptr, nullptr))
    X509_free(next);
  unsigned long last = ERR_peek_last_error();
  if (last != 0 && ERR_GET_REASON(last) != PEM_R_NO_START_LINE)
    return "the chain file is damaged after its first certificate (" + openssl_reason() + ")";
  ERR_clear_error();
  std::unique_ptr<BIO, BioFree> key_bio(
      BIO_new_mem_buf(key_pem.data(), static_cast<int>(key_pem.size())));
  std::unique_ptr<EVP_PKEY, PkeyFree> key(
      PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr));
  if (!key) {
    *key_problem = true;
    return "no private key could be read from the key file (" + openssl_reason() +
           "; encrypted keys are not supported)";
  }
  if (X509_check_private_key(leaf.get(), key.get()) != 1) {
    ERR_clear_error();
    *key_problem = true;
    return "the key does not match the certificate";
  }
  switch (EVP_PKEY_get_base_id(key.get())) {
    case EVP_PKEY_EC:
      *key_type = "ECDSA";
      break;
    case EVP_PKEY_RSA:
      *key_type = "RSA";
      break;
    case EVP_PKEY_ED25519:
      *key_type = "Ed25519";
      break;
    default:
      *key_type = "other";
  }
  int days = 0, seconds = 0;
  if (ASN1_TIME_diff(&days, &seconds, nullptr, X509_get0_notAfter(leaf.get())) == 1) {
    *days_left = days;
    if (days == 0 && seconds < 0) *days_left = -1;
  }
  return "";
}

void read_site_tls(Reader& reader, const toml::node& node, config::SiteTls* out) {
  const toml::table* table = node.as_table();
  if (!table) {
    reader.type_error(
        node, "site.tls", "a table",
        "e.g. tls = { certificate = \"/etc/ssl/site.pem\", key = \"/etc/ssl/site.key\" }");
    return;
  }
  reader.check_keys(*table, kSiteTlsKeys, "site.tls");
  std::vector<std::string> key_types;
  const toml::node* list = table->get("certificates");
  if (list && (table->get("certificate") || table->get("key"))) {
    reader.error(list->source(), "'certificates' and 'certificate'/'key' are both set",
                 "list every certificate in 'certificates', or use only certificate and key");
  } else if (list) {
    const toml::array* array = list->as_array();
    if (!array || !array->is_array_of_tables() || array->empty()) {
      reader.type_error(*list, "site.tls.certificates", "an array of tables",
                        "e.g. certificates = [{ certificate = \"ec.pem\", key = \"ec.key\" }, "
                        "{ certificate = \"rsa.pem\", key = \"rsa.key\" }]");
    } else {
      for (const toml::node& element : *array) {
        reader.check_keys(*element.as_table(), kPairKeys, "site.tls.certificates");
        read_certificate_pair(reader, *element.as_table(), "site.tls.certificates", out,
                              &key_types);
      }
    }
  } else if (table->get("certificate") || table->get("key")) {
    read_certificate_pair(reader, *table, "site.tls", out, &key_types);
  }
  if (const toml::node* ocsp = table->get("ocsp_response")) {
    std::string path;
    if (read_named_file(reader, *ocsp, "site.tls.ocsp_response", &path, &out->ocsp_response)) {
      const unsigned char* p = reinterpret_cast<const unsigned char*>(out->ocsp_response.data());
      OCSP_RESPONSE* response =
          d2i_OCSP_RESPONSE(nullptr, &p, static_cast<long>(out->ocsp_response.size()));
      if (!response) {
        ERR_clear_error();
        reader.error(ocsp->source(), "'" + path + "' is not a DER OCSP response",
                     "make one with: openssl ocsp -issuer CA.pem -cert SITE.pem -url URL "
                     "-respout FILE");
        out->ocsp_response.clear();
      }
      OCSP_RESPONSE_free(response);
    }
    if (out->certificates.empty())
      reader.error(ocsp->source(), "'ocsp_response' without a certificate",
                   "the response is stapled to the site's certificate: add certificate and key");
  }
  if (const toml::node* hsts = table->get("hsts")) read_hsts(reader, *hsts, &out->hsts);
  read_client_verification(reader, *table, out);
}

void read_tls_options(Reader& reader, const toml::table& table, config::TlsOptions* out) {
  reader.check_keys(table, kOptionKeys, "[tls]");
  if (const toml::node* node = table.get("protocols")) {
    std::vector<std::pair<std::string, const toml::node*>> list;
    if (reader.read_string_list(*node, "tls.protocols", &list)) {
      out->tls12 = out->tls13 = false;
      for (auto& [name, element] : list) {
        std::string lower = config::detail::to_lower(name);
        if (lower == "tlsv1.2" || lower == "1.2") {
          out->tls12 = true;
        } else if (lower == "tlsv1.3" || lower == "1.3") {
          out->tls13 = true;
        } else {
          reader.error(element->source(), "unsupported TLS protocol \"" + name + "\"",
                       "TLSv1.2 and TLSv1.3 are supported; older versions are broken");
        }
      }
      if (!out->tls12 && !out->tls13 && !list.empty()) out->tls12 = out->tls13 = true;
      if (list.empty())
        reader.error(node->source(), "'tls.protocols' is empty", "e.g. [\"TLSv1.2\", \"TLSv1.3\"]");
    }
  }
  // Cipher and group lists are tried on a scratch context: OpenSSL is the judge of what it knows.
  std::unique_ptr<SSL_CTX, CtxFree> scratch(SSL_CTX_new(TLS_server_method()));
  auto check_list = [&](const char* key, std::string* target, auto apply, const char* hint) {
    const toml::node* node = table.get(key);
    if (!node) return;
    std::string value;
    if (!reader.read_string(*node, std::string("tls.") + key, &value, false)) return;
    ERR_clear_error();
    if (!scratch || apply(scratch.get(), value.c_str()) != 1) {
      ERR_clear_error();
      // Appended, not chained with +: GCC 12 warns (-Warray-bounds, a false positive) on the
      // temporaries that + makes of a short literal.
      std::string message = "OpenSSL accepts none of tls.";
      message.append(key).append(" \"").append(value).append("\"");
      reader.error(node->source(), message, hint);
      return;
    }
    *target = value;
  };
  check_list("ciphers", &out->ciphers, SSL_CTX_set_cipher_list,
             "an OpenSSL cipher list for TLS 1.2, e.g. \"ECDHE+AESGCM:ECDHE+CHACHA20\"");
  check_list("ciphersuites", &out->ciphersuites, SSL_CTX_set_ciphersuites,
             "TLS 1.3 suites, e.g. \"TLS_AES_128_GCM_SHA256:TLS_CHACHA20_POLY1305_SHA256\"");
  check_list(
      "curves", &out->curves,
      [](SSL_CTX* c, const char* v) { return static_cast<int>(SSL_CTX_set1_groups_list(c, v)); },
      "group names, e.g. \"X25519:P-256:P-384\"");
  if (const toml::node* node = table.get("tickets"))
    reader.read_bool(*node, "tls.tickets", &out->tickets);
  if (const toml::node* node = table.get("ticket_key_files")) {
    std::vector<std::pair<std::string, const toml::node*>> list;
    if (reader.read_string_list(*node, "tls.ticket_key_files", &list)) {
      for (auto& [name, element] : list) {
        // Read in place: moving an 80-byte string in makes GCC 12 warn (-Warray-bounds, a
        // false positive about the small-string buffer).
        std::string path;
        std::string& bytes = out->ticket_keys.emplace_back();
        if (!read_named_file(reader, *element, "tls.ticket_key_files", &path, &bytes)) {
          out->ticket_keys.pop_back();
          continue;
        }
        if (bytes.size() != kTicketKeyBytes) {
          reader.error(element->source(),
                       "ticket key file '" + path + "' holds " + std::to_string(bytes.size()) +
                           " bytes, not 80",
                       "make one with: openssl rand 80 > " + name);
          out->ticket_keys.pop_back();
        }
      }
    }
  }
  if (const toml::node* node = table.get("ticket_rotation"))
    reader.read_duration(*node, "tls.ticket_rotation", config::Millis(60'000), config::kMaxDuration,
                         &out->ticket_rotation);
  if (const toml::node* node = table.get("session_timeout"))
    reader.read_duration(*node, "tls.session_timeout", config::Millis(1000), config::kMaxDuration,
                         &out->session_timeout);
  if (const toml::node* node = table.get("session_cache")) {
    int64_t n = 0;
    if (reader.read_int(*node, "tls.session_cache", 0, 1 << 24, &n))
      out->session_cache = static_cast<uint32_t>(n);
  }
  if (const toml::node* node = table.get("access_log_tls"))
    reader.read_bool(*node, "tls.access_log_tls", &out->log_tls);
}

void check_tls_listeners(Reader& reader, const config::Config& config) {
  bool any_certificate = false;
  for (const config::Site& site : config.sites)
    if (!site.tls.certificates.empty()) any_certificate = true;
  if (any_certificate) return;
  for (const config::ListenAddress& listen : config.listen) {
    if (!listen.tls) continue;
    reader.error(listen.pos, "TLS listener '" + listen.text + "' but no site has a certificate",
                 "add tls = { certificate = \"/etc/ssl/site.pem\", key = \"/etc/ssl/site.key\" } "
                 "to a [[site]]");
  }
}

std::string make_self_signed(const std::vector<std::string>& names, config::TlsCertificate* out,
                             std::string* sha256) {
  ERR_clear_error();
  std::unique_ptr<EVP_PKEY, PkeyFree> key(EVP_EC_gen("P-256"));
  std::unique_ptr<X509, X509Free> cert(X509_new());
  if (!key || !cert) return "cannot make a key: " + openssl_reason();
  X509* x = cert.get();
  X509_set_version(x, 2);
  unsigned char serial[16];
  RAND_bytes(serial, sizeof serial);
  serial[0] &= 0x7f;
  BIGNUM* bn = BN_bin2bn(serial, sizeof serial, nullptr);
  BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x));
  BN_free(bn);
  X509_gmtime_adj(X509_getm_notBefore(x), -60 * 60);
  X509_gmtime_adj(X509_getm_notAfter(x), 365L * 24 * 60 * 60);
  X509_set_pubkey(x, key.get());
  X509_NAME* subject = X509_get_subject_name(x);
  const std::string common_name = names.empty() ? "localhost" : names.front();
  X509_NAME_add_entry_by_txt(subject, "O", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("peregrine self-signed"), -1,
                             -1, 0);
  X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(common_name.c_str()), -1, -1,
                             0);
  X509_set_issuer_name(x, subject);
  std::string san;
  for (const std::string& name : names) {
    if (!san.empty()) san += ',';
    bool ip = name.find_first_not_of("0123456789.") == std::string::npos ||
              name.find(':') != std::string::npos;
    san += (ip ? "IP:" : "DNS:") + name;
  }
  X509V3_CTX v3;
  X509V3_set_ctx_nodb(&v3);
  X509V3_set_ctx(&v3, x, x, nullptr, nullptr, 0);
  for (auto [nid, value] : {std::pair{NID_subject_alt_name, san},
                            std::pair{NID_basic_constraints, std::string("critical,CA:FALSE")},
                            std::pair{NID_ext_key_usage, std::string("serverAuth")}}) {
    if (value.empty()) continue;
    X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &v3, nid, value.c_str());
    if (!ext) return "cannot make the certificate: " + openssl_reason();
    X509_add_ext(x, ext, -1);
    X509_EXTENSION_free(ext);
  }
  if (X509_sign(x, key.get(), EVP_sha256()) == 0)
    return "cannot sign the certificate: " + openssl_reason();
  std::unique_ptr<BIO, BioFree> cert_bio(BIO_new(BIO_s_mem())), key_bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_X509(cert_bio.get(), x);
  PEM_write_bio_PrivateKey(key_bio.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr);
  char* data = nullptr;
  long length = BIO_get_mem_data(cert_bio.get(), &data);
  out->chain_pem.assign(data, static_cast<size_t>(length));
  length = BIO_get_mem_data(key_bio.get(), &data);
  out->key_pem.assign(data, static_cast<size_t>(length));
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int digest_length = 0;
  X509_digest(x, EVP_sha256(), digest, &digest_length);
  sha256->clear();
  for (unsigned i = 0; i < digest_length; ++i) {
    static constexpr char kHex[] = "0123456789ABCDEF";
    if (i) *sha256 += ':';
    *sha256 += kHex[digest[i] >> 4];
    *sha256 += kHex[digest[i] & 15];
  }
  return "";
}

}  // namespace peregrine::tls
