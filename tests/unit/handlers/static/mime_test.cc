#include "handlers/static/mime.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <utility>

namespace peregrine::static_files {
namespace {

TEST(MimeType, CommonWebTypes) {
  EXPECT_EQ(mime_type_for_extension("html"), "text/html; charset=utf-8");
  EXPECT_EQ(mime_type_for_extension("htm"), "text/html; charset=utf-8");
  EXPECT_EQ(mime_type_for_extension("css"), "text/css; charset=utf-8");
  EXPECT_EQ(mime_type_for_extension("js"), "text/javascript; charset=utf-8");
  EXPECT_EQ(mime_type_for_extension("mjs"), "text/javascript; charset=utf-8");
  EXPECT_EQ(mime_type_for_extension("json"), "application/json; charset=utf-8");
  EXPECT_EQ(mime_type_for_extension("txt"), "text/plain; charset=utf-8");
  EXPECT_EQ(mime_type_for_extension("svg"), "image/svg+xml; charset=utf-8");
  EXPECT_EQ(mime_type_for_extension("svgz"), "image/svg+xml");
  EXPECT_EQ(mime_type_for_extension("png"), "image/png");
  EXPECT_EQ(mime_type_for_extension("jpg"), "image/jpeg");
  EXPECT_EQ(mime_type_for_extension("jpeg"), "image/jpeg");
  EXPECT_EQ(mime_type_for_extension("gif"), "image/gif");
  EXPECT_EQ(mime_type_for_extension("webp"), "image/webp");
  EXPECT_EQ(mime_type_for_extension("avif"), "image/avif");
  EXPECT_EQ(mime_type_for_extension("ico"), "image/x-icon");
  EXPECT_EQ(mime_type_for_extension("woff2"), "font/woff2");
  EXPECT_EQ(mime_type_for_extension("wasm"), "application/wasm");
  EXPECT_EQ(mime_type_for_extension("pdf"), "application/pdf");
  EXPECT_EQ(mime_type_for_extension("mp4"), "video/mp4");
  EXPECT_EQ(mime_type_for_extension("webm"), "video/webm");
  EXPECT_EQ(mime_type_for_extension("mp3"), "audio/mpeg");
  EXPECT_EQ(mime_type_for_extension("webmanifest"), "application/manifest+json; charset=utf-8");
  EXPECT_EQ(mime_type_for_extension("map"), "application/json; charset=utf-8");
  EXPECT_EQ(mime_type_for_extension("ts"), "video/mp2t");
  EXPECT_EQ(mime_type_for_extension("m3u8"), "application/vnd.apple.mpegurl");
  EXPECT_EQ(mime_type_for_extension("zip"), "application/zip");
  EXPECT_EQ(mime_type_for_extension("gz"), "application/gzip");
}

TEST(MimeType, CaseInsensitive) {
  EXPECT_EQ(mime_type_for_extension("HTML"), "text/html; charset=utf-8");
  EXPECT_EQ(mime_type_for_extension("JpG"), "image/jpeg");
  EXPECT_EQ(mime_type_for_extension("WOFF2"), "font/woff2");
  EXPECT_EQ(mime_type_for_extension("WebManifest"), "application/manifest+json; charset=utf-8");
}

TEST(MimeType, UnknownIsOctetStream) {
  EXPECT_EQ(mime_type_for_extension(""), "application/octet-stream");
  EXPECT_EQ(mime_type_for_extension("nope"), "application/octet-stream");
  EXPECT_EQ(mime_type_for_extension("htmlx"), "application/octet-stream");
  EXPECT_EQ(mime_type_for_extension("htm "), "application/octet-stream");
  EXPECT_EQ(mime_type_for_extension("ht"), "application/octet-stream");
  EXPECT_EQ(mime_type_for_extension("php"), "application/octet-stream");
  EXPECT_EQ(mime_type_for_extension(std::string(1000, 'a')), "application/octet-stream");
  EXPECT_EQ(mime_type_for_extension(std::string_view("js\0", 3)), "application/octet-stream");
  EXPECT_EQ(mime_type_for_extension("\xff\xfe"), "application/octet-stream");
}

TEST(MimeType, EveryRequiredExtensionIsKnown) {
  const char* required[] = {
      "html", "htm",         "shtml", "css",  "xml",  "gif",   "jpeg", "jpg",     "js",   "mjs",
      "json", "jsonld",      "atom",  "rss",  "mml",  "txt",   "jad",  "wml",     "htc",  "avif",
      "png",  "svg",         "svgz",  "tif",  "tiff", "wbmp",  "webp", "ico",     "jng",  "bmp",
      "woff", "woff2",       "jar",   "war",  "ear",  "hqx",   "doc",  "pdf",     "ps",   "eps",
      "ai",   "rtf",         "m3u8",  "kml",  "kmz",  "7z",    "cco",  "jardiff", "jnlp", "run",
      "pl",   "pm",          "prc",   "pdb",  "rar",  "rpm",   "sea",  "swf",     "sit",  "tcl",
      "tk",   "der",         "pem",   "crt",  "xpi",  "xhtml", "xspf", "zip",     "mid",  "midi",
      "kar",  "mp3",         "ogg",   "m4a",  "ra",   "3gpp",  "3gp",  "ts",      "mp4",  "mpeg",
      "mpg",  "mov",         "webm",  "flv",  "m4v",  "mng",   "asx",  "asf",     "wmv",  "avi",
      "wasm", "webmanifest", "map",   "md",   "csv",  "ics",   "vcf",  "epub",    "gz",   "tgz",
      "bz2",  "xz",          "zst",   "tar",  "br",   "apng",  "heic", "heif",    "jxl",  "otf",
      "ttf",  "eot",         "opus",  "flac", "wav",  "aac",   "oga",  "ogv",     "mkv",  "xls",
      "xlsx", "ppt",         "pptx",  "odt",  "ods",  "odp",   "docx", "yaml",    "yml",  "toml",
      "vtt",  "deb",
  };
  for (const char* ext : required) {
    EXPECT_NE(mime_type_for_extension(ext), "application/octet-stream") << ext;
  }
  // These are deliberately octet-stream, as in nginx: downloads, not content.
  for (const char* ext : {"bin", "exe", "dll", "dmg", "iso", "img", "msi", "msp", "msm"}) {
    EXPECT_EQ(mime_type_for_extension(ext), "application/octet-stream") << ext;
  }
}

TEST(MimeType, LongKeysAndSharedPrefixes) {
  EXPECT_EQ(mime_type_for_extension("webmanifest"), "application/manifest+json; charset=utf-8");
  EXPECT_EQ(mime_type_for_extension("markdown"), "text/markdown; charset=utf-8");
  EXPECT_EQ(mime_type_for_extension("appcache"), "text/cache-manifest; charset=utf-8");
  EXPECT_EQ(mime_type_for_extension("jardiff"), "application/x-java-archive-diff");
  EXPECT_EQ(mime_type_for_extension("webmanif"), "application/octet-stream");
  EXPECT_EQ(mime_type_for_extension("webmanifesx"), "application/octet-stream");
  EXPECT_EQ(mime_type_for_extension("webmanifests"), "application/octet-stream");
  EXPECT_EQ(mime_type_for_extension("markdownx"), "application/octet-stream");
  EXPECT_EQ(mime_type_for_extension("j"), "application/octet-stream");
  EXPECT_EQ(mime_type_for_extension("jsx"), "application/octet-stream");
  EXPECT_EQ(mime_type_for_extension("zzzzzzzzzzz"), "application/octet-stream");
  EXPECT_EQ(mime_type_for_extension("0"), "application/octet-stream");
}

TEST(MimeType, UpperCaseMatchesLowerCaseForEveryKnownExtension) {
  const char* exts[] = {"3g2",   "7z",          "aac",     "apng", "appcache", "bz2",
                        "cjs",   "docx",        "geojson", "gltf", "jfif",     "jsonld",
                        "m3u8",  "mkv",         "odg",     "pptx", "torrent",  "tsv",
                        "vcard", "webmanifest", "woff2",   "xlsx", "xslt",     "zst"};
  for (const char* ext : exts) {
    std::string upper(ext);
    for (char& c : upper) c = static_cast<char>(c >= 'a' && c <= 'z' ? c - 32 : c);
    EXPECT_NE(mime_type_for_extension(ext), "application/octet-stream") << ext;
    EXPECT_EQ(mime_type_for_extension(upper), mime_type_for_extension(ext)) << ext;
  }
}

TEST(MimeType, CharsetPolicy) {
  // Every text/* type carries the charset; binary types never do.
  for (const char* ext : {"html", "css", "js", "txt", "csv", "md", "xml", "ics", "vcf", "vtt",
                          "mml", "htc", "wml", "jad"}) {
    const std::string_view t = mime_type_for_extension(ext);
    EXPECT_TRUE(t.starts_with("text/")) << ext;
    EXPECT_TRUE(t.ends_with("; charset=utf-8")) << ext;
  }
  for (const char* ext : {"json", "jsonld", "webmanifest", "map", "atom", "rss", "xhtml", "svg",
                          "yaml", "yml", "toml"}) {
    EXPECT_TRUE(mime_type_for_extension(ext).ends_with("; charset=utf-8")) << ext;
  }
  for (const char* ext :
       {"png", "jpg", "woff2", "wasm", "pdf", "mp4", "zip", "gz", "svgz", "bin"}) {
    EXPECT_EQ(mime_type_for_extension(ext).find("charset"), std::string_view::npos) << ext;
  }
}

TEST(MimeType, WorksWithExtensionOfStyleInput) {
  EXPECT_EQ(mime_type_for_extension("gz"), "application/gzip");  // "a.tar.gz"
  EXPECT_EQ(mime_type_for_extension("tgz"), "application/gzip");
}

TEST(MimeTable, BuiltinWithoutOverrides) {
  const MimeTable table(std::map<std::string, std::string>{});
  EXPECT_EQ(table.lookup("html"), "text/html; charset=utf-8");
  EXPECT_EQ(table.lookup("nope"), "application/octet-stream");
  EXPECT_EQ(table.lookup(""), "application/octet-stream");
  const MimeTable defaulted;
  EXPECT_EQ(defaulted.lookup("PNG"), "image/png");
}

TEST(MimeTable, OverridesTakePrecedence) {
  const MimeTable table({{"html", "text/html; charset=iso-8859-1"},
                         {"ts", "application/typescript"},
                         {"php", "text/plain"},
                         {"custom", "application/x-custom"}});
  EXPECT_EQ(table.lookup("html"), "text/html; charset=iso-8859-1");
  EXPECT_EQ(table.lookup("HTML"), "text/html; charset=iso-8859-1");
  EXPECT_EQ(table.lookup("ts"), "application/typescript");
  EXPECT_EQ(table.lookup("php"), "text/plain");
  EXPECT_EQ(table.lookup("Custom"), "application/x-custom");
  EXPECT_EQ(table.lookup("htm"), "text/html; charset=utf-8");  // not overridden
  EXPECT_EQ(table.lookup("css"), "text/css; charset=utf-8");
  EXPECT_EQ(table.lookup("unknown"), "application/octet-stream");
}

TEST(MimeTable, OverrideKeysAreNormalized) {
  const MimeTable table(
      {{".Foo", "application/x-foo"}, {"", "ignored/empty"}, {".", "ignored/dot"}});
  EXPECT_EQ(table.lookup("foo"), "application/x-foo");
  EXPECT_EQ(table.lookup("FOO"), "application/x-foo");
  EXPECT_EQ(table.lookup(""), "application/octet-stream");
}

TEST(MimeTable, ManyOverridesAllFound) {
  std::map<std::string, std::string> m;
  for (int i = 0; i < 500; ++i) m["ext" + std::to_string(i)] = "type/" + std::to_string(i);
  const MimeTable table(m);
  for (int i = 0; i < 500; ++i) {
    EXPECT_EQ(table.lookup("EXT" + std::to_string(i)), "type/" + std::to_string(i));
  }
  EXPECT_EQ(table.lookup("ext500"), "application/octet-stream");
  EXPECT_EQ(table.lookup("jpg"), "image/jpeg");
}

TEST(MimeTable, ViewsSurviveCopyAndMove) {
  std::map<std::string, std::string> m{{"a", "x/short"}};  // short: would sit in SSO storage
  MimeTable original(m);
  const std::string_view before = original.lookup("a");
  MimeTable copy = original;
  MimeTable moved = std::move(original);
  EXPECT_EQ(before, "x/short");
  EXPECT_EQ(copy.lookup("a").data(), before.data());
  EXPECT_EQ(moved.lookup("a").data(), before.data());
}

TEST(MimeTable, OverridesOutliveTheSourceMap) {
  MimeTable* table;
  {
    std::map<std::string, std::string> m{{"zzz", "application/x-zzz"}};
    table = new MimeTable(m);
  }
  EXPECT_EQ(table->lookup("zzz"), "application/x-zzz");
  delete table;
}

}  // namespace
}  // namespace peregrine::static_files
