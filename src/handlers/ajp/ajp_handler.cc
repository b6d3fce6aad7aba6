#include "handlers/ajp/ajp_handler.h"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>

#include "core/address_text.h"
#include "core/log.h"
#include "core/spares.h"
#include "core/strings.h"
#include "handlers/ajp/protocol.h"
#include "http/header_names.h"
#include "upstream/exchange.h"

namespace peregrine::ajp {

namespace {

constexpr size_t kReadChunk = 64 * 1024;
// Client body bytes held for the container beyond what it asked for; the client's body pauses
// above this (the container pulls the body: GET_BODY_CHUNK is the back-pressure).
constexpr size_t kPendingLimit = 128 * 1024;

std::string_view route_suffix(std::string_view session_id) {
  size_t dot = session_id.rfind('.');
  if (dot == std::string_view::npos) return {};
  return session_id.substr(dot + 1);
}

}  // namespace

std::string_view session_route(const Request& request) {
  // A ";jsessionid=ID" path parameter (URL rewriting, no cookies).
  std::string_view path = request.raw_path;
  for (size_t at = path.find(';'); at != std::string_view::npos; at = path.find(';', at + 1)) {
    std::string_view rest = path.substr(at + 1);
    if (rest.size() > 11 && ascii_iequals(rest.substr(0, 11), "jsessionid=")) {
      rest.remove_prefix(11);
      rest = rest.substr(0, rest.find_first_of(";/?"));
      std::string_view route = route_suffix(rest);
      if (!route.empty()) return route;
    }
  }
  for (const Header& h : request.header_list()) {
    if (!ascii_iequals(h.name, "Cookie")) continue;
    std::string_view cookies = h.value;
    while (!cookies.empty()) {
      size_t semi = cookies.find(';');
      std::string_view pair = cookies.substr(0, semi);
      cookies = semi == std::string_view::npos ? std::string_view() : cookies.substr(semi + 1);
      while (!pair.empty() && pair.front() == ' ') pair.remove_prefix(1);
      if (pair.starts_with("JSESSIONID=")) {
        std::string_view route = route_suffix(pair.substr(11));
        if (!route.empty()) return route;
      }
    }
  }
  return {};
}

struct ResponseBody;  // tag: recycled response-body buffers

// One request in flight to the container: the AJP13 codec on the shared upstream exchange, plus
// what only AJP has: the body the container pulls, CPING on a connection that idled long, and
// the container's 403 for a wrong secret.
class AjpExchange final : public upstream::UpstreamExchange,
                          public RecycledAllocation<AjpExchange> {
 public:
  AjpExchange(AjpHandler& handler, const Request& request, handlers::Downstream& downstream)
      : UpstreamExchange("ajp", handler.group_, request, downstream, handler.env_.timers,
                         handler.env_.clock),
        handler_(handler),
        reader_(handler.options_.packet_size) {
    send_with_wait_ = true;  // see its comment: Tomcat, like php-fpm, is slow to answer anyway
  }

  ~AjpExchange() override {
    Spares<std::string, ResponseBody>::give(body_);
    Spares<std::string, ResponseBody>::give(stage_);
  }

  // Returns false when the exchange already ended (answered or failed).
  bool begin();

  // handlers::Exchange
  bool on_body(std::string_view bytes, bool last) override;
  void on_writable() override;

 private:
  // upstream::UpstreamExchange hooks.
  upstream::PickContext pick_context() override {
    return upstream::PickContext{now_ms(), client_ip_, request_.path, preferred_};
  }
  void on_readable() override;
  void on_attempt() override;
  bool hold_request() override;
  void on_active_timeout() override;

  bool encode_head();
  // Moves client body bytes into a packet when the container waits for one; false when the
  // exchange ended or the client's body must pause.
  bool feed_body();
  bool decode(std::string_view& input);
  void start_head();
  void handle_body(std::string_view data);
  bool flush_stage();
  handlers::Downstream::Sent send_stage();
  void complete(bool reuse);
  bool secret_rejected() const;

  AjpHandler& handler_;
  std::string client_ip_;  // ip_hash only: the balancer's key
  int64_t preferred_ = -1;

  // Request side.
  std::string pending_;            // client body bytes the container has not asked for yet
  bool body_last_ = false;         // the client's body ended
  bool first_unprompted_ = false;  // Content-Length > 0: the first packet goes unasked
  size_t wanted_ = 0;              // the container waits for a packet of up to this many bytes
  bool wants_packet_ = false;      // ... (wanted_ may be 0 bytes: the end of the body)
  uint32_t body_packets_ = 0;      // body packets in out_ (a replay sends them again)
  uint32_t skip_requests_ = 0;     // GET_BODY_CHUNKs a replay answered already
  bool client_paused_ = false;     // on_body() returned false because pending_ is full
  bool cping_pending_ = false;     // CPING sent on a connection that idled long; waiting for CPONG

  // Response side.
  std::string leftover_;  // bytes read but not decoded because the client was full
  ResponseReader reader_;
  int64_t content_length_ = -1;  // the container's Content-Length
  uint64_t body_received_ = 0;
  bool streaming_ = false;
  bool head_sent_ = false;
  bool client_full_ = false;
  std::string body_;   // buffered response body (up to ajp_buffer)
  std::string stage_;  // streamed body bytes of the current read, not sent yet
};

bool AjpExchange::begin() {
  if (group_config().balance == config::Balance::kIpHash)
    client_ip_ = AddressText(request_.peer).ip_view();
  std::string_view route = session_route(request_);
  if (!route.empty()) {
    const auto& servers = group_config().servers;
    for (size_t i = 0; i < servers.size(); ++i)
      if (servers[i].route == route) preferred_ = static_cast<int64_t>(i);
  }
  if (!encode_head()) return false;
  if (!request_.has_body()) {
    request_done_ = true;
    body_last_ = true;  // a servlet that reads anyway gets the empty packet: end of body
  } else if (!request_.chunked && request_.content_length > 0) {
    first_unprompted_ = true;
    wants_packet_ = true;
    wanted_ = max_body_chunk(handler_.options_.packet_size);
  }
  return start();
}

bool AjpExchange::encode_head() {
  const Request& r = request_;
  std::vector<Header>& headers = handler_.headers_;
  headers.clear();
  for (const Header& h : r.header_list()) {
    // Hop-by-hop fields are ours, Transfer-Encoding among them: the body arrives de-chunked.
    if (http::is_hop_by_hop(h.name)) continue;
    headers.push_back(h);
  }
  ForwardRequest f;
  f.method = r.method_text;
  f.protocol = r.version_major == 2 ? "HTTP/2.0" : r.version_minor == 0 ? "HTTP/1.0" : "HTTP/1.1";
  f.uri = r.raw_path.empty() ? r.path : r.raw_path;
  f.query = r.query;
  AddressText peer(r.peer);
  f.remote_addr = peer.ip_view();
  f.remote_port = peer.port_view();
  AddressText local(r.local);
  std::string_view host = r.host;
  if (!host.empty() && host.front() == '[') {
    host = host.substr(0, host.find(']') + 1);
  } else if (size_t colon = host.rfind(':'); colon != std::string_view::npos) {
    host = host.substr(0, colon);
  }
  if (host.empty() && !handler_.site_.hosts.empty()) host = handler_.site_.hosts.front();
  if (host.empty()) host = local.ip_view();
  f.server_name = host;
  uint16_t port = 0;
  std::string_view port_text = local.port_view();
  std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  f.server_port = port;
  f.is_ssl = r.secure;
  std::string session_id, certificate;  // outlive the encoding below
  if (r.tls != nullptr) {  // mod_jk's SSL attributes; none can come from the client's headers
    f.ssl_cipher = r.tls->cipher();
    f.ssl_key_size = r.tls->cipher_bits();
    f.ssl_protocol = r.tls->version();
    session_id = r.tls->session_id_hex();
    f.ssl_session = session_id;
    certificate = r.tls->client_certificate_pem();
    f.ssl_cert = certificate;
  }
  if (!r.remote_user.empty()) {  // basic auth accepted it: getRemoteUser(), as mod_jk passes it
    f.remote_user = r.remote_user;
    f.auth_type = "Basic";
  }
  f.headers = headers;
  f.drop_content_length = r.chunked;  // Transfer-Encoding wins (CVE-2022-26377)
  f.secret = handler_.options_.secret;
  std::string error;
  out_.reserve(1024);
  if (encode_forward_request(f, handler_.options_.packet_size, out_, &error)) return true;
  LOG_WARN(
      "ajp route to group \"%s\": cannot forward \"%.*s %.*s\": %s: 431 (raise "
      "ajp_packet_size and the connector's packetSize)",
      group_config().name.c_str(), static_cast<int>(r.method_text.size()), r.method_text.data(),
      static_cast<int>(r.target.size()), r.target.data(), error.c_str());
  phase_ = Phase::kDone;
  downstream_.fail(431);
  end();
  return false;
}

void AjpExchange::on_attempt() {
  // A retry reads a new response from its start (the client saw nothing of the last one).
  if (got_byte_ || reader_.head_done() || reader_.ended()) {
    reader_.reset();
    response_.clear();
    body_.clear();
    stage_.clear();
    leftover_.clear();
    content_length_ = -1;
    body_received_ = 0;
    streaming_ = head_sent_ = client_full_ = false;
  }
  cping_pending_ = false;
  // out_ goes again from its start: the body packets in it answer the new container's first
  // requests for the body.
  skip_requests_ = body_packets_ > 0 ? body_packets_ - 1 : 0;
  if (body_packets_ == 0 && first_unprompted_) {
    wants_packet_ = true;
    wanted_ = max_body_chunk(handler_.options_.packet_size);
  } else if (body_packets_ > 0) {
    wants_packet_ = false;
  }
}

bool AjpExchange::hold_request() {
  const int64_t idle_limit = handler_.options_.cping_after.count();
  if (idle_limit <= 0 || !conn_->reused() || now_ms() - conn_->idle_since_ms() < idle_limit)
    return false;
  // The connection idled long: a firewall may have dropped it, or the container may hang.
  // Ask before the request goes, so a dead connection costs a fresh one, not a failed request.
  LOG_DEBUG("ajp upstream %s: CPING on a connection idle for %lld ms", server().address.c_str(),
            static_cast<long long>(now_ms() - conn_->idle_since_ms()));
  std::string_view ping = cping_packet();
  ssize_t n = ::send(conn_->fd(), ping.data(), ping.size(), MSG_NOSIGNAL);
  if (n != static_cast<ssize_t>(ping.size())) {
    if (!retry_on_fresh_connection()) fail(upstream::Failure::kReset, "CPING failed");
    return true;
  }
  cping_pending_ = true;
  arm_io(handler_.options_.cping_timeout.count());
  return true;
}

void AjpExchange::on_active_timeout() {
  if (cping_pending_) {
    cping_pending_ = false;
    if (retry_on_fresh_connection()) return;
    fail(upstream::Failure::kTimeout, "no CPONG in time");
    return;
  }
  UpstreamExchange::on_active_timeout();
}

bool AjpExchange::on_body(std::string_view bytes, bool last) {
  if (phase_ == Phase::kDone) return false;
  pending_.append(bytes);
  if (last) body_last_ = true;
  if (!feed_body()) return false;
  if (pending_.size() >= kPendingLimit) {
    client_paused_ = true;
    return false;
  }
  return true;
}

bool AjpExchange::feed_body() {
  if (wants_packet_ && (!pending_.empty() || body_last_)) {
    const size_t n = std::min(pending_.size(), wanted_);
    if (n == 0 && !body_last_) return true;
    append_body_packet(out_, std::string_view(pending_).substr(0, n));
    pending_.erase(0, n);
    ++body_packets_;
    wants_packet_ = false;
  }
  if (body_last_ && pending_.empty()) request_done_ = true;
  if (phase_ != Phase::kActive || cping_pending_) return phase_ != Phase::kDone;
  return request_bytes_added();
}

void AjpExchange::on_readable() {
  char* buffer = handler_.read_buffer_.get();
  // Tomcat writes a response in three pieces (SEND_HEADERS, the body, END_RESPONSE): a read
  // right after one that came back short would only say EAGAIN.
  bool drained = false;
  while (phase_ == Phase::kActive && !client_full_) {
    std::string_view input;
    std::string paused;
    if (!leftover_.empty()) {
      paused.swap(leftover_);
      input = paused;
    } else {
      if (drained) return;
      ssize_t n = receive(buffer, kReadChunk);
      if (n == 0) return;
      if (n < 0) {
        const char* detail = errno != 0 ? std::strerror(errno) : "";
        fail(upstream::Failure::kReset,
             reader_.head_done() ? "connection closed mid-response"
                                 : "connection closed before a response",
             detail);
        return;
      }
      drained = drained_by(n, kReadChunk);
      arm_io(cping_pending_ ? handler_.options_.cping_timeout.count()
                            : group_config().read_timeout.count());
      input = std::string_view(buffer, static_cast<size_t>(n));
    }
    const bool go_on = decode(input);
    if (phase_ == Phase::kDone) return;
    if (!flush_stage()) {
      if (phase_ != Phase::kDone && !input.empty()) leftover_.assign(input);
      return;
    }
    if (!go_on) {
      if (phase_ != Phase::kDone && !input.empty()) leftover_.assign(input);
      return;
    }
  }
}

// Decodes the packets in `input`; false when it cannot go on now.
bool AjpExchange::decode(std::string_view& input) {
  // What this connection says after a failure is void: none of it may reach a retry (through
  // leftover_) on another connection.
  auto give_up = [&](upstream::Failure failure, const char* what, const char* detail = "") {
    input = {};
    fail(failure, what, detail);
    return false;
  };
  for (;;) {
    std::string_view data;
    switch (reader_.next(input, data)) {
      case ResponseReader::Event::kNeedMore:
        return true;
      case ResponseReader::Event::kCpong:
        if (!cping_pending_)
          return give_up(upstream::Failure::kMalformed, "CPONG nobody asked for");
        cping_pending_ = false;
        LOG_DEBUG("ajp upstream %s: CPONG", server().address.c_str());
        got_byte_ = false;  // the request has not gone yet: a reset is still a stale connection
        if (!write_out()) {
          input = {};  // a write error may have started a retry
          return false;
        }
        break;
      case ResponseReader::Event::kGetBody: {
        if (skip_requests_ > 0) {
          --skip_requests_;
          break;
        }
        wants_packet_ = true;
        wanted_ = std::min(reader_.requested(), max_body_chunk(handler_.options_.packet_size));
        // One packet at most goes into out_ here; what the container says next must still be
        // decoded now (nothing else would wake us for bytes already read).
        feed_body();
        if (phase_ == Phase::kDone) return false;
        if (client_paused_ && pending_.size() < kPendingLimit) {
          client_paused_ = false;
          downstream_.resume_body();  // may call on_body() (and end us)
          if (phase_ == Phase::kDone) return false;
        }
        break;
      }
      case ResponseReader::Event::kHead:
        start_head();
        break;
      case ResponseReader::Event::kBody:
        if (data.empty()) {
          if (!streaming_) {  // the servlet flushed: what it has written goes out now
            streaming_ = true;
            stage_.swap(body_);
          }
        } else {
          body_received_ += data.size();
          if (content_length_ >= 0 && body_received_ > static_cast<uint64_t>(content_length_)) {
            // Passed on, the surplus would reach the client as the start of its next response.
            return give_up(upstream::Failure::kMalformed, "a body longer than its Content-Length");
          }
          handle_body(data);
        }
        break;
      case ResponseReader::Event::kEnd:
        complete(reader_.reuse() && input.empty());
        return false;
      case ResponseReader::Event::kError:
        return give_up(upstream::Failure::kMalformed,
                       reader_.head_done() ? "malformed packet" : "bad response head",
                       reader_.error().c_str());
    }
    if (phase_ == Phase::kDone) return false;
  }
}

void AjpExchange::start_head() {
  head_received_ = true;
  static const size_t kInline = std::string().capacity();
  if (body_.capacity() <= kInline) Spares<std::string, ResponseBody>::take(body_);
  if (stage_.capacity() <= kInline) Spares<std::string, ResponseBody>::take(stage_);
  response_.set_status(reader_.status());
  for (const ResponseHeader& h : reader_.headers()) {
    if (ascii_iequals(h.name, "Content-Length")) {
      int64_t length = -1;
      auto [end, ec] = std::from_chars(h.value.data(), h.value.data() + h.value.size(), length);
      if (ec == std::errc() && end == h.value.data() + h.value.size() && length >= 0)
        content_length_ = length;
      continue;
    }
    if (http::is_hop_by_hop(h.name) || http::is_framing(h.name)) continue;
    if (!response_.add_header(h.name, h.value))
      LOG_WARN("ajp %s: dropped an invalid response header %.*s", server().address.c_str(),
               static_cast<int>(h.name.size()), h.name.data());
  }
}

void AjpExchange::handle_body(std::string_view data) {
  if (!streaming_) {
    if (body_.size() + data.size() <= handler_.options_.buffer_bytes) {
      body_.append(data);
      return;
    }
    streaming_ = true;  // outgrew the buffer: the head goes out with the first staged bytes
    stage_.swap(body_);
  }
  stage_.append(data);
}

handlers::Downstream::Sent AjpExchange::send_stage() {
  handlers::Downstream::Sent sent = handlers::Downstream::Sent::kMore;
  if (!head_sent_) {
    head_sent_ = true;
    response_.append_borrowed_body(stage_);  // send_head() copies it right after the head
    if (!downstream_.send_head(response_, content_length_))
      sent = handlers::Downstream::Sent::kGone;
  } else if (!stage_.empty()) {
    sent = downstream_.send_body(stage_);
  }
  stage_.clear();
  return sent;
}

bool AjpExchange::flush_stage() {
  if (!streaming_ || (head_sent_ && stage_.empty())) return true;
  switch (send_stage()) {
    case handlers::Downstream::Sent::kMore:
      return true;
    case handlers::Downstream::Sent::kFull:
      client_full_ = true;
      return false;
    case handlers::Downstream::Sent::kGone:
      end();  // closes the connection (mid-response: never pooled) and frees the slot
      return false;
  }
  return true;
}

void AjpExchange::on_writable() {
  if (phase_ != Phase::kActive || !client_full_) return;
  client_full_ = false;
  on_readable();
}

// Tomcat answers a request without the connector's secret (or with a request attribute it does
// not allow) with its 403 status page and closes the connection (END_RESPONSE without reuse); a
// servlet's 403 leaves the connection open. Told apart only once the response has ended, so a
// 403 that streamed (larger than ajp_buffer) is passed on as it is.
bool AjpExchange::secret_rejected() const {
  return reader_.status() == 403 && !reader_.reuse() && !head_sent_;
}

void AjpExchange::complete(bool reuse) {
  disarm_io();
  if (!reader_.head_done()) {
    phase_ = Phase::kDone;
    log_failure("END_RESPONSE without a response head");
    abandon(502);
    return;
  }
  if (secret_rejected()) {
    phase_ = Phase::kDone;
    log_failure("the container refused the request with 403 and closed the connection",
                handler_.options_.secret.empty()
                    ? "it requires a secret: set ajp_secret to the connector's secret"
                    : "ajp_secret does not match the AJP connector's secret (or requiredSecret)");
    abandon(502);
    return;
  }
  // The connection is at a packet boundary and the container has read what we sent.
  const bool clean = reuse && !cping_pending_ && out_sent_ == out_.size();
  phase_ = Phase::kDone;
  complete_upstream(clean);
  if (streaming_) {
    // A slow client's queue still goes out: finish() writes the end behind it.
    if (send_stage() != handlers::Downstream::Sent::kGone) downstream_.finish();
  } else if (request_.is_head() && reader_.status() != 304) {
    // A HEAD answer keeps the length of the body it describes, or announces none when the
    // container did not say (RFC 9110 9.3.2): never the 0 of the empty body it carries.
    if (downstream_.send_head(response_, content_length_ >= 0 ? content_length_ : -1))
      downstream_.finish();
  } else {
    response_.append_borrowed_body(body_);  // respond() copies it out before we end
    downstream_.respond(response_);
  }
  end();
}

// ---------------------------------------------------------------------------------------------

AjpHandler::AjpHandler(const config::Route& route, const config::Site& site,
                       upstream::GroupRuntime& group, const handlers::WorkerEnv& env)
    : options_(*route.options_as<AjpOptions>()), site_(site), group_(group), env_(env) {
  read_buffer_ = std::make_unique_for_overwrite<char[]>(kReadChunk);
  headers_.reserve(kMaxHeaders);
}

AjpHandler::~AjpHandler() = default;

handlers::Exchange* AjpHandler::start(const Request& request, handlers::Downstream& downstream) {
  auto* exchange = new AjpExchange(*this, request, downstream);
  if (!exchange->begin()) return nullptr;  // ended at once; it disposes of itself
  return exchange;
}

}  // namespace peregrine::ajp
