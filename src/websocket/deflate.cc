#include "websocket/deflate.h"

#include <zlib.h>

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "core/strings.h"

namespace peregrine::websocket {

namespace {

// ---- Negotiation ----

bool is_tchar(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool is_token(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), is_tchar);
}

struct Param {
  std::string_view name;
  bool has_value = false;
  std::string value;  // unquoted
};

struct Offer {
  std::string_view name;
  std::vector<Param> params;
};

// Reads the extension list of one header line (RFC 6455 9.1: extension *(";" param), params as
// token ["=" (token / quoted-string)]). A malformed element is skipped up to the next comma
// outside quotes, so that it cannot hide or invent the offers after it.
class ExtensionListReader {
 public:
  explicit ExtensionListReader(std::string_view text) : text_(text) {}

  // The next well-formed element; false at the end of the line.
  bool next(Offer* offer) {
    for (;;) {
      skip_ows();
      if (pos_ == text_.size()) return false;
      if (text_[pos_] == ',') {  // an empty list element
        ++pos_;
        continue;
      }
      if (read_element(offer)) return true;
      skip_element();
    }
  }

 private:
  void skip_ows() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t')) ++pos_;
  }
  std::string_view token() {
    const size_t start = pos_;
    while (pos_ < text_.size() && is_tchar(text_[pos_])) ++pos_;
    return text_.substr(start, pos_ - start);
  }
  bool quoted(std::string* out) {
    ++pos_;  // the opening quote
    while (pos_ < text_.size()) {
      char c = text_[pos_++];
      if (c == '"') return true;
      if (c == '\\') {
        if (pos_ == text_.size()) return false;
        c = text_[pos_++];
      }
      out->push_back(c);
    }
    return false;
  }
  bool read_element(Offer* offer) {
    offer->params.clear();
    offer->name = token();
    if (offer->name.empty()) return false;
    for (;;) {
      skip_ows();
      if (pos_ == text_.size()) return true;
      if (text_[pos_] == ',') {
        ++pos_;
        return true;
      }
      if (text_[pos_] != ';') return false;
      ++pos_;
      skip_ows();
      Param param;
      param.name = token();
      if (param.name.empty()) return false;
      skip_ows();
      if (pos_ < text_.size() && text_[pos_] == '=') {
        ++pos_;
        skip_ows();
        param.has_value = true;
        if (pos_ < text_.size() && text_[pos_] == '"') {
          // RFC 6455 9.1: a quoted value, once unescaped, must still be a token.
          if (!quoted(&param.value) || !is_token(param.value)) return false;
        } else {
          param.value = std::string(token());
          if (param.value.empty()) return false;
        }
      }
      offer->params.push_back(std::move(param));
    }
  }
  void skip_element() {
    bool in_quotes = false;
    while (pos_ < text_.size()) {
      const char c = text_[pos_++];
      if (in_quotes && c == '\\' && pos_ < text_.size()) {
        ++pos_;
      } else if (c == '"') {
        in_quotes = !in_quotes;
      } else if (c == ',' && !in_quotes) {
        return;
      }
    }
  }

  std::string_view text_;
  size_t pos_ = 0;
};

// RFC 7692 7.1.2: a decimal 8-15 without leading zeros.
std::optional<int> window_bits_value(std::string_view v) {
  if (v.size() == 1 && (v[0] == '8' || v[0] == '9')) return v[0] - '0';
  if (v.size() == 2 && v[0] == '1' && v[1] >= '0' && v[1] <= '5') return 10 + (v[1] - '0');
  return std::nullopt;
}

int clamp_window(int bits) {
  return std::clamp(bits, 8, 15);
}

// RFC 7692 7.1: the parameters the server answers with, or nullopt to decline the offer.
std::optional<PerMessageDeflate> accept_offer(const Offer& offer,
                                              const DeflateServerPolicy& policy) {
  bool server_no_takeover = false, client_no_takeover = false;
  bool server_bits_seen = false, client_bits_seen = false;
  std::optional<int> server_bits, client_bits;
  for (const Param& p : offer.params) {
    bool* seen = nullptr;
    if (p.name == "server_no_context_takeover" || p.name == "client_no_context_takeover") {
      seen = p.name[0] == 's' ? &server_no_takeover : &client_no_takeover;
      if (p.has_value) return std::nullopt;  // defined without a value
    } else if (p.name == "server_max_window_bits" || p.name == "client_max_window_bits") {
      const bool server = p.name[0] == 's';
      seen = server ? &server_bits_seen : &client_bits_seen;
      if (p.has_value) {
        const std::optional<int> bits = window_bits_value(p.value);
        if (!bits) return std::nullopt;
        (server ? server_bits : client_bits) = bits;
      } else if (server) {
        return std::nullopt;  // the client may leave only its own without a value (7.1.2.2)
      }
    } else {
      return std::nullopt;  // a parameter not defined for an offer
    }
    if (*seen) return std::nullopt;  // the same parameter twice
    *seen = true;
  }
  PerMessageDeflate params;
  // Ours to add when the policy keeps no compressor per connection (7.1.1.1); the client's
  // request binds us in any case.
  params.server_no_context_takeover = server_no_takeover || !policy.server_context_takeover;
  // 7.1.1.2: the server may always ask the client to reset its window.
  params.client_no_context_takeover = client_no_takeover || !policy.client_context_takeover;
  params.server_max_window_bits =
      std::min(server_bits.value_or(15), clamp_window(policy.server_max_window_bits));
  // 7.1.2.2: only an offer with client_max_window_bits lets the server limit the client's window.
  params.client_max_window_bits =
      client_bits_seen
          ? std::min(client_bits.value_or(15), clamp_window(policy.client_max_window_bits))
          : 15;
  params.mem_level = std::clamp(policy.mem_level, 1, 9);
  params.compression_level = std::clamp(policy.compression_level, 1, 9);
  params.min_compress_bytes = policy.min_compress_bytes;
  return params;
}

}  // namespace

std::string permessage_deflate_response(const PerMessageDeflate& params) {
  std::string out = "permessage-deflate";
  if (params.server_no_context_takeover) out += "; server_no_context_takeover";
  if (params.client_no_context_takeover) out += "; client_no_context_takeover";
  if (params.server_max_window_bits < 15)
    out += "; server_max_window_bits=" + std::to_string(params.server_max_window_bits);
  if (params.client_max_window_bits < 15)
    out += "; client_max_window_bits=" + std::to_string(params.client_max_window_bits);
  return out;
}

std::optional<PerMessageDeflate> negotiate_permessage_deflate(
    std::span<const std::string_view> header_values, const DeflateServerPolicy& policy,
    std::string* response_value) {
  if (!policy.enabled) return std::nullopt;
  Offer offer;
  for (std::string_view line : header_values) {
    ExtensionListReader reader(line);
    while (reader.next(&offer)) {
      if (!ascii_iequals(offer.name, "permessage-deflate")) continue;
      std::optional<PerMessageDeflate> params = accept_offer(offer, policy);
      if (!params) continue;
      if (response_value != nullptr) *response_value = permessage_deflate_response(*params);
      return params;
    }
  }
  return std::nullopt;
}

std::optional<PerMessageDeflate> negotiate_permessage_deflate(const Request& request,
                                                              const DeflateServerPolicy& policy,
                                                              std::string* response_value) {
  std::vector<std::string_view> lines;
  for (const Header& h : request.header_list())
    if (ascii_iequals(h.name, "sec-websocket-extensions")) lines.push_back(h.value);
  return negotiate_permessage_deflate(lines, policy, response_value);
}

// ---- zlib state ----

namespace {

thread_local int64_t zlib_bytes = 0;

// zlib's allocations, counted: each block carries its size in front (16 bytes keep the
// alignment malloc gives).
constexpr size_t kHeader = 16;

void* counted_alloc(void*, unsigned items, unsigned size) {
  const size_t bytes = static_cast<size_t>(items) * size;
  auto* block = static_cast<unsigned char*>(std::malloc(bytes + kHeader));
  if (block == nullptr) return Z_NULL;
  *reinterpret_cast<size_t*>(block) = bytes;
  zlib_bytes += static_cast<int64_t>(bytes);
  return block + kHeader;
}

void counted_free(void*, void* p) {
  if (p == nullptr) return;
  auto* block = static_cast<unsigned char*>(p) - kHeader;
  zlib_bytes -= static_cast<int64_t>(*reinterpret_cast<size_t*>(block));
  std::free(block);
}

}  // namespace

int64_t deflate_memory_in_use() {
  return zlib_bytes;
}

// One z_stream, for inflating or deflating, ended with the object.
class ZStream {
 public:
  static std::unique_ptr<ZStream> inflater(int window_bits) {
    auto s = std::unique_ptr<ZStream>(new ZStream(false));
    if (inflateInit2(&s->z, -window_bits) != Z_OK) return nullptr;
    s->ready = true;
    return s;
  }
  static std::unique_ptr<ZStream> deflater(int window_bits, int mem_level, int level) {
    auto s = std::unique_ptr<ZStream>(new ZStream(true));
    // zlib's raw deflate has no 256-byte window: for 8 bits it compresses with 512 bytes but
    // finds no matches (Huffman coding only), so no distance can exceed what the peer keeps.
    const int bits = window_bits == 8 ? 9 : window_bits;
    const int strategy = window_bits == 8 ? Z_HUFFMAN_ONLY : Z_DEFAULT_STRATEGY;
    if (deflateInit2(&s->z, level, Z_DEFLATED, -bits, mem_level, strategy) != Z_OK) return nullptr;
    s->ready = true;
    return s;
  }
  ~ZStream() {
    if (!ready) return;
    if (deflating) {
      deflateEnd(&z);
    } else {
      inflateEnd(&z);
    }
  }
  ZStream(const ZStream&) = delete;
  ZStream& operator=(const ZStream&) = delete;

  z_stream z{};

 private:
  explicit ZStream(bool deflate) : deflating(deflate) {
    z.zalloc = counted_alloc;
    z.zfree = counted_free;
  }
  bool deflating;
  bool ready = false;
};

MessageInflater::MessageInflater(int window_bits, bool context_takeover)
    // Never under 9: zlib-based senders cannot compress with 8 bits and use 9 (see ZStream), and
    // a larger window only costs memory, never correctness.
    : window_bits_(std::clamp(window_bits, 9, 15)), context_takeover_(context_takeover) {}

MessageInflater::~MessageInflater() = default;

MessageInflater::Status MessageInflater::run(std::string_view compressed, std::string& out,
                                             uint64_t limit) {
  if (stream_ended_) return Status::kOk;
  if (!stream_) {
    stream_ = ZStream::inflater(window_bits_);
    if (!stream_) return Status::kCorrupt;
  }
  z_stream& z = stream_->z;
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(compressed.data()));
  z.avail_in = static_cast<uInt>(compressed.size());
  for (;;) {
    if (out.size() > limit) return Status::kTooBig;
    // One byte over the room left is enough to see the limit passed; the chunk grows with the
    // input so that a feed of a few bytes does not clear a large buffer.
    const uint64_t room = limit - out.size() + 1;
    const size_t chunk = static_cast<size_t>(
        std::min<uint64_t>(room, std::clamp<size_t>(compressed.size() * 4, 256, 65536)));
    const size_t old = out.size();
    out.resize(old + chunk);
    z.next_out = reinterpret_cast<Bytef*>(out.data() + old);
    z.avail_out = static_cast<uInt>(chunk);
    const int rc = ::inflate(&z, Z_SYNC_FLUSH);
    out.resize(old + chunk - z.avail_out);
    if (rc == Z_STREAM_END) {
      // RFC 7692 7.2.3.4: a sender may end with a BFINAL block; the rest of the message is
      // padding to ignore.
      stream_ended_ = true;
      return out.size() > limit ? Status::kTooBig : Status::kOk;
    }
    // Output past the limit counts before an error later in the same input, as it would had
    // the input come in smaller pieces.
    if (out.size() > limit) return Status::kTooBig;
    if (rc != Z_OK && rc != Z_BUF_ERROR) return Status::kCorrupt;
    // Done when all input is taken and zlib stopped short of the output room it had.
    if (z.avail_in == 0 && z.avail_out != 0) return Status::kOk;
    if (rc == Z_BUF_ERROR && z.avail_out != 0) return Status::kOk;
  }
}

MessageInflater::Status MessageInflater::inflate(std::string_view compressed, std::string& out,
                                                 uint64_t limit) {
  return run(compressed, out, limit);
}

MessageInflater::Status MessageInflater::finish(std::string& out, uint64_t limit) {
  static constexpr char kTail[] = {0x00, 0x00, static_cast<char>(0xff), static_cast<char>(0xff)};
  const Status status = run(std::string_view(kTail, 4), out, limit);
  if (!context_takeover_) {
    stream_.reset();  // no memory kept between messages
  } else if (stream_ended_ && stream_) {
    // A BFINAL block ended zlib's stream, but the window still carries into the next message:
    // restart the stream with the last window as its dictionary.
    std::vector<Bytef> window(size_t{1} << window_bits_);
    uInt size = 0;
    inflateGetDictionary(&stream_->z, window.data(), &size);
    inflateReset(&stream_->z);
    inflateSetDictionary(&stream_->z, window.data(), size);
  }
  stream_ended_ = false;
  return status;
}

namespace {

// This thread's compressors for sessions without context takeover, one per setting in use
// (normally one: the server's policy), each reset before a message.
struct SharedDeflater {
  int window_bits, mem_level, level;
  std::unique_ptr<ZStream> stream;
};
thread_local std::vector<SharedDeflater> shared_deflaters;

ZStream* shared_deflater(int window_bits, int mem_level, int level) {
  for (SharedDeflater& d : shared_deflaters) {
    if (d.window_bits == window_bits && d.mem_level == mem_level && d.level == level) {
      deflateReset(&d.stream->z);
      return d.stream.get();
    }
  }
  std::unique_ptr<ZStream> s = ZStream::deflater(window_bits, mem_level, level);
  if (!s) return nullptr;
  shared_deflaters.push_back({window_bits, mem_level, level, std::move(s)});
  return shared_deflaters.back().stream.get();
}

}  // namespace

MessageDeflater::MessageDeflater(int window_bits, bool context_takeover, int mem_level, int level)
    : window_bits_(std::clamp(window_bits, 8, 15)),
      context_takeover_(context_takeover),
      mem_level_(std::clamp(mem_level, 1, 9)),
      level_(std::clamp(level, 1, 9)) {}

MessageDeflater::~MessageDeflater() = default;

bool MessageDeflater::compress(std::string_view message, std::string* out) {
  ZStream* stream = nullptr;
  if (context_takeover_) {
    if (!stream_) stream_ = ZStream::deflater(window_bits_, mem_level_, level_);
    stream = stream_.get();
  } else {
    stream = shared_deflater(window_bits_, mem_level_, level_);
  }
  if (stream == nullptr) return false;  // zlib out of memory: the message goes uncompressed
  z_stream& z = stream->z;
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(message.data()));
  z.avail_in = static_cast<uInt>(message.size());
  out->clear();
  // deflateBound covers the data; the sync flush adds an empty stored block (5 bytes at most).
  size_t capacity = deflateBound(&z, static_cast<uLong>(message.size())) + 16;
  for (;;) {
    const size_t old = out->size();
    out->resize(old + capacity);
    z.next_out = reinterpret_cast<Bytef*>(out->data() + old);
    z.avail_out = static_cast<uInt>(capacity);
    const int rc = ::deflate(&z, Z_SYNC_FLUSH);
    out->resize(old + capacity - z.avail_out);
    if (rc != Z_OK && rc != Z_BUF_ERROR) {
      // The stream is unusable: this message goes uncompressed, and a fresh compressor (which
      // refers to nothing the peer has not seen) takes the next.
      stream_.reset();
      return false;
    }
    if (z.avail_in == 0 && z.avail_out != 0) break;
    capacity = 4096;
  }
  // RFC 7692 7.2.1: the flush's empty stored block ends 00 00 ff ff, which the receiver adds back.
  if (out->size() >= 4 &&
      out->compare(out->size() - 4, 4, std::string_view("\0\0\xff\xff", 4)) == 0)
    out->resize(out->size() - 4);
  // Without context takeover an incompressible message may go as it is: nothing depends on it.
  return context_takeover_ || out->size() < message.size();
}

}  // namespace peregrine::websocket
