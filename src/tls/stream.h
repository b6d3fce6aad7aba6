// One TLS session on a non-blocking socket, for either end: a client connection the server
// accepted or a connection it opened to a back end. read() and write() keep recv()/send()
// semantics, so the code around them reads the same over TLS and over a plain socket:
//   > 0  bytes moved
//   0    (read) the peer closed: close_notify, or a bare EOF
//   -1   errno EAGAIN: wait for the socket (either direction: TLS may need to read to write
//        and the reverse; connections are registered edge-triggered for both), any other
//        errno: the session is broken, close the socket.
// A read shorter than asked does NOT mean the socket is drained: more records may be waiting in
// the kernel or decrypted ones inside OpenSSL. Read until -1/EAGAIN.
#pragma once

#include <openssl/ssl.h>
#include <sys/types.h>

#include <memory>
#include <string>
#include <string_view>

#include "peregrine/request.h"

namespace peregrine::tls {

// final: the access log's version()/cipher() calls through a Stream stay direct calls.
class Stream final : public TlsSession {
 public:
  enum class Role : uint8_t { kServer, kClient };
  // null when OpenSSL cannot make a session (out of memory); does not own `fd`.
  static std::unique_ptr<Stream> make(SSL_CTX* context, int fd, Role role);
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  enum class Progress : uint8_t { kDone, kWantIo, kFailed };
  // Drives the handshake; kWantIo: call again when the socket is ready. kFailed: error() says why.
  Progress handshake();
  bool handshake_done() const { return done_; }

  ssize_t read(char* buffer, size_t length);
  // After a read that returned bytes: nothing is left to read now, neither in the kernel (the
  // last socket read OpenSSL made returned less than it asked for) nor inside OpenSSL. A reader
  // on an edge-triggered socket may stop here, as after a short plain read, and skip the read
  // that would only say EAGAIN (one system call per request on keep-alive connections).
  bool drained() const { return socket_drained_ && SSL_has_pending(ssl_) == 0; }
  ssize_t write(const char* bytes, size_t length);
  // Only when kernel_send(): `length` bytes of the file `file_fd` from `offset`, encrypted by the
  // kernel (SSL_sendfile), with write()'s contract.
  ssize_t sendfile(int file_fd, off_t offset, size_t length);
  // Sends close_notify once, best effort (never waits for the peer's); nothing after a fatal
  // error, where OpenSSL forbids it.
  void shutdown();

  // After the handshake: "h2", "http/1.1" or "" (no ALPN).
  std::string_view alpn() const;
  std::string_view version() const override { return SSL_get_version(ssl_); }  // "TLSv1.3"
  std::string_view cipher() const override;
  // What handlers pass on to a back end (AJP's SSL attributes); see TlsSession.
  int cipher_bits() const override;
  std::string session_id_hex() const override;
  std::string client_certificate_pem() const override;
  std::string_view client_verify() const override { return client().verify; }
  std::string_view client_subject_dn() const override { return client().subject; }
  std::string_view client_issuer_dn() const override { return client().issuer; }
  std::string_view client_serial() const override { return client().serial; }
  std::string_view client_fingerprint() const override { return client().fingerprint; }
  bool client_verified() const;  // a certificate was presented and verified
  bool resumed() const { return SSL_session_reused(ssl_) == 1; }
  // The kernel encrypts what this session sends (kTLS): SSL_sendfile can be used.
  bool kernel_send() const;
  // Why the handshake or the last read/write failed, for a log line.
  const std::string& error() const { return error_; }
  SSL* ssl() const { return ssl_; }

 private:
  explicit Stream(SSL* ssl) : ssl_(ssl) {}
  ssize_t fail_io(int result, const char* what);
  // The client certificate's facts, made on first use after the handshake (most connections
  // never ask, and those that do ask once per request: a log line, a back end's parameters).
  struct ClientFacts {
    std::string verify, subject, issuer, serial, fingerprint, pem;
  };
  const ClientFacts& client() const;
  mutable std::unique_ptr<ClientFacts> client_;

  // The socket BIO every stream reads and writes through (see stream.cc); its read keeps
  // socket_drained_.
  static BIO_METHOD* socket_method();
  static int receive(BIO* bio, char* out, size_t size, size_t* got);
  static int transmit(BIO* bio, const char* in, size_t size, size_t* sent);
  static long control(BIO* bio, int command, long number, void* pointer);
  static inline int (*plain_read)(BIO*, char*, int) = nullptr;
  static inline int (*plain_write)(BIO*, const char*, int) = nullptr;
  static inline long (*plain_ctrl)(BIO*, int, long, void*) = nullptr;

  SSL* ssl_;
  int fd_ = -1;
  bool kernel_tls_ = false;  // OpenSSL handed a direction to the kernel (kTLS): see control()
  bool socket_drained_ = false;
  bool done_ = false;
  bool shut_ = false;
  bool broken_ = false;  // a fatal error: no close_notify
  std::string error_;
};

}  // namespace peregrine::tls
