// Request-path decoding and normalization for file-backed handlers. Pure: no I/O, no allocation
// once the output string's capacity suffices, no exceptions.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace peregrine::http {

enum class PathStatus { kOk, kBadRequest };

// Turns the path component of a request target (no query, no fragment: the caller splits those
// off first) into a canonical absolute path:
//   1. percent-decodes once: "%XX" with X not a hex digit, a truncated "%X", or a decoded NUL
//      (and a literal NUL) are kBadRequest. A decoded "%2F" is a '/', so it takes part in the
//      steps below; "%252E" decodes to the literal text "%2E" and stays that.
//   2. collapses runs of '/' ("//a///b" -> "/a/b");
//   3. removes dot-segments (RFC 3986 5.2.4): "/a/./b/../c" -> "/a/c", "/a/." -> "/a/",
//      "/a/b/.." -> "/a/". A ".." that would climb above the root is kBadRequest (never clamped:
//      a request that tries it is hostile or broken, and clamping would make two different
//      requests name the same file).
// A trailing '/' is kept. raw_path must begin with '/' (else kBadRequest). Backslash, '?', '#'
// and every other byte are literal characters. `out` is overwritten (resized to raw_path.size()
// and then trimmed), so a caller that reuses one string allocates nothing once its capacity
// reaches raw_path.size(). raw_path must not point into `out`. On kBadRequest the contents of
// `out` are unspecified.
PathStatus normalize_path(std::string_view raw_path, std::string& out);

// Percent-decodes one component (a path segment, a query value): "%XX" becomes its byte and,
// with `plus_is_space` (form-encoded queries), '+' a space. Nullopt for a broken escape.
std::optional<std::string> percent_decode(std::string_view text, bool plus_is_space);

// True when normalize_path would return raw_path unchanged: it starts with '/' and holds no
// '%', no "//" and no segment starting with '.'. The common case, checked in one pass so the
// caller can use raw_path as is and skip the copy.
bool path_is_normal(std::string_view raw_path);

// True when any segment of `path` begins with '.' (".git", ".env", ".well-known"). Meant for a
// normalized path; used to deny dotfiles.
bool path_has_dot_segment_start(std::string_view path);

// True for "/.well-known" and anything under "/.well-known/" (RFC 8615): a prefix test only.
bool path_is_well_known(std::string_view path);

// The dotfile rule most callers want: true when some segment begins with '.', not counting a
// leading "/.well-known" segment. So "/.env" and "/.well-known/.htpasswd" are denied while
// "/.well-known/acme-challenge/x" is not. (path_has_dot_segment_start(p) && !path_is_well_known(p)
// would allow "/.well-known/.htpasswd".)
bool path_should_deny_dotfile(std::string_view path);

// The extension of the last segment, without the dot: "/a/b.tar.gz" -> "gz", "/x.HTML" -> "HTML"
// (case is kept). Empty when the last segment has no '.', when its only '.' is its first
// character (".bashrc"), when it ends with '.' ("/a."), or when the path ends with '/'.
std::string_view extension_of(std::string_view path);

}  // namespace peregrine::http
