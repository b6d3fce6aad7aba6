#include "handlers/static/mime.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <vector>

namespace peregrine::static_files {
namespace {

struct MimeEntry {
  std::string_view ext;  // lower-case, no dot
  std::string_view type;
};

// Sorted by extension (checked at compile time below) for binary search. Based on the common
// web entries of nginx's and Apache's mime.types, updated to the IANA-registered names where
// browsers accept them (text/javascript per RFC 9239, audio/mp4, image/bmp, application/vnd.rar).
// ".ts" is MPEG transport stream (HLS segments), as in nginx, not TypeScript.
constexpr MimeEntry kMimeTable[] = {
    {"3g2", "video/3gpp2"},
    {"3gp", "video/3gpp"},
    {"3gpp", "video/3gpp"},
    {"7z", "application/x-7z-compressed"},
    {"aac", "audio/aac"},
    {"ai", "application/postscript"},
    {"aif", "audio/aiff"},
    {"aiff", "audio/aiff"},
    {"apk", "application/vnd.android.package-archive"},
    {"apng", "image/apng"},
    {"appcache", "text/cache-manifest; charset=utf-8"},
    {"asf", "video/x-ms-asf"},
    {"asx", "video/x-ms-asf"},
    {"atom", "application/atom+xml; charset=utf-8"},
    {"avi", "video/x-msvideo"},
    {"avif", "image/avif"},
    {"bin", "application/octet-stream"},
    {"bmp", "image/bmp"},
    {"br", "application/x-brotli"},
    {"bz2", "application/x-bzip2"},
    {"cco", "application/x-cocoa"},
    {"cjs", "text/javascript; charset=utf-8"},
    {"crt", "application/x-x509-ca-cert"},
    {"css", "text/css; charset=utf-8"},
    {"csv", "text/csv; charset=utf-8"},
    {"cur", "image/x-icon"},
    {"deb", "application/vnd.debian.binary-package"},
    {"der", "application/x-x509-ca-cert"},
    {"dll", "application/octet-stream"},
    {"dmg", "application/octet-stream"},
    {"doc", "application/msword"},
    {"docx", "application/vnd.openxmlformats-officedocument.wordprocessingml.document"},
    {"dtd", "application/xml-dtd"},
    {"ear", "application/java-archive"},
    {"eot", "application/vnd.ms-fontobject"},
    {"eps", "application/postscript"},
    {"epub", "application/epub+zip"},
    {"exe", "application/octet-stream"},
    {"flac", "audio/flac"},
    {"flv", "video/x-flv"},
    {"geojson", "application/geo+json; charset=utf-8"},
    {"gif", "image/gif"},
    {"glb", "model/gltf-binary"},
    {"gltf", "model/gltf+json"},
    {"gz", "application/gzip"},
    {"heic", "image/heic"},
    {"heif", "image/heif"},
    {"hqx", "application/mac-binhex40"},
    {"htc", "text/x-component; charset=utf-8"},
    {"htm", "text/html; charset=utf-8"},
    {"html", "text/html; charset=utf-8"},
    {"ico", "image/x-icon"},
    {"ics", "text/calendar; charset=utf-8"},
    {"img", "application/octet-stream"},
    {"iso", "application/octet-stream"},
    {"jad", "text/vnd.sun.j2me.app-descriptor; charset=utf-8"},
    {"jar", "application/java-archive"},
    {"jardiff", "application/x-java-archive-diff"},
    {"jfif", "image/jpeg"},
    {"jng", "image/x-jng"},
    {"jnlp", "application/x-java-jnlp-file"},
    {"jp2", "image/jp2"},
    {"jpe", "image/jpeg"},
    {"jpeg", "image/jpeg"},
    {"jpg", "image/jpeg"},
    {"js", "text/javascript; charset=utf-8"},
    {"json", "application/json; charset=utf-8"},
    {"jsonld", "application/ld+json; charset=utf-8"},
    {"jxl", "image/jxl"},
    {"kar", "audio/midi"},
    {"kml", "application/vnd.google-earth.kml+xml"},
    {"kmz", "application/vnd.google-earth.kmz"},
    {"log", "text/plain; charset=utf-8"},
    {"lz", "application/x-lzip"},
    {"lzma", "application/x-lzma"},
    {"m3u", "audio/x-mpegurl"},
    {"m3u8", "application/vnd.apple.mpegurl"},
    {"m4a", "audio/mp4"},
    {"m4v", "video/x-m4v"},
    {"map", "application/json; charset=utf-8"},
    {"markdown", "text/markdown; charset=utf-8"},
    {"md", "text/markdown; charset=utf-8"},
    {"mid", "audio/midi"},
    {"midi", "audio/midi"},
    {"mjs", "text/javascript; charset=utf-8"},
    {"mka", "audio/x-matroska"},
    {"mkv", "video/x-matroska"},
    {"mml", "text/mathml; charset=utf-8"},
    {"mng", "video/x-mng"},
    {"mov", "video/quicktime"},
    {"mp3", "audio/mpeg"},
    {"mp4", "video/mp4"},
    {"mpd", "application/dash+xml"},
    {"mpeg", "video/mpeg"},
    {"mpg", "video/mpeg"},
    {"msi", "application/octet-stream"},
    {"msm", "application/octet-stream"},
    {"msp", "application/octet-stream"},
    {"odg", "application/vnd.oasis.opendocument.graphics"},
    {"odp", "application/vnd.oasis.opendocument.presentation"},
    {"ods", "application/vnd.oasis.opendocument.spreadsheet"},
    {"odt", "application/vnd.oasis.opendocument.text"},
    {"oga", "audio/ogg"},
    {"ogg", "audio/ogg"},
    {"ogv", "video/ogg"},
    {"ogx", "application/ogg"},
    {"opus", "audio/ogg"},
    {"otf", "font/otf"},
    {"pdb", "application/x-pilot"},
    {"pdf", "application/pdf"},
    {"pem", "application/x-x509-ca-cert"},
    {"pl", "application/x-perl"},
    {"pm", "application/x-perl"},
    {"png", "image/png"},
    {"ppt", "application/vnd.ms-powerpoint"},
    {"pptx", "application/vnd.openxmlformats-officedocument.presentationml.presentation"},
    {"prc", "application/x-pilot"},
    {"ps", "application/postscript"},
    {"psd", "image/vnd.adobe.photoshop"},
    {"ra", "audio/x-realaudio"},
    {"rar", "application/vnd.rar"},
    {"rdf", "application/rdf+xml"},
    {"rpm", "application/x-redhat-package-manager"},
    {"rss", "application/rss+xml; charset=utf-8"},
    {"rtf", "application/rtf"},
    {"run", "application/x-makeself"},
    {"sea", "application/x-sea"},
    {"sh", "application/x-sh"},
    {"shtml", "text/html; charset=utf-8"},
    {"sig", "application/pgp-signature"},
    {"sit", "application/x-stuffit"},
    {"spx", "audio/ogg"},
    {"srt", "application/x-subrip"},
    {"svg", "image/svg+xml; charset=utf-8"},
    {"svgz", "image/svg+xml"},
    {"swf", "application/x-shockwave-flash"},
    {"tar", "application/x-tar"},
    {"tcl", "application/x-tcl"},
    {"text", "text/plain; charset=utf-8"},
    {"tgz", "application/gzip"},
    {"tif", "image/tiff"},
    {"tiff", "image/tiff"},
    {"tk", "application/x-tcl"},
    {"toml", "application/toml; charset=utf-8"},
    {"torrent", "application/x-bittorrent"},
    {"ts", "video/mp2t"},
    {"tsv", "text/tab-separated-values; charset=utf-8"},
    {"ttc", "font/collection"},
    {"ttf", "font/ttf"},
    {"txt", "text/plain; charset=utf-8"},
    {"vcard", "text/vcard; charset=utf-8"},
    {"vcf", "text/vcard; charset=utf-8"},
    {"vtt", "text/vtt; charset=utf-8"},
    {"war", "application/java-archive"},
    {"wasm", "application/wasm"},
    {"wav", "audio/wav"},
    {"wbmp", "image/vnd.wap.wbmp"},
    {"weba", "audio/webm"},
    {"webm", "video/webm"},
    {"webmanifest", "application/manifest+json; charset=utf-8"},
    {"webp", "image/webp"},
    {"wma", "audio/x-ms-wma"},
    {"wml", "text/vnd.wap.wml; charset=utf-8"},
    {"wmlc", "application/vnd.wap.wmlc"},
    {"wmv", "video/x-ms-wmv"},
    {"woff", "font/woff"},
    {"woff2", "font/woff2"},
    {"xht", "application/xhtml+xml; charset=utf-8"},
    {"xhtml", "application/xhtml+xml; charset=utf-8"},
    {"xls", "application/vnd.ms-excel"},
    {"xlsx", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"},
    {"xml", "text/xml; charset=utf-8"},
    {"xpi", "application/x-xpinstall"},
    {"xsl", "application/xslt+xml; charset=utf-8"},
    {"xslt", "application/xslt+xml; charset=utf-8"},
    {"xspf", "application/xspf+xml"},
    {"xz", "application/x-xz"},
    {"yaml", "application/yaml; charset=utf-8"},
    {"yml", "application/yaml; charset=utf-8"},
    {"zip", "application/zip"},
    {"zst", "application/zstd"},
};

constexpr bool table_is_sorted_and_unique() {
  for (size_t i = 1; i < std::size(kMimeTable); ++i) {
    if (!(kMimeTable[i - 1].ext < kMimeTable[i].ext)) return false;
  }
  return true;
}
static_assert(table_is_sorted_and_unique(), "kMimeTable must be sorted by ext, without duplicates");

constexpr size_t max_builtin_ext_length() {
  size_t m = 0;
  for (const MimeEntry& e : kMimeTable) m = e.ext.size() > m ? e.ext.size() : m;
  return m;
}
constexpr size_t kMaxBuiltinExtLength = max_builtin_ext_length();

constexpr char to_lower(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c;
}

// Lower-cases `ext` into `buf` (capacity `cap`) and returns the view, or an empty view when it
// does not fit (then no table key can match it).
std::string_view lower_into(std::string_view ext, char* buf, size_t cap) {
  if (ext.size() > cap) return {};
  for (size_t i = 0; i < ext.size(); ++i) buf[i] = to_lower(ext[i]);
  return {buf, ext.size()};
}

// Binary search of a sorted range of MimeEntry for an already lower-case key; returns the type
// or an empty view.
template <typename It>
std::string_view find_exact(It begin, It end, std::string_view key) {
  const It it = std::lower_bound(begin, end, key,
                                 [](const MimeEntry& e, std::string_view k) { return e.ext < k; });
  return it != end && it->ext == key ? it->type : std::string_view{};
}

// The first eight bytes of a key, big-endian and zero-padded: comparing these integers orders
// keys like comparing the strings (up to ties between keys sharing an 8-byte prefix), so the hot
// binary search compares integers instead of calling memcmp.
constexpr uint64_t pack8(std::string_view s) {
  uint64_t v = 0;
  for (size_t i = 0; i < 8; ++i) {
    v = (v << 8) | (i < s.size() ? static_cast<unsigned char>(s[i]) : 0u);
  }
  return v;
}

constexpr auto kPackedKeys = [] {
  std::array<uint64_t, std::size(kMimeTable)> keys{};
  for (size_t i = 0; i < keys.size(); ++i) keys[i] = pack8(kMimeTable[i].ext);
  return keys;
}();

std::string_view builtin_lookup(std::string_view ext) {
  char buf[kMaxBuiltinExtLength];
  const std::string_view key = lower_into(ext, buf, sizeof(buf));
  if (key.empty()) return {};
  const uint64_t packed = pack8(key);
  size_t i = static_cast<size_t>(std::lower_bound(kPackedKeys.begin(), kPackedKeys.end(), packed) -
                                 kPackedKeys.begin());
  // Usually one candidate; keys longer than 8 bytes (or a query with a NUL) are confirmed here.
  for (; i < kPackedKeys.size() && kPackedKeys[i] == packed; ++i) {
    if (kMimeTable[i].ext == key) return kMimeTable[i].type;
  }
  return {};
}

}  // namespace

std::string_view mime_type_for_extension(std::string_view ext_without_dot) {
  const std::string_view type = builtin_lookup(ext_without_dot);
  return type.empty() ? kDefaultMimeType : type;
}

struct MimeTable::Overrides {
  // Longest key a lookup lower-cases on the stack; longer override keys are never matched.
  static constexpr size_t kMaxKeyLength = 64;
  std::vector<std::string> storage;  // ext and type strings; never resized after construction
  std::vector<MimeEntry> entries;    // sorted by ext, views into storage
  size_t max_ext_length = 0;
};

MimeTable::MimeTable(const std::map<std::string, std::string>& overrides) {
  if (overrides.empty()) return;
  auto o = std::make_shared<Overrides>();
  o->storage.reserve(overrides.size() * 2);
  for (const auto& [raw_ext, type] : overrides) {
    std::string ext = raw_ext;
    if (!ext.empty() && ext.front() == '.') ext.erase(0, 1);
    if (ext.empty() || ext.size() > Overrides::kMaxKeyLength) continue;
    for (char& c : ext) c = to_lower(c);
    o->storage.push_back(std::move(ext));
    o->storage.push_back(type);
  }
  // Views are taken only now: the vector is fully built and the strings will not move again.
  for (size_t i = 0; i < o->storage.size(); i += 2) {
    o->entries.push_back({o->storage[i], o->storage[i + 1]});
  }
  // Lower-casing ("HTML" and "html") can create duplicates; keep the first after a stable sort.
  std::stable_sort(o->entries.begin(), o->entries.end(),
                   [](const MimeEntry& a, const MimeEntry& b) { return a.ext < b.ext; });
  o->entries.erase(
      std::unique(o->entries.begin(), o->entries.end(),
                  [](const MimeEntry& a, const MimeEntry& b) { return a.ext == b.ext; }),
      o->entries.end());
  for (const MimeEntry& e : o->entries) {
    if (e.ext.size() > o->max_ext_length) o->max_ext_length = e.ext.size();
  }
  if (!o->entries.empty()) overrides_ = std::move(o);
}

std::string_view MimeTable::lookup(std::string_view ext) const {
  if (overrides_ && !ext.empty() && ext.size() <= overrides_->max_ext_length) {
    char buf[Overrides::kMaxKeyLength];
    const std::string_view key = lower_into(ext, buf, sizeof(buf));
    const std::string_view type =
        find_exact(overrides_->entries.begin(), overrides_->entries.end(), key);
    if (!type.empty()) return type;
  }
  return mime_type_for_extension(ext);
}

}  // namespace peregrine::static_files
