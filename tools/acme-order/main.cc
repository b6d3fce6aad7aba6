// acme-order: orders one certificate from an ACME CA (RFC 8555), answering HTTP-01 and/or
// TLS-ALPN-01 itself, and keeps it in a state folder the way the server will (src/acme/
// storage.h). It is the pure order machine (src/acme/order.h) on a blocking runner: for the
// integration tests against pebble, and for trying a CA by hand.
//
//   acme-order --directory https://127.0.0.1:14000/dir --ca pebble-ca.pem --state /tmp/state
//              --name a.example.test [--name ...] [--http-port 5002] [--tls-port 5001]
//
// Exit status: 0 issued, 1 failed, 2 bad usage, 3 the certificate's lock is held by another
// instance (it orders it; this one does nothing).
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "acme/crypto.h"
#include "acme/messages.h"
#include "acme/order.h"
#include "acme/storage.h"
#include "blocking_http.h"

namespace {

using namespace peregrine;

struct Options {
  acme::OrderOptions order;
  std::string ca_file;
  std::string state;
  std::string listen_address = "127.0.0.1";
  int http_port = 0;
  int tls_port = 0;
  acme::KeyType key_type = acme::KeyType::kEcdsaP256;
  int timeout = 10;
  int lock_ttl = 600;
  bool force = false;
};

void usage() {
  fprintf(
      stderr,
      "usage: acme-order --directory URL --state DIR --name NAME [--name NAME]...\n"
      "                  [--ca FILE] [--http-port PORT] [--tls-port PORT] [--listen-address IPV4]\n"
      "                  [--email ADDR] [--eab-kid KID --eab-hmac-key KEY]\n"
      "                  [--key-type ecdsa-p256|rsa2048] [--timeout SECONDS] [--lock-ttl SECONDS]\n"
      "At least one of --http-port (HTTP-01) and --tls-port (TLS-ALPN-01) is needed.\n");
}

bool parse_args(int argc, char** argv, Options* o) {
  o->order.challenge_types.clear();
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--force") {  // order even when the stored certificate is not due for renewal
      o->force = true;
      continue;
    }
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) {
        fprintf(stderr, "acme-order: %s needs a value\n", arg.c_str());
        return nullptr;
      }
      return argv[++i];
    };
    const char* v = value();
    if (v == nullptr) return false;
    if (arg == "--directory")
      o->order.directory_url = v;
    else if (arg == "--state")
      o->state = v;
    else if (arg == "--name")
      o->order.names.push_back(v);
    else if (arg == "--ca")
      o->ca_file = v;
    else if (arg == "--http-port")
      o->http_port = atoi(v);
    else if (arg == "--tls-port")
      o->tls_port = atoi(v);
    else if (arg == "--listen-address")
      o->listen_address = v;
    else if (arg == "--email")
      o->order.contacts.push_back(v);
    else if (arg == "--eab-kid")
      o->order.eab_kid = v;
    else if (arg == "--eab-hmac-key")
      o->order.eab_hmac_key = v;
    else if (arg == "--timeout")
      o->timeout = atoi(v);
    else if (arg == "--lock-ttl")
      o->lock_ttl = atoi(v);
    else if (arg == "--key-type") {
      auto type = acme::parse_key_type(v);
      if (!type) {
        fprintf(stderr, "acme-order: unknown key type '%s'\n", v);
        return false;
      }
      o->key_type = *type;
    } else {
      fprintf(stderr, "acme-order: unknown option '%s'\n", arg.c_str());
      return false;
    }
  }
  if (o->http_port > 0) o->order.challenge_types.push_back("http-01");
  if (o->tls_port > 0) o->order.challenge_types.push_back("tls-alpn-01");
  return !o->order.directory_url.empty() && !o->state.empty() && !o->order.names.empty() &&
         !o->order.challenge_types.empty();
}

// The account key of this CA, made and stored (0600) the first time.
std::optional<acme::AccountKey> account_key(const Options& o, std::string* error) {
  std::string path = acme::account_folder(o.state, o.order.directory_url) + "/account.key";
  if (access(path.c_str(), F_OK) == 0) {
    auto pem = acme::read_file(path, 64 << 10, error);
    if (!pem) return std::nullopt;
    std::string why;
    auto key = acme::AccountKey::from_pem(*pem, &why);
    if (!key) *error = path + ": " + why;
    return key;
  }
  acme::AccountKey key(acme::generate_key(acme::KeyType::kEcdsaP256));
  if (!acme::write_file_atomic(path, acme::private_key_pem(key.key()), 0600, error))
    return std::nullopt;
  fprintf(stderr, "acme-order: made a new account key %s\n", path.c_str());
  return key;
}

// True when the folder holds a sound certificate for these names that is not due for renewal.
bool stored_is_current(const Options& o, const std::string& folder) {
  std::string error;
  auto stored = acme::load_certificate(folder, &error);
  if (!stored) {
    if (error.find("/chain.pem: No such file") == std::string::npos)
      fprintf(stderr, "acme-order: stored certificate: %s; ordering a new one\n", error.c_str());
    return false;
  }
  if (stored->meta.names != o.order.names) {
    fprintf(stderr, "acme-order: the stored certificate names other hosts; ordering a new one\n");
    return false;
  }
  time_t due = acme::renewal_time(stored->not_before, stored->not_after, std::random_device{}());
  if (time(nullptr) >= due) return false;
  fprintf(stderr,
          "acme-order: %s/chain.pem is valid until %ld and due for renewal at %ld: nothing to do\n",
          folder.c_str(), static_cast<long>(stored->not_after), static_cast<long>(due));
  return true;
}

int run(const Options& o) {
  std::string error;
  auto key = account_key(o, &error);
  if (!key) {
    fprintf(stderr, "acme-order: account key: %s\n", error.c_str());
    return 1;
  }
  std::string folder = acme::certificate_folder(o.state, o.order.names[0]);
  if (!o.force && stored_is_current(o, folder)) return 0;
  std::string lock_path = folder + "/lock";
  std::string holder = acme::lock_holder_name();
  auto lock = acme::OrderLock::acquire(lock_path, holder, time(nullptr), o.lock_ttl);
  if (lock.result == acme::OrderLock::Result::kError) {
    fprintf(stderr, "acme-order: lock: %s\n", lock.error.c_str());
    return 1;
  }
  if (lock.result == acme::OrderLock::Result::kHeld) {
    fprintf(
        stderr, "acme-order: lock %s is held by %s for %ld s more: it orders this certificate\n",
        lock_path.c_str(), lock.holder.c_str(), static_cast<long>(lock.expires - time(nullptr)));
    return 3;
  }
  if (!lock.error.empty()) fprintf(stderr, "acme-order: lock: %s\n", lock.error.c_str());
  struct Unlock {
    const std::string& path;
    const std::string& holder;
    ~Unlock() { acme::OrderLock::release(path, holder); }
  } unlock{lock_path, holder};
  // Another instance may have stored it between our look and our lock.
  if (!o.force && stored_is_current(o, folder)) return 0;

  acme_tool::Http01Responder http01;
  acme_tool::TlsAlpn01Responder alpn01;
  if (o.http_port > 0 && !http01.start(o.listen_address, o.http_port, &error)) {
    fprintf(stderr, "acme-order: http-01 responder: %s\n", error.c_str());
    return 1;
  }
  if (o.tls_port > 0 && !alpn01.start(o.listen_address, o.tls_port, &error)) {
    fprintf(stderr, "acme-order: tls-alpn-01 responder: %s\n", error.c_str());
    return 1;
  }

  acme::PkeyPtr cert_key = acme::generate_key(o.key_type);
  acme::OrderMachine machine(o.order, *key, cert_key.get());
  acme::Action action = machine.start();
  auto started = std::chrono::steady_clock::now();
  for (;;) {
    switch (action.kind) {
      case acme::Action::Kind::kSend: {
        acme::Response response;
        if (!acme_tool::fetch(action.request, o.ca_file, o.timeout, &response, &error)) {
          fprintf(stderr, "acme-order: %s: %s\n", std::string(acme::step_name(action.step)).c_str(),
                  error.c_str());
          return 1;
        }
        fprintf(stderr, "acme-order: %s: %s %s -> %d\n",
                std::string(acme::step_name(action.step)).c_str(), action.request.method.c_str(),
                action.request.url.c_str(), response.status);
        action = machine.on_response(response, time(nullptr));
        break;
      }
      case acme::Action::Kind::kWait:
        std::this_thread::sleep_for(action.wait);
        action = machine.on_wait_over();
        break;
      case acme::Action::Kind::kProvision: {
        const acme::Provision& p = action.provision;
        fprintf(stderr, "acme-order: %s for %s: answering token %s\n", p.challenge_type.c_str(),
                p.identifier.c_str(), p.token.c_str());
        if (p.challenge_type == "http-01") {
          http01.set(p.token, p.key_authorization);
        } else if (!alpn01.set(p.identifier, p.key_authorization, &error)) {
          fprintf(stderr, "acme-order: tls-alpn-01: %s\n", error.c_str());
          return 1;
        }
        action = machine.on_provisioned();
        break;
      }
      case acme::Action::Kind::kFailed:
        fprintf(
            stderr, "acme-order: failed: %s%s\n", action.error.c_str(),
            action.retry_after
                ? (" (retry after " + std::to_string(action.retry_after->count()) + " s)").c_str()
                : "");
        return 1;
      case acme::Action::Kind::kDone: {
        auto chain = acme::parse_pem_chain(action.chain_pem, &error);
        if (!chain) {
          fprintf(stderr, "acme-order: certificate: %s\n", error.c_str());
          return 1;
        }
        X509* leaf = (*chain)[0].get();
        acme::CertificateMeta meta;
        meta.names = o.order.names;
        char issuer[512] = "";
        X509_NAME_oneline(X509_get_issuer_name(leaf), issuer, sizeof issuer);
        meta.issuer = issuer;
        meta.not_before = acme::certificate_not_before(leaf).value_or(0);
        meta.not_after = acme::certificate_not_after(leaf).value_or(0);
        std::string ari_error;
        meta.ari_id = acme::ari_certificate_id(leaf, &ari_error).value_or("");
        meta.order_url = machine.order_url();
        meta.directory_url = o.order.directory_url;
        // The key first: a chain on disk always has its key beside it.
        if (!acme::write_file_atomic(folder + "/key.pem", acme::private_key_pem(cert_key.get()),
                                     0600, &error) ||
            !acme::write_file_atomic(folder + "/chain.pem", action.chain_pem, 0644, &error) ||
            !acme::write_file_atomic(folder + "/meta.json", acme::format_meta(meta), 0644,
                                     &error)) {
          fprintf(stderr, "acme-order: storing: %s\n", error.c_str());
          return 1;
        }
        std::string account_json = "{\"url\":\"" + machine.account_url() + "\"}\n";
        acme::write_file_atomic(
            acme::account_folder(o.state, o.order.directory_url) + "/account.json", account_json,
            0644, &error);
        double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
        fprintf(stderr,
                "acme-order: issued %s (%zu certificates, valid until %ld, ARI %s) in %.2f s\n",
                (folder + "/chain.pem").c_str(), chain->size(), static_cast<long>(meta.not_after),
                meta.ari_id.empty() ? "-" : meta.ari_id.c_str(), seconds);
        return 0;
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  // A validator that hangs up mid-answer must not kill the tool (SSL_write has no MSG_NOSIGNAL).
  signal(SIGPIPE, SIG_IGN);
  Options options;
  if (!parse_args(argc, argv, &options)) {
    usage();
    return 2;
  }
  return run(options);
}
