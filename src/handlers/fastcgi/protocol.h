// The FastCGI 1.0 wire protocol, as the web-server side of a RESPONDER speaks it: record encoding,
// a resumable record decoder and a parser for the CGI response head the application writes to
// STDOUT. Pure: bytes in, bytes or verdicts out; no I/O, no clocks, no logging. Groundwork for
// the fastcgi handler (issue 3).
//
// Encoding appends to a caller-owned std::string (one buffer per request, reused).
// Decoding never copies STDOUT/STDERR content: it hands out views into the caller's input.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace peregrine::fastcgi {

inline constexpr uint8_t kVersion1 = 1;
inline constexpr size_t kHeaderSize = 8;
inline constexpr size_t kMaxContentLength = 65535;
// Name or value lengths above this cannot be encoded (31-bit length field).
inline constexpr size_t kMaxNameValueLength = 0x7fffffff;

enum class RecordType : uint8_t {
  kBeginRequest = 1,
  kAbortRequest = 2,
  kEndRequest = 3,
  kParams = 4,
  kStdin = 5,
  kStdout = 6,
  kStderr = 7,
  kData = 8,
  kGetValues = 9,
  kGetValuesResult = 10,
  kUnknownType = 11,
};

enum class Role : uint16_t { kResponder = 1, kAuthorizer = 2, kFilter = 3 };

// FCGI_BEGIN_REQUEST flags.
inline constexpr uint8_t kKeepConn = 1;

// FCGI_END_REQUEST protocolStatus.
enum class ProtocolStatus : uint8_t {
  kRequestComplete = 0,
  kCantMpxConn = 1,
  kOverloaded = 2,
  kUnknownRole = 3,
};

struct NameValue {
  std::string_view name;
  std::string_view value;
};

// ---------------------------------------------------------------------------------------------
// Encoding. Every record's content is padded to a multiple of 8 bytes.

// FCGI_BEGIN_REQUEST with FCGI_KEEP_CONN when keep_conn.
void append_begin_request(std::string& out, uint16_t request_id, bool keep_conn,
                          Role role = Role::kResponder);
// FCGI_ABORT_REQUEST (empty content).
void append_abort_request(std::string& out, uint16_t request_id);

// Bytes one name-value pair takes in a PARAMS / GET_VALUES stream.
size_t name_value_size(std::string_view name, std::string_view value);
// Appends one encoded pair, without any record framing: for pairs encoded once and written into
// many PARAMS streams with StreamEncoder::write(). False if a length cannot be encoded.
bool append_name_value(std::string& out, std::string_view name, std::string_view value);

// Writes a byte stream (PARAMS, STDIN, DATA) as records of at most kMaxContentLength content
// bytes. Record headers are patched in place (offsets, so `out` may grow and reallocate meanwhile).
// Never emits an empty record: the empty record terminates a stream (append_stream_end).
class StreamEncoder {
 public:
  StreamEncoder(std::string& out, RecordType type, uint16_t request_id)
      : out_(out), type_(type), request_id_(request_id) {}
  StreamEncoder(const StreamEncoder&) = delete;
  StreamEncoder& operator=(const StreamEncoder&) = delete;
  ~StreamEncoder() { flush(); }

  void write(std::string_view bytes);
  // Appends one name-value pair (1-byte lengths below 128, else 4-byte). A pair may straddle two
  // records, which the protocol allows (PARAMS is a byte stream). False, and nothing written, if
  // a length exceeds kMaxNameValueLength.
  bool add(std::string_view name, std::string_view value);
  // Closes the open record (sets its length and padding). Does not end the stream.
  void flush();

 private:
  void open_record();

  std::string& out_;
  RecordType type_;
  uint16_t request_id_;
  size_t record_start_ = 0;  // offset of the open record's header in out_
  size_t content_ = 0;       // content bytes in the open record
  bool open_ = false;
};

// A request's PARAMS stream, encoded pair by pair into a buffer the handler reuses (so it keeps
// its capacity), then written in one go: a stream that fits one record (nearly every request's,
// a few hundred bytes) is one header, one copy and the padding; only a larger one goes through
// StreamEncoder. Each add() encodes at once (callgrind: gathering views first and encoding them
// in a second pass cost ~2,400 instructions per PHP request, a fifth of the server's user time).
class ParamsBuilder {
 public:
  void clear() { size_ = 0; }
  // NAME=value+value_tail (SCRIPT_FILENAME is the root and the script's name, without first
  // joining them). False, and nothing added, if a length cannot be encoded.
  bool add(std::string_view name, std::string_view value, std::string_view value_tail = {});
  // A request header as CGI names it (RFC 3875 4.1.18): "Accept-Language" is sent as
  // HTTP_ACCEPT_LANGUAGE.
  bool add_header(std::string_view name, std::string_view value);
  // Pairs encoded beforehand with append_name_value (a route's constant parameters).
  void add_encoded(std::string_view pairs);
  // Appends the PARAMS records (not the empty record that ends the stream).
  void write(std::string& out, uint16_t request_id) const;

 private:
  // Room for `n` more bytes at the end; the caller then adds n to size_.
  char* room(size_t n) {
    if (capacity_ - size_ < n) grow(n);
    return bytes_.get() + size_;
  }
  void grow(size_t n);
  std::unique_ptr<char[]> bytes_;  // not zeroed on growth: only what was written is read
  size_t size_ = 0;
  size_t capacity_ = 0;
};

// The empty record that ends a stream (PARAMS, STDIN, DATA).
void append_stream_end(std::string& out, RecordType type, uint16_t request_id);

// All of `params`, then the empty PARAMS record. False if a pair cannot be encoded (then `out` is
// left as it was).
bool append_params(std::string& out, uint16_t request_id, std::span<const NameValue> params);
inline void append_params_end(std::string& out, uint16_t request_id) {
  append_stream_end(out, RecordType::kParams, request_id);
}

// STDIN records carrying `body` (nothing for an empty body); append_stdin_end ends the stream.
void append_stdin(std::string& out, uint16_t request_id, std::string_view body);
inline void append_stdin_end(std::string& out, uint16_t request_id) {
  append_stream_end(out, RecordType::kStdin, request_id);
}

// FCGI_GET_VALUES (request id 0) asking for `names` (values empty), e.g. FCGI_MAX_CONNS.
void append_get_values(std::string& out, std::span<const std::string_view> names);

// ---------------------------------------------------------------------------------------------
// Name-value pairs (GET_VALUES_RESULT content, or a PARAMS stream read back).
class NameValueReader {
 public:
  explicit NameValueReader(std::string_view content) : rest_(content) {}
  // The next pair; false at the end or on a malformed pair (then error() is true).
  bool next(NameValue& pair);
  bool error() const { return error_; }

 private:
  std::string_view rest_;
  bool error_ = false;
};
// True if `content` is a well-formed sequence of pairs.
bool valid_name_values(std::string_view content);

// ---------------------------------------------------------------------------------------------
// Decoding records sent by the application to the web server.

enum class DecodeError : uint8_t {
  kNone = 0,
  kBadVersion,            // version byte is not 1
  kUnknownType,           // type outside 1..11
  kUnexpectedType,        // a known type an application never sends to us (BEGIN_REQUEST...)
  kWrongRequestId,        // STDOUT/STDERR/END_REQUEST for another request id
  kBadManagementId,       // GET_VALUES_RESULT / UNKNOWN_TYPE with a non-zero request id
  kBadEndRequestLength,   // END_REQUEST content length != 8
  kBadUnknownTypeLength,  // UNKNOWN_TYPE content length != 8
  kBadNameValueLength,    // GET_VALUES_RESULT pair lengths overflow the content
};
const char* to_string(DecodeError error);

// What one decode() call produced.
struct Record {
  RecordType type = RecordType::kStdout;
  uint16_t request_id = 0;
  // STDOUT / STDERR: a fragment of the record's content, a view into decode()'s input (a record
  // may come out as several fragments when its bytes arrive split). Empty with end_of_stream set
  // for the empty record that ends the stream.
  // GET_VALUES_RESULT: the whole content (a view into the decoder, valid until the next decode()
  // call), already validated; read it with NameValueReader.
  std::string_view data;
  bool end_of_stream = false;
  // END_REQUEST.
  uint32_t app_status = 0;
  ProtocolStatus protocol_status = ProtocolStatus::kRequestComplete;
  // UNKNOWN_TYPE: the type the application did not understand.
  uint8_t unknown_type = 0;
};

// Resumable decoder for one connection. Feed it bytes as they arrive:
//   while (!in.empty()) {
//     size_t used; auto st = dec.decode(in, used, rec); in.remove_prefix(used);
//     if (st == kRecord) handle(rec); else if (st == kError) fail(dec.error()); else break;
//   }
// kNeedMore means every byte of `in` was consumed (or `in` was empty). kRecord yields one event.
// END_REQUEST, UNKNOWN_TYPE and GET_VALUES_RESULT are reported once their padding is consumed too,
// so after END_REQUEST the decoder is at a record boundary (at_record_boundary()) and the
// connection can carry the next request (reset(next_id)). Errors are sticky until reset().
// Memory: 8 bytes for END_REQUEST/UNKNOWN_TYPE; a buffer of at most one record's content, only
// for GET_VALUES_RESULT. No other allocation.
class Decoder {
 public:
  enum class Status : uint8_t { kNeedMore, kRecord, kError };

  explicit Decoder(uint16_t request_id = 1) : request_id_(request_id) {}
  void reset(uint16_t request_id);

  Status decode(std::string_view in, size_t& consumed, Record& record);

  DecodeError error() const { return error_; }
  bool at_record_boundary() const { return state_ == State::kHeader && header_len_ == 0; }
  uint16_t request_id() const { return request_id_; }

 private:
  enum class State : uint8_t { kHeader, kStreamContent, kBufferedContent, kPadding, kError };
  Status fail(DecodeError e, size_t pos, size_t& consumed);
  bool start_record(size_t pos, size_t& consumed, Status& st);
  void build_control_record(Record& record);

  uint16_t request_id_;
  State state_ = State::kHeader;
  DecodeError error_ = DecodeError::kNone;
  uint8_t header_[kHeaderSize];
  uint8_t header_len_ = 0;
  RecordType type_ = RecordType::kStdout;
  uint16_t record_id_ = 0;
  uint32_t content_left_ = 0;
  uint32_t padding_left_ = 0;
  bool pending_ = false;  // a record to report once its padding is consumed
  uint8_t small_[8];
  uint32_t small_len_ = 0;
  uint32_t content_length_ = 0;
  std::string big_;  // GET_VALUES_RESULT content
};

// ---------------------------------------------------------------------------------------------
// The CGI response head on STDOUT (RFC 3875 6): header lines up to an empty line, lines ending
// in LF or CRLF.

struct CgiHeader {
  std::string_view name;
  std::string_view value;
};

struct CgiHead {
  int status = 200;             // from Status, else 302 for an absolute Location, else 200
  bool has_status = false;      // a Status header was present
  std::string_view reason;      // Status's reason phrase (may be empty)
  std::string_view location;    // empty when absent
  bool local_redirect = false;  // Location is a local path ("/...") and no Status (RFC 3875 6.2.2)
  std::string_view content_type;
  bool has_content_type = false;
  // Every other header in order (Set-Cookie repeats preserved), values trimmed of SP/HTAB.
  std::vector<CgiHeader> headers;
};

enum class CgiError : uint8_t {
  kNone = 0,
  kTooLarge,  // head longer than the limit
  kNul,       // NUL byte
  kBareCr,    // CR not followed by LF
  kObsFold,   // line starts with SP/HTAB
  kMissingColon,
  kBadName,    // empty or non-token header name
  kBadStatus,  // Status not "NNN[ reason]" with NNN in 100..599
  kDuplicate,  // Status, Location or Content-Type twice
  kBadValue,   // control character in a value
};
const char* to_string(CgiError error);

// Resumable: feed STDOUT fragments until kDone; the bytes after the head are the body start.
// A head that arrives in pieces is copied into the parser (bounded by max_head); one that arrives
// whole in one fragment (the usual case) is parsed where it lies. So views in head() are valid
// until reset() or destruction and, when the head came whole, no longer than that fragment.
class CgiHeadParser {
 public:
  enum class Status : uint8_t { kNeedMore, kDone, kError };
  static constexpr size_t kDefaultMaxHead = 64 * 1024;

  explicit CgiHeadParser(size_t max_head = kDefaultMaxHead) : max_head_(max_head) {}
  void reset();

  // Consumes head bytes from `data` (on kDone: up to and including the empty line; the rest of
  // `data` is body). On kNeedMore all of `data` was consumed.
  Status feed(std::string_view data, size_t& consumed);

  const CgiHead& head() const { return head_; }
  CgiError error() const { return error_; }
  bool done() const { return state_ == Status::kDone; }

 private:
  Status fail(CgiError e);
  Status parse(std::string_view head);

  size_t max_head_;
  Status state_ = Status::kNeedMore;
  CgiError error_ = CgiError::kNone;
  std::string buf_;
  size_t line_start_ = 0;  // offset in buf_ of the line being received
  CgiHead head_;
};

// ---------------------------------------------------------------------------------------------
// The response codec: records in, the response's events out, without a socket (the exchange
// feeds it what it reads; tests feed it bytes). STDOUT becomes the CGI head, then body pieces;
// STDERR lines are passed on; END_REQUEST ends it.
//   std::string_view data;
//   for (;;) switch (reader.next(input, data)) {
//     case kHead: reader.head() ...; case kBody: data ...; case kStderr: log data;
//     case kEnd: reader.end_status() ...; case kError: reader.error() ...; case kNeedMore: read
//     more
//   }
// `data` and head() views point into `input` (or into the reader, for pieces that came split);
// they are valid until the next call.
class ResponseReader {
 public:
  enum class Event : uint8_t {
    kNeedMore,  // every byte of `input` was used: feed more
    kHead,      // head() is complete
    kBody,      // `data` is a piece of the body (never empty)
    kStderr,    // `data` is a piece of FCGI_STDERR
    kEnd,       // FCGI_END_REQUEST: end_status(); the bytes after it are left in `input`
    kError,     // malformed records or head: error(); sticky until reset()
  };

  explicit ResponseReader(uint16_t request_id = 1, size_t max_head = CgiHeadParser::kDefaultMaxHead)
      : request_id_(request_id), decoder_(request_id), head_parser_(max_head) {}
  void reset();

  Event next(std::string_view& input, std::string_view& data);

  const CgiHead& head() const { return head_parser_.head(); }
  bool head_done() const { return head_done_; }
  ProtocolStatus end_status() const { return end_status_; }
  const char* error() const { return error_; }
  // After kEnd: the connection may carry the next request.
  bool at_record_boundary() const { return decoder_.at_record_boundary(); }

 private:
  uint16_t request_id_;
  Decoder decoder_;
  CgiHeadParser head_parser_;
  bool head_done_ = false;
  std::string_view pending_body_;  // the body bytes of the STDOUT piece that ended the head
  ProtocolStatus end_status_ = ProtocolStatus::kRequestComplete;
  const char* error_ = nullptr;
};

}  // namespace peregrine::fastcgi
