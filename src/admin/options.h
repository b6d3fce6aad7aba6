// What the [admin] table says (plain data, read by admin/config.cc). The admin listener itself
// is one more config::ListenAddress (marked `admin`) at the end of Config::listen, so that it is
// bound, logged, handed over on upgrade and compared on reload like the others.
#pragma once

#include <string>
#include <vector>

namespace peregrine::admin {

// kLogin: a token (Authorization: Bearer, or POST /api/login) and/or a password (POST
// /api/login) is required. kNone: nothing is asked (a loopback or unix-socket listener only).
enum class Auth { kLogin, kNone };

struct Options {
  bool enabled = false;
  Auth auth = Auth::kLogin;
  std::string token_file;  // "" in quick mode, where the token is generated
  std::string token;       // read from token_file at load (a reload re-reads it)
  std::string password_file;
  std::string password_hash;  // crypt(3) hash read from password_file (bcrypt, yescrypt, ...)
  // Host names (besides localhost and IP literals) a request's Host may carry: the names the
  // admin is reached by. Anything else is refused, against DNS rebinding.
  std::vector<std::string> hosts;
};

}  // namespace peregrine::admin
