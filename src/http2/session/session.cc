#include "http2/session/session.h"

#include <algorithm>
#include <cstring>

#include "core/spares.h"
#include "http2/headers.h"

namespace peregrine::http2::session {

namespace {

constexpr std::string_view kPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
constexpr size_t kFrameHeaderSize = 9;
constexpr uint32_t kOurMaxFrameSize = 16384;  // we never announce more
constexpr int64_t kMaxWindow = 0x7fffffff;
constexpr size_t kSpareStreams = 2048;

enum FrameType : uint8_t {
  kData = 0x0,
  kHeaders = 0x1,
  kPriority = 0x2,
  kRstStream = 0x3,
  kSettings = 0x4,
  kPushPromise = 0x5,
  kPing = 0x6,
  kGoaway = 0x7,
  kWindowUpdate = 0x8,
  kContinuation = 0x9,
};

enum Flag : uint8_t {
  kEndStream = 0x1,
  kAck = 0x1,
  kEndHeaders = 0x4,
  kPadded = 0x8,
  kPriorityFlag = 0x20,
};

enum SettingId : uint16_t {
  kHeaderTableSize = 0x1,
  kEnablePush = 0x2,
  kMaxConcurrentStreams = 0x3,
  kInitialWindowSize = 0x4,
  kMaxFrameSize = 0x5,
  kMaxHeaderListSize = 0x6,
  kNoRfc7540Priorities = 0x9,
};

uint32_t read32(const char* p) {
  const auto* u = reinterpret_cast<const uint8_t*>(p);
  return uint32_t{u[0]} << 24 | uint32_t{u[1]} << 16 | uint32_t{u[2]} << 8 | u[3];
}

void put32(std::string& out, uint32_t v) {
  const char bytes[4] = {static_cast<char>(v >> 24), static_cast<char>(v >> 16),
                         static_cast<char>(v >> 8), static_cast<char>(v)};
  out.append(bytes, 4);
}

void put_setting(std::string& out, uint16_t id, uint32_t value) {
  out.push_back(static_cast<char>(id >> 8));
  out.push_back(static_cast<char>(id));
  put32(out, value);
}

void patch_length(std::string& out, size_t header_at, uint32_t length) {
  out[header_at] = static_cast<char>(length >> 16);
  out[header_at + 1] = static_cast<char>(length >> 8);
  out[header_at + 2] = static_cast<char>(length);
}

// RFC 9113 8.3.1: a request's pseudo-headers come first, each once, only the four defined ones
// (we do not offer extended CONNECT, so no :protocol); :method always, and :scheme and a
// nonempty :path unless the method is CONNECT, which has :authority and neither of them (8.5).
class PseudoHeaders {
 public:
  bool add(std::string_view name, std::string_view value) {
    if (name.front() != ':') {
      regular_seen_ = true;
      return true;
    }
    if (regular_seen_) return false;
    unsigned bit = 0;
    if (name == ":method") {
      bit = kMethod;
      connect_ = value == "CONNECT";
    } else if (name == ":scheme") {
      bit = kScheme;
    } else if (name == ":path") {
      bit = kPath;
      if (value.empty()) return false;
    } else if (name == ":authority") {
      bit = kAuthority;
    }
    if (bit == 0 || (seen_ & bit)) return false;
    seen_ |= bit;
    return true;
  }
  bool complete() const {
    if (connect_) return seen_ == (kMethod | kAuthority);
    return (seen_ & (kMethod | kScheme | kPath)) == (kMethod | kScheme | kPath);
  }

 private:
  enum : unsigned { kMethod = 1, kScheme = 2, kPath = 4, kAuthority = 8 };
  unsigned seen_ = 0;
  bool regular_seen_ = false;
  bool connect_ = false;
};

// A content-length of digits only (RequestHeadBuilder answers 400 for the others); -1 if not.
int64_t parse_length(std::string_view value) {
  if (value.empty() || value.size() > 18) return -1;
  int64_t n = 0;
  for (char c : value) {
    if (c < '0' || c > '9') return -1;
    n = n * 10 + (c - '0');
  }
  return n;
}

// Stream objects are reused per thread, as the connection's own stream objects are.
struct SpareStreams {
  std::vector<Stream*> spare;
  ~SpareStreams() {
    for (Stream* s : spare) delete s;
  }
};
thread_local SpareStreams spare_streams;

}  // namespace

Session::Session(Events& events, const Options& options)
    : events_(events),
      options_(options),
      decoder_(4096, size_t{options.max_header_list_size} * options.header_abuse_factor),
      encoder_(4096),
      recv_window_(options.connection_window) {
  // Our SETTINGS open the output (RFC 9113 3.4), then the connection window beyond the default.
  const size_t at = out_.size();
  write_frame_header(out_, 0, kSettings, 0, 0);
  put_setting(out_, kMaxConcurrentStreams, options_.max_concurrent_streams);
  put_setting(out_, kInitialWindowSize, options_.stream_window);
  put_setting(out_, kMaxHeaderListSize, options_.max_header_list_size);
  put_setting(out_, kEnablePush, 0);
  // RFC 9218: no priority tree is kept; PRIORITY frames are read and ignored.
  put_setting(out_, kNoRfc7540Priorities, 1);
  patch_length(out_, at, static_cast<uint32_t>(out_.size() - at - kFrameHeaderSize));
  if (options_.connection_window > 65535)
    write_window_update(out_, 0, options_.connection_window - 65535);
  else
    recv_window_ = 65535;
}

Session::~Session() {
  for (Stream* s : live_) delete s;
  for (Stream* s : retired_) delete s;
}

// ---- Input -------------------------------------------------------------------------------------

bool Session::receive(std::string_view bytes) {
  if (terminated_) return false;
  const char* p = bytes.data();
  const char* end = p + bytes.size();
  bool ok = true;
  // An event may end the session (submit_goaway with an error): nothing more is read then.
  while (ok && !terminated_ && p < end) {
    if (phase_ == Phase::kPreface) {
      const size_t n = std::min<size_t>(end - p, kPreface.size() - preface_at_);
      if (std::memcmp(p, kPreface.data() + preface_at_, n) != 0) {
        ok = connection_error(ErrorCode::kProtocolError, "bad client preface");
        break;
      }
      preface_at_ += n;
      p += n;
      if (preface_at_ == kPreface.size()) phase_ = Phase::kFrameHeader;
      continue;
    }
    if (phase_ == Phase::kFrameHeader) {
      const char* h;
      if (partial_.empty() && end - p >= static_cast<ptrdiff_t>(kFrameHeaderSize)) {
        h = p;
        p += kFrameHeaderSize;
      } else {
        const size_t n = std::min<size_t>(end - p, kFrameHeaderSize - partial_.size());
        partial_.append(p, n);
        p += n;
        if (partial_.size() < kFrameHeaderSize) break;
        h = partial_.data();
      }
      const auto* u = reinterpret_cast<const uint8_t*>(h);
      header_.length = uint32_t{u[0]} << 16 | uint32_t{u[1]} << 8 | u[2];
      header_.type = u[3];
      header_.flags = u[4];
      header_.stream = static_cast<int32_t>(read32(h + 5) & 0x7fffffff);
      partial_.clear();
      if (header_.length > kOurMaxFrameSize) {
        ok = connection_error(ErrorCode::kFrameSizeError,
                              "frame larger than SETTINGS_MAX_FRAME_SIZE");
        break;
      }
      if (first_frame_ && (header_.type != kSettings || (header_.flags & kAck))) {
        ok = connection_error(ErrorCode::kProtocolError, "the preface is not followed by SETTINGS");
        break;
      }
      first_frame_ = false;
      phase_ = Phase::kPayload;
    }
    // Payload: straight from the input when it is all there, else gathered in partial_.
    std::string_view payload;
    if (partial_.empty() && static_cast<size_t>(end - p) >= header_.length) {
      payload = {p, header_.length};
      p += header_.length;
    } else {
      const size_t n = std::min<size_t>(end - p, header_.length - partial_.size());
      partial_.append(p, n);
      p += n;
      if (partial_.size() < header_.length) break;
      payload = partial_;
    }
    phase_ = Phase::kFrameHeader;
    ok = process_frame(header_, payload);
    partial_.clear();
  }
  recycle_closed();
  return ok && !terminated_;
}

bool Session::process_frame(const FrameHeader& h, std::string_view payload) {
  if (continuation_stream_ != 0 && h.type != kContinuation)
    return connection_error(ErrorCode::kProtocolError, "a header block is cut by another frame");
  switch (h.type) {
    case kData:
      return on_data_frame(h, payload);
    case kHeaders:
      return on_headers_frame(h, payload);
    case kContinuation:
      return on_continuation(h, payload);
    case kPriority: {
      if (h.stream == 0) return connection_error(ErrorCode::kProtocolError, "PRIORITY on stream 0");
      // RFC 9113 5.3.2 / 6.3: read and ignored, but still checked: a bad size or a stream that
      // depends on itself is a stream error, in any state (PRIORITY may come on a closed
      // stream too). On an idle stream there is no stream to reset (an RST_STREAM on an idle
      // stream is itself a connection error for the client, 5.1), so the connection ends
      // instead, as RFC 9113 5.4 allows for any stream error.
      const bool idle = h.stream > last_stream_id_;
      if (payload.size() != 5) {
        if (idle) return connection_error(ErrorCode::kFrameSizeError, "PRIORITY size");
        return stream_error(h.stream, ErrorCode::kFrameSizeError);
      }
      if (static_cast<int32_t>(read32(payload.data()) & 0x7fffffff) == h.stream) {
        if (idle) return connection_error(ErrorCode::kProtocolError, "stream depends on itself");
        return stream_error(h.stream, ErrorCode::kProtocolError);
      }
      return true;
    }
    case kRstStream:
      return on_rst_stream(h, payload);
    case kSettings:
      return on_settings(h, payload);
    case kPushPromise:
      return connection_error(ErrorCode::kProtocolError, "PUSH_PROMISE from a client");
    case kPing:
      if (h.stream != 0) return connection_error(ErrorCode::kProtocolError, "PING on a stream");
      if (payload.size() != 8) return connection_error(ErrorCode::kFrameSizeError, "PING size");
      if (h.flags & kAck) return true;
      write_frame_header(out_, 8, kPing, kAck, 0);
      out_.append(payload);
      return count_control();
    case kGoaway: {
      if (h.stream != 0) return connection_error(ErrorCode::kProtocolError, "GOAWAY on a stream");
      if (payload.size() < 8) return connection_error(ErrorCode::kFrameSizeError, "GOAWAY size");
      goaway_received_ = true;
      events_.on_goaway(static_cast<int32_t>(read32(payload.data()) & 0x7fffffff),
                        static_cast<ErrorCode>(read32(payload.data() + 4)));
      return true;
    }
    case kWindowUpdate:
      return on_window_update(h, payload);
    default:
      return true;  // RFC 9113 5.5: unknown frame types are ignored
  }
}

bool Session::on_data_frame(const FrameHeader& h, std::string_view payload) {
  if (h.stream == 0) return connection_error(ErrorCode::kProtocolError, "DATA on stream 0");
  if (h.stream > last_stream_id_)
    return connection_error(ErrorCode::kProtocolError, "DATA on an idle stream");
  // Flow control counts the whole payload, padding included (RFC 9113 6.9.1).
  const uint32_t length = static_cast<uint32_t>(payload.size());
  if (length > recv_window_)
    return connection_error(ErrorCode::kFlowControlError, "DATA past the connection window");
  recv_window_ -= length;
  size_t pad = 0;
  if (h.flags & kPadded) {
    if (payload.empty()) return connection_error(ErrorCode::kFrameSizeError, "DATA pad length");
    pad = static_cast<uint8_t>(payload[0]);
    if (pad >= payload.size())
      return connection_error(ErrorCode::kProtocolError, "DATA padding too long");
    payload = payload.substr(1, payload.size() - 1 - pad);
  }
  const uint32_t data = static_cast<uint32_t>(payload.size());
  Stream* s = find(h.stream);
  if (!s || s->closing) {
    // A stream closed (or refused, or being reset): the bytes are dropped, and given back to the
    // connection window at once.
    conn_unconsumed_ += length;
    consume(0, length);
    switch (s ? Closed::kUnknown : closed_as(h.stream)) {
      case Closed::kEnded:
      case Closed::kSkipped:
        // RFC 9113 5.1: the client had ended the stream (or never opened it): no frame of it
        // can be in flight.
        return connection_error(ErrorCode::kStreamClosed, "DATA on a closed stream");
      case Closed::kResetByPeer:
        return stream_error(h.stream, ErrorCode::kStreamClosed);
      case Closed::kUnknown:
        break;  // in flight when we reset it (5.1: ignored)
    }
    return true;
  }
  if (s->remote_closed || !s->head_received) {
    conn_unconsumed_ += length;
    consume(0, length);
    return stream_error(h.stream, ErrorCode::kStreamClosed);
  }
  if (length > s->recv_window) {
    conn_unconsumed_ += length;
    consume(0, length);
    return stream_error(h.stream, ErrorCode::kFlowControlError);
  }
  s->recv_window -= length;
  // The padding is ours to give back; the data the application gives back through consume().
  conn_unconsumed_ += length;
  s->unconsumed += length;
  if (length != data) consume(h.stream, length - data);
  s->data_received += data;
  const bool end = h.flags & kEndStream;
  if (s->content_length >= 0 &&
      (s->data_received > static_cast<uint64_t>(s->content_length) ||
       (end && s->data_received != static_cast<uint64_t>(s->content_length)))) {
    // RFC 9113 8.1.1: malformed. What was not delivered is released.
    consume(h.stream, data);
    return stream_error(h.stream, ErrorCode::kProtocolError);
  }
  if (end) s->remote_closed = true;
  if (data == 0 && !end) return count_empty();
  events_.on_data(*s, payload, end);
  if (end && s->local_closed && !s->closed && !s->closing) close_stream(*s, ErrorCode::kNoError);
  return !terminated_;
}

bool Session::on_headers_frame(const FrameHeader& h, std::string_view payload) {
  if (h.stream == 0) return connection_error(ErrorCode::kProtocolError, "HEADERS on stream 0");
  size_t pad = 0;
  if (h.flags & kPadded) {
    if (payload.empty()) return connection_error(ErrorCode::kFrameSizeError, "HEADERS pad length");
    pad = static_cast<uint8_t>(payload[0]);
    payload.remove_prefix(1);
  }
  if (h.flags & kPriorityFlag) {
    // RFC 9113 5.3.2: the priority fields are read past; only a self-dependency is an error.
    if (payload.size() < 5)
      return connection_error(ErrorCode::kFrameSizeError, "HEADERS priority fields");
    if (static_cast<int32_t>(read32(payload.data()) & 0x7fffffff) == h.stream) {
      // Still a block the decoder must see, so that its table stays in step.
      if (pad > payload.size() - 5)
        return connection_error(ErrorCode::kProtocolError, "HEADERS padding too long");
      if (!(h.flags & kEndHeaders))
        return connection_error(ErrorCode::kProtocolError, "stream depends on itself");
      if (!discard_block(payload.substr(5, payload.size() - 5 - pad))) return false;
      if (h.stream > last_stream_id_) advance_last_stream(h.stream);
      return stream_error(h.stream, ErrorCode::kProtocolError);
    }
    payload.remove_prefix(5);
  }
  if (pad > payload.size())
    return connection_error(ErrorCode::kProtocolError, "HEADERS padding too long");
  payload.remove_suffix(pad);
  const bool end_stream = h.flags & kEndStream;
  if (h.flags & kEndHeaders) return on_header_block(h.stream, payload, end_stream);
  // CONTINUATION follows: the block is gathered, up to the abuse cap.
  if (payload.empty() && !count_empty()) return false;
  continuation_stream_ = h.stream;
  continuation_end_stream_ = end_stream;
  block_.assign(payload);
  if (block_.size() > size_t{options_.max_header_list_size} * options_.header_abuse_factor)
    return calm_down("header block far over max_header_bytes (CONTINUATION flood)");
  return true;
}

bool Session::on_continuation(const FrameHeader& h, std::string_view payload) {
  if (continuation_stream_ == 0 || h.stream != continuation_stream_)
    return connection_error(ErrorCode::kProtocolError, "unexpected CONTINUATION");
  block_.append(payload);
  if (block_.size() > size_t{options_.max_header_list_size} * options_.header_abuse_factor)
    return calm_down("header block far over max_header_bytes (CONTINUATION flood)");
  if (!(h.flags & kEndHeaders)) return !payload.empty() || count_empty();
  const int32_t id = continuation_stream_;
  continuation_stream_ = 0;
  return on_header_block(id, block_, continuation_end_stream_);
}

bool Session::discard_block(std::string_view block) {
  const hpack::DecodeResult r = decoder_.decode(block, [](const hpack::Field&) {});
  if (r == hpack::DecodeResult::kCompressionError)
    return connection_error(ErrorCode::kCompressionError, "HPACK decoding failed");
  return true;
}

bool Session::on_header_block(int32_t id, std::string_view block, bool end_stream) {
  if ((id & 1) == 0) return connection_error(ErrorCode::kProtocolError, "client stream id is even");
  Stream* s = find(id);
  bool trailers = false;
  if (s) {
    if (s->closing) return discard_block(block);
    if (s->remote_closed) {
      if (!discard_block(block)) return false;
      return stream_error(id, ErrorCode::kStreamClosed);
    }
    trailers = true;
  } else if (id <= last_stream_id_) {
    switch (closed_as(id)) {
      case Closed::kSkipped:
        // RFC 9113 5.1.1: ids only go up; this one was passed over, so it is closed.
        return connection_error(ErrorCode::kProtocolError, "stream id lower than the last one");
      case Closed::kEnded:
        // RFC 9113 5.1: after END_STREAM nothing more of the stream can be in flight.
        return connection_error(ErrorCode::kStreamClosed, "HEADERS on a closed stream");
      case Closed::kResetByPeer:
        if (!discard_block(block)) return false;
        return stream_error(id, ErrorCode::kStreamClosed);
      case Closed::kUnknown:
        break;
    }
    // Frames in flight when we reset the stream are expected (5.1); the block is still decoded
    // so that the HPACK table stays in step.
    return discard_block(block);
  } else {
    advance_last_stream(id);
    if (goaway_sent_ && id > goaway_last_) return discard_block(block);  // RFC 9113 6.8
    if (live_.size() >= options_.max_concurrent_streams) {
      if (!discard_block(block)) return false;
      return stream_error(id, ErrorCode::kRefusedStream);  // the client may retry (5.1.2)
    }
    s = open_stream(id);
    events_.on_stream_begin(*s);
  }
  bool malformed = false;
  const char* why = nullptr;  // what the session's own checks found, for the log
  PseudoHeaders pseudo;
  Stream& stream = *s;
  const hpack::DecodeResult r = decoder_.decode(block, [&](const hpack::Field& f) {
    if (malformed || stream.closing || stream.closed) return;
    if (!f.valid) {
      why = "a field name or value that HTTP refuses (upper case, a control byte, edge space)";
    } else if (is_connection_specific(f.name) && !(f.name == "te" && f.value == "trailers")) {
      why = "a connection-specific field";
    } else if (trailers ? f.name.front() == ':' : !pseudo.add(f.name, f.value)) {
      why = "a pseudo-header unknown, repeated, misplaced or in trailers";
    }
    if (why) {
      malformed = true;
      return;
    }
    if (!trailers && f.name == "content-length") stream.content_length = parse_length(f.value);
    if (!events_.on_field(stream, f.name, f.value, trailers)) malformed = true;
  });
  if (r == hpack::DecodeResult::kCompressionError)
    return connection_error(ErrorCode::kCompressionError, "HPACK decoding failed");
  if (r == hpack::DecodeResult::kHeaderListTooLarge)
    return calm_down("header list far over max_header_bytes (HPACK bomb)");
  if (stream.closing || stream.closed) return !terminated_;
  // Trailers must end the stream (RFC 9113 8.1); a head with END_STREAM has no body to match a
  // nonzero content-length.
  if (!malformed) {
    if (trailers && !end_stream)
      why = "trailers without END_STREAM";
    else if (!trailers && !pseudo.complete())
      why = "a required pseudo-header missing";
    else if (!trailers && end_stream && stream.content_length > 0)
      why = "a content-length with no body";
  }
  if (malformed || why) {
    if (why) events_.on_malformed(stream, why);
    return stream_error(id, ErrorCode::kProtocolError);
  }
  if (trailers && stream.content_length >= 0 &&
      stream.data_received != static_cast<uint64_t>(stream.content_length))
    return stream_error(id, ErrorCode::kProtocolError);
  if (!trailers) stream.head_received = true;
  if (end_stream) stream.remote_closed = true;
  events_.on_headers(stream, end_stream, trailers);
  if (end_stream && stream.local_closed && !stream.closed && !stream.closing)
    close_stream(stream, ErrorCode::kNoError);
  return !terminated_;
}

bool Session::on_settings(const FrameHeader& h, std::string_view payload) {
  if (h.stream != 0) return connection_error(ErrorCode::kProtocolError, "SETTINGS on a stream");
  if (h.flags & kAck) {
    if (!payload.empty()) return connection_error(ErrorCode::kFrameSizeError, "SETTINGS ACK size");
    if (!settings_acked_) {
      settings_acked_ = true;
      // Our stream window applies from now on; until the ACK the peer could assume 65,535.
      events_.on_settings_ack();
    }
    return true;
  }
  if (payload.size() % 6 != 0) return connection_error(ErrorCode::kFrameSizeError, "SETTINGS size");
  for (size_t at = 0; at < payload.size(); at += 6) {
    const auto* u = reinterpret_cast<const uint8_t*>(payload.data() + at);
    const uint16_t id = static_cast<uint16_t>(u[0] << 8 | u[1]);
    const uint32_t value = read32(payload.data() + at + 2);
    switch (id) {
      case kHeaderTableSize:
        encoder_.set_peer_max_table_size(value);
        break;
      case kEnablePush:
        if (value > 1) return connection_error(ErrorCode::kProtocolError, "SETTINGS_ENABLE_PUSH");
        break;
      case kInitialWindowSize: {
        if (value > kMaxWindow)
          return connection_error(ErrorCode::kFlowControlError, "SETTINGS_INITIAL_WINDOW_SIZE");
        // RFC 9113 6.9.2: every stream's window moves by the difference.
        const int64_t delta = int64_t{value} - peer_initial_window_;
        for (Stream* s : live_) {
          if (s->send_window + delta > kMaxWindow)
            return connection_error(ErrorCode::kFlowControlError, "stream window overflow");
          s->send_window += delta;
        }
        peer_initial_window_ = value;
        break;
      }
      case kMaxFrameSize:
        if (value < 16384 || value > 16777215)
          return connection_error(ErrorCode::kProtocolError, "SETTINGS_MAX_FRAME_SIZE");
        peer_max_frame_size_ = value;
        break;
      case kNoRfc7540Priorities:
        if (value > 1)
          return connection_error(ErrorCode::kProtocolError, "SETTINGS_NO_RFC7540_PRIORITIES");
        break;
      default:
        break;  // MAX_CONCURRENT_STREAMS (we push nothing), MAX_HEADER_LIST_SIZE, unknown ids
    }
  }
  write_frame_header(out_, 0, kSettings, kAck, 0);
  return count_control();
}

bool Session::on_window_update(const FrameHeader& h, std::string_view payload) {
  if (payload.size() != 4)
    return connection_error(ErrorCode::kFrameSizeError, "WINDOW_UPDATE size");
  const uint32_t increment = read32(payload.data()) & 0x7fffffff;
  if (h.stream == 0) {
    if (increment == 0)
      return connection_error(ErrorCode::kProtocolError, "WINDOW_UPDATE of 0 on the connection");
    if (send_window_ + increment > kMaxWindow)
      return connection_error(ErrorCode::kFlowControlError, "connection window overflow");
    send_window_ += increment;
    return true;
  }
  if (h.stream > last_stream_id_)
    return connection_error(ErrorCode::kProtocolError, "WINDOW_UPDATE on an idle stream");
  Stream* s = find(h.stream);
  if (!s || s->closing) return true;
  if (increment == 0) return stream_error(h.stream, ErrorCode::kProtocolError);
  if (s->send_window + increment > kMaxWindow)
    return stream_error(h.stream, ErrorCode::kFlowControlError);
  s->send_window += increment;
  return true;
}

bool Session::on_rst_stream(const FrameHeader& h, std::string_view payload) {
  if (h.stream == 0) return connection_error(ErrorCode::kProtocolError, "RST_STREAM on stream 0");
  if (payload.size() != 4) return connection_error(ErrorCode::kFrameSizeError, "RST_STREAM size");
  if (h.stream > last_stream_id_)
    return connection_error(ErrorCode::kProtocolError, "RST_STREAM on an idle stream");
  Stream* s = find(h.stream);
  if (!s || s->closed) return true;
  const auto code = static_cast<ErrorCode>(read32(payload.data()));
  // Rapid Reset: a stream whose head arrived cost the application work; resetting it before
  // the answer is complete is what the attack repeats.
  const bool counts = s->head_received && !s->local_closed;
  s->closing = false;
  close_stream(*s, code);
  remember_closed(h.stream, h.stream, Closed::kResetByPeer);
  if (counts && ++client_resets_ > options_.reset_budget + completed_ / 2)
    return calm_down("too many streams reset by the client (rapid reset)");
  return true;
}

// ---- Errors ------------------------------------------------------------------------------------

bool Session::connection_error(ErrorCode code, const char* why) {
  if (terminated_) return false;
  events_.on_connection_error(code, why);
  submit_goaway(code);
  return false;
}

bool Session::calm_down(const char* why) {
  return connection_error(ErrorCode::kEnhanceYourCalm, why);
}

bool Session::stream_error(int32_t id, ErrorCode code) {
  submit_rst_stream(id, code, true);
  return !terminated_;
}

bool Session::count_empty() {
  if (++empty_frames_ > options_.empty_frame_budget + completed_)
    return calm_down("too many frames without content (empty frame flood)");
  return true;
}

bool Session::count_control() {
  if (++queued_control_ > options_.max_queued_control)
    return calm_down("too many control frames queued (SETTINGS or PING flood)");
  return true;
}

void Session::write_frame_header(std::string& out, uint32_t length, uint8_t type, uint8_t flags,
                                 int32_t stream) {
  const char h[kFrameHeaderSize] = {
      static_cast<char>(length >> 16), static_cast<char>(length >> 8),
      static_cast<char>(length),       static_cast<char>(type),
      static_cast<char>(flags),        static_cast<char>(stream >> 24),
      static_cast<char>(stream >> 16), static_cast<char>(stream >> 8),
      static_cast<char>(stream)};
  out.append(h, kFrameHeaderSize);
}

void Session::write_window_update(std::string& out, int32_t stream, uint32_t increment) {
  write_frame_header(out, 4, kWindowUpdate, 0, stream);
  put32(out, increment);
}

void Session::queue_rst(int32_t id, ErrorCode code) {
  write_frame_header(out_, 4, kRstStream, 0, id);
  put32(out_, static_cast<uint32_t>(code));
}

// ---- Application calls -------------------------------------------------------------------------

Stream* Session::answerable(int32_t id) {
  Stream* s = find(id);
  if (!s || s->closing || s->closed || s->answered || terminated_) return nullptr;
  s->answered = true;
  return s;
}

bool Session::submit_response(int32_t id, std::span<const Header> fields, bool has_body,
                              std::string_view key) {
  Stream* s = answerable(id);
  if (!s) return false;
  const size_t at = out_.size();
  write_frame_header(out_, 0, kHeaders, has_body ? kEndHeaders : kEndHeaders | kEndStream, id);
  const uint64_t version = encoder_.version();
  for (const Header& f : fields) encoder_.encode(out_, f.name, f.value, f.sensitive);
  if (!key.empty() && encoder_.version() == version) {
    remembered_key_.assign(key);
    remembered_block_.assign(out_, at + kFrameHeaderSize);
    remembered_version_ = version;
  }
  finish_response(*s, at, has_body);
  return true;
}

bool Session::submit_remembered_response(int32_t id, bool has_body) {
  Stream* s = answerable(id);
  if (!s) return false;
  const size_t at = out_.size();
  write_frame_header(out_, 0, kHeaders, has_body ? kEndHeaders : kEndHeaders | kEndStream, id);
  out_.append(remembered_block_);
  finish_response(*s, at, has_body);
  return true;
}

void Session::finish_response(Stream& s, size_t at, bool has_body) {
  const size_t block = out_.size() - at - kFrameHeaderSize;
  if (block <= peer_max_frame_size_) {
    patch_length(out_, at, static_cast<uint32_t>(block));
  } else {
    // Split into HEADERS + CONTINUATION frames of the peer's maximum size (rare: a large head).
    std::string rest = out_.substr(at + kFrameHeaderSize + peer_max_frame_size_);
    out_.resize(at + kFrameHeaderSize + peer_max_frame_size_);
    patch_length(out_, at, peer_max_frame_size_);
    out_[at + 4] = static_cast<char>(out_[at + 4] & ~kEndHeaders);
    size_t from = 0;
    while (from < rest.size()) {
      const size_t n = std::min<size_t>(rest.size() - from, peer_max_frame_size_);
      write_frame_header(out_, static_cast<uint32_t>(n), kContinuation,
                         from + n == rest.size() ? kEndHeaders : 0, s.id);
      out_.append(rest, from, n);
      from += n;
    }
  }
  if (has_body) {
    s.body_active = true;
    s.deferred = false;
  } else {
    end_local(s, out_);
  }
}

void Session::resume_data(int32_t id) {
  if (Stream* s = find(id)) s->deferred = false;
}

void Session::submit_rst_stream(int32_t id, ErrorCode code, bool peer_fault) {
  Stream* s = find(id);
  if (s && (s->closing || s->closed)) return;
  if (!s && id > last_stream_id_) return;  // an idle stream: nothing to reset
  queue_rst(id, code);
  if (s) {
    s->closing = true;
    s->close_code = code;
    s->body_active = false;
  }
  if (peer_fault) {
    if (!count_control()) return;
    if (++errors_sent_ > options_.error_budget + completed_ / 2)
      calm_down("too many stream errors (provoked resets)");
  }
}

void Session::submit_goaway(ErrorCode code, int32_t last_stream_id) {
  if (terminated_) return;
  if (last_stream_id < 0) last_stream_id = last_processed_;
  // A later GOAWAY may lower the last id, never raise it (RFC 9113 6.8).
  if (goaway_sent_) last_stream_id = std::min(last_stream_id, goaway_last_);
  goaway_sent_ = true;
  goaway_last_ = last_stream_id;
  write_frame_header(out_, 8, kGoaway, 0, 0);
  put32(out_, static_cast<uint32_t>(last_stream_id));
  put32(out_, static_cast<uint32_t>(code));
  if (code != ErrorCode::kNoError) {
    terminated_ = true;
    error_ = code;
  }
}

void Session::consume(int32_t id, size_t n) {
  if (n == 0) return;
  Stream* s = id ? find(id) : nullptr;
  // A closed stream's bytes went back to the connection when it closed (close_stream).
  if (id && !s) return;
  const uint32_t conn = static_cast<uint32_t>(std::min<size_t>(n, conn_unconsumed_));
  conn_unconsumed_ -= conn;
  conn_consumed_ += conn;
  if (conn_consumed_ >= options_.connection_window / 2) {
    write_window_update(out_, 0, conn_consumed_);
    recv_window_ += conn_consumed_;
    conn_consumed_ = 0;
  }
  if (!s) return;
  const uint32_t mine = static_cast<uint32_t>(std::min<size_t>(n, s->unconsumed));
  s->unconsumed -= mine;
  s->consumed += mine;
  // No update for a stream whose request is over or that is being reset: nothing more comes.
  if (s->remote_closed || s->closing) return;
  if (s->consumed >= options_.stream_window / 2) {
    write_window_update(out_, s->id, s->consumed);
    s->recv_window += s->consumed;
    s->consumed = 0;
  }
}

// ---- Streams -----------------------------------------------------------------------------------

Stream* Session::find(int32_t id) {
  for (Stream* s : live_) {
    if (s->id == id) return s;
  }
  return nullptr;
}

void Session::remember_closed(int32_t first, int32_t last, Closed how) {
  closed_[closed_next_] = {first, last, how};
  closed_next_ = (closed_next_ + 1) % kClosedMemory;
}

Session::Closed Session::closed_as(int32_t id) const {
  // Newest first: a stream the client ended and then reset is remembered as reset.
  for (size_t k = 1; k <= kClosedMemory; ++k) {
    const ClosedIds& c = closed_[(closed_next_ + kClosedMemory - k) % kClosedMemory];
    if (id >= c.first && id <= c.last) return c.how;
  }
  return Closed::kUnknown;
}

void Session::advance_last_stream(int32_t id) {
  // id > last_stream_id_ >= 0: the difference cannot overflow, last_stream_id_ + 2 could.
  if (id - last_stream_id_ > 2) remember_closed(last_stream_id_ + 1, id - 1, Closed::kSkipped);
  last_stream_id_ = id;
}

Stream* Session::open_stream(int32_t id) {
  Stream* s;
  std::vector<Stream*>& spare = spare_streams.spare;
  if (!spare.empty()) {
    s = spare.back();
    spare.pop_back();
    *s = Stream{};
  } else {
    s = new Stream;
  }
  s->id = id;
  last_processed_ = id;
  s->send_window = peer_initial_window_;
  // Until our SETTINGS are acknowledged the peer may still assume the default window.
  s->recv_window =
      settings_acked_ ? options_.stream_window : std::max<uint32_t>(options_.stream_window, 65535);
  live_.push_back(s);
  return s;
}

void Session::close_stream(Stream& s, ErrorCode code) {
  if (s.closed) return;
  s.closed = true;
  s.closing = false;
  s.body_active = false;
  // Bytes the application never gave back still count on the connection: released now.
  if (s.unconsumed) {
    const uint32_t n = s.unconsumed;
    s.unconsumed = 0;
    consume(0, n);
  }
  if (s.remote_closed) remember_closed(s.id, s.id, Closed::kEnded);
  events_.on_stream_close(s, code);
  s.user = nullptr;
  auto it = std::find(live_.begin(), live_.end(), &s);
  if (it != live_.end()) {
    *it = live_.back();
    live_.pop_back();
  }
  retired_.push_back(&s);
}

void Session::recycle_closed() {
  for (Stream* s : retired_) {
    if (kRecycleAllocations && spare_streams.spare.size() < kSpareStreams)
      spare_streams.spare.push_back(s);
    else
      delete s;
  }
  retired_.clear();
}

void Session::end_local(Stream& s, std::string& out) {
  s.local_closed = true;
  s.body_active = false;
  ++completed_;
  events_.on_response_complete(s);
  if (s.closed || s.closing) return;
  if (!s.remote_closed) {
    // RFC 9113 8.1: the answer is complete; a request body still coming is not wanted.
    write_frame_header(out, 4, kRstStream, 0, s.id);
    put32(out, static_cast<uint32_t>(ErrorCode::kNoError));
    s.closing = true;
    s.close_code = ErrorCode::kNoError;
    return;
  }
  s.closing = true;  // closed at the end of produce(), after its frames are out
  s.close_code = ErrorCode::kNoError;
}

// ---- Output ------------------------------------------------------------------------------------

bool Session::want_write() const {
  if (!out_.empty()) return true;
  if (terminated_) return false;
  for (const Stream* s : live_) {
    if (s->closing) return true;
    if (s->body_active && !s->deferred && s->send_window > 0 && send_window_ > 0) return true;
  }
  return false;
}

void Session::produce(std::string& out, size_t limit) {
  queued_control_ = 0;
  const size_t start = out.size();
  for (;;) {
    // Queued frames first on every pass: a HEADERS that an event submitted during the last pass
    // (on_response_complete) must precede its stream's DATA.
    out.append(out_);
    out_.clear();
    if (terminated_ || out.size() - start >= limit || !produce_data(out, start + limit)) break;
  }
  // Streams reset or ended: their frames are in `out`, the application hears of it now.
  for (size_t i = 0; i < live_.size();) {
    Stream* s = live_[i];
    if (s->closing) {
      close_stream(*s, s->close_code);  // swaps the last live stream into place i
      continue;
    }
    ++i;
  }
  // on_stream_close may have submitted frames (a GOAWAY once the last stream ends).
  out.append(out_);
  out_.clear();
  recycle_closed();
}

// One pass over the streams with a body to send, one DATA frame each (round robin, so one large
// body does not hold back the others). False when nothing could be sent.
bool Session::produce_data(std::string& out, size_t limit) {
  bool progress = false;
  const size_t count = live_.size();
  for (size_t k = 0; k < count && out.size() < limit; ++k) {
    Stream* s = live_[(round_robin_ + k) % count];
    if (!s->body_active || s->deferred || s->closing) continue;
    const int64_t window = std::min(s->send_window, send_window_);
    size_t max = static_cast<size_t>(std::max<int64_t>(window, 0));
    max = std::min<size_t>(max, peer_max_frame_size_);
    max = std::min<size_t>(max, limit - out.size());
    const size_t at = out.size();
    write_frame_header(out, 0, kData, 0, s->id);
    bool last = false;
    events_.read_body(*s, out, max, last);
    const size_t n = out.size() - at - kFrameHeaderSize;
    if (n == 0 && !last) {
      out.resize(at);
      // No window: wait for WINDOW_UPDATE; no bytes: wait for resume_data().
      if (max != 0) s->deferred = true;
      continue;
    }
    patch_length(out, at, static_cast<uint32_t>(n));
    s->send_window -= static_cast<int64_t>(n);
    send_window_ -= static_cast<int64_t>(n);
    progress = true;
    if (last) {
      out[at + 4] = static_cast<char>(kEndStream);
      end_local(*s, out);
      if (!out_.empty()) break;  // on_response_complete queued frames: produce() sends them now
    }
  }
  if (count) round_robin_ = (round_robin_ + 1) % count;
  return progress;
}

}  // namespace peregrine::http2::session
