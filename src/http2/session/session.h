// Our own HTTP/2 connection state machine (RFC 9113), server side, driven by
// server/http2_connection.cc. It replaced libnghttp2 there (issue 13): nghttp2 cost more per
// request than H2O's whole request. Pure: bytes in through receive(), events out through an
// Events object, the bytes to send appended by produce(). No socket, no clock: the caller owns
// the I/O and every timeout, so the whole protocol is unit-testable and fuzzable byte by byte.
// The stream limit is enforced here, always with RST_STREAM(REFUSED_STREAM) and never a
// connection error: a refused stream is one the client may safely send again.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "http2/hpack/decoder.h"
#include "http2/hpack/encoder.h"

namespace peregrine::http2::session {

// RFC 9113 7.
enum class ErrorCode : uint32_t {
  kNoError = 0x0,
  kProtocolError = 0x1,
  kInternalError = 0x2,
  kFlowControlError = 0x3,
  kSettingsTimeout = 0x4,
  kStreamClosed = 0x5,
  kFrameSizeError = 0x6,
  kRefusedStream = 0x7,
  kCancel = 0x8,
  kCompressionError = 0x9,
  kConnectError = 0xa,
  kEnhanceYourCalm = 0xb,
  kInadequateSecurity = 0xc,
  kHttp11Required = 0xd,
};

struct Options {
  uint32_t max_concurrent_streams = 128;  // REFUSED_STREAM beyond, never a connection error
  uint32_t stream_window = 65535;         // per stream receive window, reopened by consume()
  uint32_t connection_window = 1 << 20;
  uint32_t max_header_list_size = 65536;  // announced; the application answers 431 over it
  // A header block (HEADERS + CONTINUATION bytes, or its decoded list) past this multiple of
  // max_header_list_size ends the connection with ENHANCE_YOUR_CALM: the CONTINUATION flood
  // (CVE-2024-28182) and the HPACK bomb.
  uint32_t header_abuse_factor = 4;
  // Client RST_STREAMs of streams whose head had arrived (Rapid Reset, CVE-2023-44487), and our
  // RST_STREAMs for the client's errors (MadeYouReset, CVE-2025-8671): past budget + one for
  // every two completed responses, GOAWAY(ENHANCE_YOUR_CALM).
  uint32_t reset_budget = 100;
  uint32_t error_budget = 100;
  // Frames the peer makes us queue (SETTINGS and PING acknowledgements, RST_STREAMs) between two
  // produce() calls: a peer that sends them without reading is flooding (CVE-2019-9512/9515).
  uint32_t max_queued_control = 1000;
  // Frames that carry nothing (DATA without bytes or END_STREAM, empty HEADERS or CONTINUATION
  // fragments that do not end the block) cost work and no window: past this budget + completed
  // responses, GOAWAY(ENHANCE_YOUR_CALM) (CVE-2019-9518).
  uint32_t empty_frame_budget = 1000;
};

struct Stream {
  int32_t id = 0;
  void* user = nullptr;  // the application's object for this stream

  // ---- Below: the session's bookkeeping (read-only for the application) ----
  bool head_received = false;  // the request head was passed on (trailers come after)
  bool remote_closed = false;  // END_STREAM received
  bool local_closed = false;   // END_STREAM sent
  bool answered = false;       // submit_response was called
  bool body_active = false;    // a body is pulled through read_body
  bool deferred = false;       // read_body had nothing: waits for resume_data()
  bool closing = false;        // RST_STREAM queued: on_stream_close at the next produce()
  bool closed = false;         // on_stream_close was called
  bool counted_reset = false;  // a client RST after the head counts toward the budget
  ErrorCode close_code = ErrorCode::kNoError;
  int64_t send_window = 0;
  int64_t recv_window = 0;  // bytes the peer may still send
  uint32_t unconsumed = 0;  // received, not yet given back by consume()
  uint32_t consumed = 0;    // given back, not yet announced in a WINDOW_UPDATE
  int64_t content_length = -1;
  uint64_t data_received = 0;
};

class Events {
 public:
  virtual ~Events() = default;
  // A HEADERS frame opens stream `s`; fields follow. The application may set s.user.
  virtual void on_stream_begin(Stream& s) {}
  // One decoded field of the head (or of the trailers when `trailers`); the views last for the
  // call. Return false when the field makes the request malformed: the stream is reset
  // (PROTOCOL_ERROR) once the block is decoded. Field syntax (RFC 9113 8.2.1: lower-case names,
  // no control characters, no connection-specific fields but "te: trailers", no pseudo-headers in
  // trailers) and the request's pseudo-headers (RFC 9113 8.3.1: the four defined ones, first,
  // once each, the required ones present) are checked before and after; what the values mean
  // stays RequestHeadBuilder's.
  virtual bool on_field(Stream& s, std::string_view name, std::string_view value,
                        bool trailers) = 0;
  // The head (or trailers) is complete. `end_stream`: no body follows.
  virtual void on_headers(Stream& s, bool end_stream, bool trailers) = 0;
  // The session's own checks found the head (or trailers) malformed: the stream is about to be
  // reset with PROTOCOL_ERROR (on_stream_close follows). For the log; `why` is a static string.
  // A refusal of on_field() is the application's own and is not reported here.
  virtual void on_malformed(Stream& s, const char* why) {}
  // Request body bytes (padding removed), then end_stream (possibly with no bytes). Each byte
  // counts against the windows until consume() gives it back.
  virtual void on_data(Stream& s, std::string_view bytes, bool end_stream) = 0;
  // The stream is gone: s.user must be detached. After this call the Stream is reused.
  virtual void on_stream_close(Stream& s, ErrorCode code) = 0;
  // The response's last frame (END_STREAM) is queued: during produce() for a body, inside
  // submit_response() for a head alone. The application may submit frames from here.
  virtual void on_response_complete(Stream& s) {}
  // Appends at most `max` body bytes to `out` and sets `last` with the final ones. Appending
  // nothing without `last` defers the stream until resume_data(). Must not call the session.
  virtual void read_body(Stream& s, std::string& out, size_t max, bool& last) = 0;
  virtual void on_settings_ack() {}
  virtual void on_goaway(int32_t last_stream_id, ErrorCode code) {}
  // A connection error ended the session (ours to send with GOAWAY, or the peer's behaviour):
  // for the log. `why` is a static string.
  virtual void on_connection_error(ErrorCode code, const char* why) {}
};

class Session {
 public:
  Session(Events& events, const Options& options);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Takes bytes from the client (the preface first). Returns false on a connection error: the
  // GOAWAY is queued (produce() it, then close); error() says which.
  bool receive(std::string_view bytes);

  // Appends every frame that is ready (our SETTINGS first, control frames, headers, then DATA
  // while windows and bodies allow) to `out`, up to about `limit` bytes of DATA.
  void produce(std::string& out, size_t limit = 64 * 1024);

  struct Header {
    std::string_view name;  // lower case
    std::string_view value;
    bool sensitive = false;  // never indexed (RFC 7541 7.1.3)
  };
  // HEADERS (+ CONTINUATION) for stream `id`; `has_body`: DATA follows through read_body, else
  // the stream ends with the head. False when the stream cannot take a response.
  // `key`, when not empty, names `fields` for remembers_response(): the caller promises that
  // equal keys come with equal fields.
  bool submit_response(int32_t id, std::span<const Header> fields, bool has_body,
                       std::string_view key = {});
  // Whether the last response submitted with `key` left the HPACK table as it was, and nothing
  // has changed it since: then its header block encodes to the same bytes again, and
  // submit_remembered_response() sends them without building or encoding the fields. Most
  // responses on a connection repeat the head before them (the date changes once a second).
  bool remembers_response(std::string_view key) const {
    return !remembered_key_.empty() && encoder_.version() == remembered_version_ &&
           remembered_key_ == key;
  }
  // submit_response() with the remembered block; only after remembers_response() said true.
  bool submit_remembered_response(int32_t id, bool has_body);
  // A deferred body has bytes again.
  void resume_data(int32_t id);
  // RST_STREAM; the stream closes (on_stream_close) at the next produce(). `peer_fault`: the
  // client's error, counted against the error budget (MadeYouReset).
  void submit_rst_stream(int32_t id, ErrorCode code, bool peer_fault = false);
  // GOAWAY naming `last_stream_id` (negative: the last stream processed). NO_ERROR is a
  // graceful stop (streams up to that id finish); another code ends the session.
  void submit_goaway(ErrorCode code, int32_t last_stream_id = -1);
  // The application took `n` bytes of stream `id`'s body: the windows reopen by that much
  // (WINDOW_UPDATE once half a window is owed). Nothing after the stream closed: what it had
  // not given back was released then.
  void consume(int32_t id, size_t n);

  Stream* find(int32_t id);
  bool want_read() const { return !terminated_; }
  bool want_write() const;
  bool terminated() const { return terminated_; }  // a connection error or fatal GOAWAY queued
  ErrorCode error() const { return error_; }
  // The last stream passed to the application (GOAWAY's default last id).
  int32_t last_stream_id() const { return last_processed_; }
  bool settings_acked() const { return settings_acked_; }
  bool goaway_received() const { return goaway_received_; }
  uint32_t live_streams() const { return static_cast<uint32_t>(live_.size()); }

  // Counters the defences use.
  uint32_t client_resets() const { return client_resets_; }
  uint32_t errors_sent() const { return errors_sent_; }
  uint64_t completed() const { return completed_; }

 private:
  enum class Phase { kPreface, kFrameHeader, kPayload };
  struct FrameHeader {
    uint32_t length = 0;
    uint8_t type = 0;
    uint8_t flags = 0;
    int32_t stream = 0;
  };

  bool process_frame(const FrameHeader& h, std::string_view payload);
  bool on_data_frame(const FrameHeader& h, std::string_view payload);
  bool on_headers_frame(const FrameHeader& h, std::string_view payload);
  bool on_continuation(const FrameHeader& h, std::string_view payload);
  bool on_header_block(int32_t id, std::string_view block, bool end_stream);
  bool on_settings(const FrameHeader& h, std::string_view payload);
  bool on_window_update(const FrameHeader& h, std::string_view payload);
  bool on_rst_stream(const FrameHeader& h, std::string_view payload);
  bool discard_block(std::string_view block);

  bool connection_error(ErrorCode code, const char* why);
  bool calm_down(const char* why);
  // RST_STREAM for the peer's error (counted); false when the budget ends the connection.
  bool stream_error(int32_t id, ErrorCode code);
  bool count_control();
  bool count_empty();
  void queue_rst(int32_t id, ErrorCode code);
  void write_frame_header(std::string& out, uint32_t length, uint8_t type, uint8_t flags,
                          int32_t stream);
  void write_window_update(std::string& out, int32_t stream, uint32_t increment);

  // RFC 9113 5.1: what a frame on a stream that is no longer live meets depends on how the
  // stream ended. A short memory of the last closes and of ids skipped (implicitly closed,
  // 5.1.1): a stream forgotten, or one we reset (whose frames in flight must be ignored), is not
  // in it, and its frames are dropped as before.
  enum class Closed : uint8_t {
    kUnknown,      // ours to ignore: we reset it, or it is too old to remember
    kEnded,        // the client had sent END_STREAM: anything more is STREAM_CLOSED (5.1)
    kResetByPeer,  // the client reset it: a stream error STREAM_CLOSED (5.1)
    kSkipped,      // never opened, a higher id was used first: PROTOCOL_ERROR (5.1.1)
  };
  void remember_closed(int32_t first, int32_t last, Closed how);
  Closed closed_as(int32_t id) const;
  // A new client stream id: the ids skipped below it are remembered as closed.
  void advance_last_stream(int32_t id);
  Stream* open_stream(int32_t id);
  void close_stream(Stream& s, ErrorCode code);  // on_stream_close now
  void recycle_closed();
  void end_local(Stream& s, std::string& out);  // END_STREAM went out
  Stream* answerable(int32_t id);
  // The header block written after the HEADERS frame header at `at`, split into CONTINUATION
  // frames if the peer needs smaller ones; then the stream goes on to its body or ends.
  void finish_response(Stream& s, size_t at, bool has_body);
  bool produce_data(std::string& out, size_t limit);

  Events& events_;
  Options options_;
  hpack::Decoder decoder_;
  hpack::Encoder encoder_;

  // Input.
  Phase phase_ = Phase::kPreface;
  size_t preface_at_ = 0;
  bool first_frame_ = true;  // must be SETTINGS
  FrameHeader header_;
  std::string partial_;  // an incomplete frame header or payload across receive() calls
  // A header block waiting for CONTINUATION: its stream, END_STREAM, and the bytes so far.
  int32_t continuation_stream_ = 0;
  bool continuation_end_stream_ = false;
  std::string block_;

  // Output.
  std::string out_;             // frames in submission order (control, HEADERS, RST_STREAM, GOAWAY)
  std::string remembered_key_;  // see remembers_response()
  std::string remembered_block_;
  uint64_t remembered_version_ = 0;
  uint32_t queued_control_ = 0;
  size_t round_robin_ = 0;

  // Streams.
  std::vector<Stream*> live_;     // open or half-closed, plus those closing
  std::vector<Stream*> retired_;  // closed during this call: reused when it returns
  int32_t last_stream_id_ = 0;    // the highest client stream id seen (above it: idle)
  int32_t last_processed_ = 0;    // the highest one opened for the application
  int32_t goaway_last_ = 0x7fffffff;
  struct ClosedIds {
    int32_t first = 0;
    int32_t last = -1;
    Closed how = Closed::kUnknown;
  };
  // Enough for every stream a client may have open at once (128 by default) to close between
  // its frames in flight and their arrival, in the common case of one entry a stream.
  static constexpr size_t kClosedMemory = 64;
  ClosedIds closed_[kClosedMemory];
  size_t closed_next_ = 0;

  // Settings.
  uint32_t peer_max_frame_size_ = 16384;
  uint32_t peer_initial_window_ = 65535;
  bool settings_acked_ = false;

  // Connection flow control.
  int64_t send_window_ = 65535;
  int64_t recv_window_;  // bytes the peer may still send on the connection
  uint32_t conn_unconsumed_ = 0;
  uint32_t conn_consumed_ = 0;

  bool terminated_ = false;
  bool goaway_sent_ = false;
  bool goaway_received_ = false;
  ErrorCode error_ = ErrorCode::kNoError;
  uint32_t client_resets_ = 0;
  uint32_t errors_sent_ = 0;
  uint32_t empty_frames_ = 0;
  uint64_t completed_ = 0;
};

}  // namespace peregrine::http2::session
