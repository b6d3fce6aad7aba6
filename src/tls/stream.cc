#include "tls/stream.h"

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>

namespace peregrine::tls {

namespace {

// OpenSSL keeps errors in a per-thread queue: take them all, so that one connection's failure
// never shows up as the next connection's error on the same worker thread.
std::string drain_error_queue() {
  std::string text;
  while (unsigned long code = ERR_get_error()) {
    char line[256];
    ERR_error_string_n(code, line, sizeof line);
    if (!text.empty()) text.append("; ");
    text.append(line);
  }
  return text;
}

// SSL_get_error() reads the thread's error queue, so it must be empty before each SSL_read or
// SSL_write: a failure left by another connection would otherwise pass for this one's. It
// almost always is, and looking costs ~200 instructions where ERR_clear_error() wipes all 16
// slots every time (~840 per call: 6 % of a TLS keep-alive request's user-space instructions).
void clear_stale_errors() {
  if (ERR_peek_error() != 0) ERR_clear_error();
}

// The control by which OpenSSL hands a direction of the socket to kTLS. OpenSSL keeps its
// name internal (BIO_CTRL_SET_KTLS in its bio.h); the public header lists the number.
constexpr int kSetKernelTls = 72;

// Whether any socket in the process has had kTLS turned on. Until one has (never, on a kernel
// without the tls module), the answer to "is kTLS on?" is no without looking at the socket.
std::atomic<bool> g_kernel_tls_used{false};

}  // namespace

std::unique_ptr<Stream> Stream::make(SSL_CTX* context, int fd, Role role) {
  SSL* ssl = SSL_new(context);
  BIO* socket = ssl ? BIO_new(socket_method()) : nullptr;
  if (socket == nullptr) {
    SSL_free(ssl);
    ERR_clear_error();
    return nullptr;
  }
  BIO_set_fd(socket, fd, BIO_NOCLOSE);
  SSL_set_bio(ssl, socket, socket);  // set_fd also readies the socket for kTLS (TCP_ULP "tls")
  if (role == Role::kServer) {
    SSL_set_accept_state(ssl);
  } else {
    SSL_set_connect_state(ssl);
  }
  std::unique_ptr<Stream> stream(new Stream(ssl));
  stream->fd_ = fd;
  // The BIO's callback argument is a plain field: where the functions below find their stream.
  BIO_set_callback_arg(socket, reinterpret_cast<char*>(stream.get()));
  return stream;
}

// OpenSSL's socket BIO, with its type, so that OpenSSL treats it as one, and three changes:
// - reads note whether the kernel had less than OpenSSL asked for (socket_drained_);
// - reads and writes are recv(2) and send(2), where the socket BIO makes read(2) and write(2):
//   a socket's own calls skip the file layer (vfs_read, fdget_pos, rw_verify_area), and a send
//   to a closed peer raises no SIGPIPE;
// - OpenSSL asks whether kTLS is on several times per record (~14 controls per keep-alive
//   request, ~40 instructions each in the socket's control); until it has turned kTLS on for
//   some socket, the answer is no without asking.
// Once OpenSSL turns kTLS on for a direction, the socket BIO's own functions do everything: a
// kTLS socket reads and writes records with their type in control messages.
BIO_METHOD* Stream::socket_method() {
  static BIO_METHOD* method = [] {
    const BIO_METHOD* plain = BIO_s_socket();
    BIO_METHOD* m = BIO_meth_new(BIO_TYPE_SOCKET, "peregrine socket");
    if (m == nullptr) return m;
    BIO_meth_set_puts(m, BIO_meth_get_puts(plain));
    BIO_meth_set_create(m, BIO_meth_get_create(plain));
    BIO_meth_set_destroy(m, BIO_meth_get_destroy(plain));
    plain_read = BIO_meth_get_read(plain);
    plain_write = BIO_meth_get_write(plain);
    plain_ctrl = BIO_meth_get_ctrl(plain);
    BIO_meth_set_read_ex(m, &Stream::receive);
    BIO_meth_set_write_ex(m, &Stream::transmit);
    BIO_meth_set_ctrl(m, &Stream::control);
    return m;
  }();
  return method;
}

int Stream::receive(BIO* bio, char* out, size_t size, size_t* got) {
  auto* stream = reinterpret_cast<Stream*>(BIO_get_callback_arg(bio));
  const int asked = static_cast<int>(std::min<size_t>(size, INT_MAX));
  int n;
  if (stream->kernel_tls_) {
    n = plain_read(bio, out, asked);
  } else {
    errno = 0;
    n = static_cast<int>(::recv(stream->fd_, out, static_cast<size_t>(asked), 0));
    BIO_clear_retry_flags(bio);
    if (n < 0 && BIO_sock_should_retry(n)) {
      BIO_set_retry_read(bio);
    } else if (n == 0) {
      BIO_set_flags(bio, BIO_FLAGS_IN_EOF);  // as the socket BIO does: BIO_eof() answers from it
    }
  }
  // A short read, EAGAIN and EOF all mean the kernel had nothing more at that moment; except
  // under kTLS receive, where a read returns one record however many wait: read on to EAGAIN.
  bool drained = n < asked;
  if (drained && n > 0 && stream->kernel_tls_ && BIO_get_ktls_recv(bio)) drained = false;
  stream->socket_drained_ = drained;
  *got = n > 0 ? static_cast<size_t>(n) : 0;
  return n > 0 ? 1 : n;  // the read_ex contract
}

int Stream::transmit(BIO* bio, const char* in, size_t size, size_t* sent) {
  auto* stream = reinterpret_cast<Stream*>(BIO_get_callback_arg(bio));
  const int asked = static_cast<int>(std::min<size_t>(size, INT_MAX));
  int n;
  if (stream->kernel_tls_) {
    n = plain_write(bio, in, asked);
  } else {
    errno = 0;
    n = static_cast<int>(::send(stream->fd_, in, static_cast<size_t>(asked), MSG_NOSIGNAL));
    BIO_clear_retry_flags(bio);
    if (n <= 0 && BIO_sock_should_retry(n)) BIO_set_retry_write(bio);
  }
  *sent = n > 0 ? static_cast<size_t>(n) : 0;
  return n > 0 ? 1 : n;  // the write_ex contract
}

long Stream::control(BIO* bio, int command, long number, void* pointer) {
  if (command == BIO_CTRL_GET_KTLS_SEND || command == BIO_CTRL_GET_KTLS_RECV) {
    if (!g_kernel_tls_used.load(std::memory_order_relaxed)) return 0;
  } else if (command == kSetKernelTls) {
    const long done = plain_ctrl(bio, command, number, pointer);
    if (done > 0) {
      g_kernel_tls_used.store(true, std::memory_order_relaxed);
      if (auto* stream = reinterpret_cast<Stream*>(BIO_get_callback_arg(bio))) {
        stream->kernel_tls_ = true;
      }
    }
    return done;
  }
  return plain_ctrl(bio, command, number, pointer);
}

Stream::~Stream() {
  SSL_free(ssl_);
}

Stream::Progress Stream::handshake() {
  if (done_) return Progress::kDone;
  clear_stale_errors();
  int result = SSL_do_handshake(ssl_);
  if (result == 1) {
    done_ = true;
    return Progress::kDone;
  }
  if (fail_io(result, "handshake") < 0 && errno == EAGAIN) return Progress::kWantIo;
  return Progress::kFailed;
}

ssize_t Stream::read(char* buffer, size_t length) {
  clear_stale_errors();
  int result = SSL_read(ssl_, buffer, static_cast<int>(std::min<size_t>(length, INT_MAX)));
  return result > 0 ? result : fail_io(result, "read");
}

ssize_t Stream::write(const char* bytes, size_t length) {
  if (length == 0) return 0;
  clear_stale_errors();
  int result = SSL_write(ssl_, bytes, static_cast<int>(std::min<size_t>(length, INT_MAX)));
  return result > 0 ? result : fail_io(result, "write");
}

ssize_t Stream::sendfile(int file_fd, off_t offset, size_t length) {
  if (length == 0) return 0;
  clear_stale_errors();
  ossl_ssize_t result = SSL_sendfile(ssl_, file_fd, offset, length, 0);
  return result > 0 ? static_cast<ssize_t>(result) : fail_io(static_cast<int>(result), "sendfile");
}

// Maps SSL_get_error onto the recv()/send() contract in stream.h.
ssize_t Stream::fail_io(int result, const char* what) {
  const int saved_errno = errno;
  switch (SSL_get_error(ssl_, result)) {
    case SSL_ERROR_WANT_READ:
    case SSL_ERROR_WANT_WRITE:
      errno = EAGAIN;
      return -1;
    case SSL_ERROR_ZERO_RETURN:
      return 0;
    case SSL_ERROR_SYSCALL:
      broken_ = true;
      error_ = std::string(what) + ": " +
               (saved_errno ? std::strerror(saved_errno) : "the peer closed the connection");
      ERR_clear_error();
      if (saved_errno == 0) return 0;  // a bare EOF (SSL_OP_IGNORE_UNEXPECTED_EOF unset)
      errno = saved_errno == EAGAIN ? ECONNRESET : saved_errno;
      return -1;
    default:
      broken_ = true;
      error_ = std::string(what) + ": " + drain_error_queue();
      errno = EPROTO;
      return -1;
  }
}

void Stream::shutdown() {
  if (shut_ || !done_ || broken_) return;
  shut_ = true;
  ERR_clear_error();
  SSL_shutdown(ssl_);
  ERR_clear_error();
}

std::string_view Stream::alpn() const {
  const unsigned char* data = nullptr;
  unsigned int length = 0;
  SSL_get0_alpn_selected(ssl_, &data, &length);
  return {reinterpret_cast<const char*>(data), length};
}

std::string_view Stream::cipher() const {
  const char* name = SSL_get_cipher_name(ssl_);
  return name ? name : "";
}

int Stream::cipher_bits() const {
  const SSL_CIPHER* cipher = SSL_get_current_cipher(ssl_);
  return cipher ? SSL_CIPHER_get_bits(cipher, nullptr) : 0;
}

std::string Stream::session_id_hex() const {
  const SSL_SESSION* session = SSL_get0_session(ssl_);
  if (session == nullptr) return {};
  unsigned int length = 0;
  const unsigned char* id = SSL_SESSION_get_id(session, &length);
  static constexpr char kDigits[] = "0123456789ABCDEF";
  std::string hex;
  hex.reserve(length * 2);
  for (unsigned int i = 0; i < length; ++i) {
    hex.push_back(kDigits[id[i] >> 4]);
    hex.push_back(kDigits[id[i] & 0x0F]);
  }
  return hex;
}

std::string Stream::client_certificate_pem() const {
  return client().pem;
}

bool Stream::client_verified() const {
  return SSL_get0_peer_certificate(ssl_) != nullptr && SSL_get_verify_result(ssl_) == X509_V_OK;
}

namespace {

std::string name_text(const X509_NAME* name) {
  std::string text;
  BIO* memory = BIO_new(BIO_s_mem());
  if (memory != nullptr && X509_NAME_print_ex(memory, name, 0, XN_FLAG_RFC2253) >= 0) {
    char* data = nullptr;
    long length = BIO_get_mem_data(memory, &data);
    if (length > 0) text.assign(data, static_cast<size_t>(length));
  }
  BIO_free(memory);
  return text;
}

}  // namespace

const Stream::ClientFacts& Stream::client() const {
  if (client_) return *client_;
  client_ = std::make_unique<ClientFacts>();
  ClientFacts& facts = *client_;
  // Not a peer certificate until the handshake is over (a request cannot come before it).
  X509* certificate = done_ ? SSL_get0_peer_certificate(ssl_) : nullptr;
  if (certificate == nullptr) {
    facts.verify = "NONE";
    return facts;
  }
  // The verify callback accepts every chain (server_context.cc), so the result says why one
  // failed while the handshake went on: the site's verify_client decides per request.
  const long result = SSL_get_verify_result(ssl_);
  facts.verify = result == X509_V_OK
                     ? "SUCCESS"
                     : std::string("FAILED:") + X509_verify_cert_error_string(result);
  facts.subject = name_text(X509_get_subject_name(certificate));
  facts.issuer = name_text(X509_get_issuer_name(certificate));
  if (BIGNUM* serial = ASN1_INTEGER_to_BN(X509_get0_serialNumber(certificate), nullptr)) {
    if (char* hex = BN_bn2hex(serial)) {
      facts.serial = hex;
      OPENSSL_free(hex);
    }
    BN_free(serial);
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (X509_digest(certificate, EVP_sha1(), digest, &length) == 1) {
    static constexpr char kDigits[] = "0123456789abcdef";
    for (unsigned int i = 0; i < length; ++i) {
      facts.fingerprint.push_back(kDigits[digest[i] >> 4]);
      facts.fingerprint.push_back(kDigits[digest[i] & 0x0F]);
    }
  }
  BIO* memory = BIO_new(BIO_s_mem());
  if (memory != nullptr && PEM_write_bio_X509(memory, certificate) == 1) {
    char* data = nullptr;
    long pem_length = BIO_get_mem_data(memory, &data);
    if (pem_length > 0) facts.pem.assign(data, static_cast<size_t>(pem_length));
  }
  BIO_free(memory);
  ERR_clear_error();  // a failure here is this request's, not the next one's on the thread
  return facts;
}

bool Stream::kernel_send() const {
  return BIO_get_ktls_send(SSL_get_wbio(ssl_)) == 1;
}

}  // namespace peregrine::tls
