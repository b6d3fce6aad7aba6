#include "admin/config.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/rand.h>
#include <sys/stat.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include "auth/htpasswd.h"
#include "config/listen_address.h"

namespace peregrine::admin {

namespace {

const std::vector<std::string_view> kAdminKeys = {"listen",     "tls",           "auth",
                                                  "token_file", "password_file", "hosts"};

std::string trim(std::string text) {
  const char* space = " \t\r\n";
  size_t begin = text.find_first_not_of(space);
  if (begin == std::string::npos) return {};
  size_t end = text.find_last_not_of(space);
  return text.substr(begin, end - begin + 1);
}

// Reads a secret's path from `node` and the file's content; warns when every user may read it.
bool read_secret_file(config::Reader& reader, const toml::node& node, const std::string& key,
                      std::string* name, std::string* content) {
  if (!reader.read_string(node, key, name, false)) return false;
  std::string path = *name;
  if (!path.starts_with('/')) path = reader.base_dir() + "/" + path;
  std::ifstream in(path);
  if (!in) {
    reader.error(node.source(), "cannot read " + key + " '" + *name + "': " + std::strerror(errno),
                 reader.relative_hint(*name));
    return false;
  }
  std::stringstream text;
  text << in.rdbuf();
  *content = text.str();
  struct stat st;
  if (stat(path.c_str(), &st) == 0 && (st.st_mode & S_IROTH))
    reader.warn(reader.pos_of(node.source()), key + " '" + *name + "' is readable by every user",
                "chmod o-r " + *name);
  return true;
}

}  // namespace

bool is_local_listener(const sockaddr_storage& addr) {
  if (addr.ss_family == AF_UNIX) return true;
  if (addr.ss_family == AF_INET) {
    const auto& v4 = reinterpret_cast<const sockaddr_in&>(addr);
    return (ntohl(v4.sin_addr.s_addr) >> 24) == 127;
  }
  if (addr.ss_family == AF_INET6) {
    const auto& v6 = reinterpret_cast<const sockaddr_in6&>(addr);
    if (IN6_IS_ADDR_LOOPBACK(&v6.sin6_addr)) return true;
    return IN6_IS_ADDR_V4MAPPED(&v6.sin6_addr) && v6.sin6_addr.s6_addr[12] == 127;
  }
  return false;
}

std::string random_token() {
  unsigned char bytes[32];
  if (RAND_bytes(bytes, sizeof bytes) != 1) return {};
  return hex_digits(bytes, sizeof bytes);
}

std::string hex_digits(const unsigned char* bytes, size_t n) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    out.push_back(kHex[bytes[i] >> 4]);
    out.push_back(kHex[bytes[i] & 15]);
  }
  return out;
}

void read_admin(config::Reader& reader, const toml::node& node, config::Config* config,
                const std::string& generated_token) {
  const toml::table* table = node.as_table();
  if (!table) {
    reader.type_error(node, "admin", "a table", "write an [admin] section");
    return;
  }
  reader.check_keys(*table, kAdminKeys, "[admin]");
  admin::Options& options = config->admin;

  config::ListenAddress address;
  const toml::node* listen = table->get("listen");
  if (!listen) {
    reader.error(node.source(), "[admin] needs 'listen'",
                 "e.g. listen = \"127.0.0.1:9090\" or \"unix:/run/peregrine-admin.sock\"");
    return;
  }
  std::string text;
  if (!reader.read_string(*listen, "admin.listen", &text, false)) return;
  std::string message, hint;
  if (!config::parse_listen_address(text, &address, &message, &hint)) {
    reader.error(listen->source(), "admin.listen: " + message, hint);
    return;
  }
  address.pos = reader.pos_of(listen->source());
  address.admin = true;
  // HTTPS with the sites' certificates (chosen by SNI, as on their listeners); HTTP/1.1 only.
  if (const toml::node* tls = table->get("tls")) reader.read_bool(*tls, "admin.tls", &address.tls);
  if (config::endpoint_port(address.addr) != 0 || address.addr.ss_family == AF_UNIX) {
    for (const config::ListenAddress& other : config->listen) {
      if (config::same_endpoint(other.addr, address.addr)) {
        reader.error(listen->source(), "admin.listen '" + text + "' is also a site listener",
                     "give the admin its own address, e.g. \"127.0.0.1:9090\"");
        return;
      }
    }
  }

  if (const toml::node* auth = table->get("auth")) {
    std::string value;
    if (reader.read_string(*auth, "admin.auth", &value)) {
      if (value == "login" || value == "token") {
        options.auth = Auth::kLogin;
      } else if (value == "none") {
        options.auth = Auth::kNone;
        if (!is_local_listener(address.addr))
          reader.error(auth->source(),
                       "auth = \"none\" is refused on '" + text +
                           "': anyone who can reach it could read the server's figures",
                       "listen on 127.0.0.1, [::1] or a unix: socket, or use token_file");
      } else {
        reader.error(auth->source(),
                     "admin.auth must be \"login\" or \"none\", not \"" + value + "\"",
                     "auth = \"login\" (the default) asks for the token_file's token or the "
                     "password_file's password");
      }
    }
  }
  if (const toml::node* file = table->get("token_file")) {
    std::string content;
    if (read_secret_file(reader, *file, "admin.token_file", &options.token_file, &content)) {
      options.token = trim(std::move(content));
      if (options.token.size() < 16)
        reader.error(
            file->source(),
            "admin.token_file '" + options.token_file + "' holds " +
                (options.token.empty()
                     ? std::string("no token")
                     : "a token of " + std::to_string(options.token.size()) + " characters"),
            "put at least 16 random characters in it, e.g. "
            "openssl rand -hex 32 > " +
                options.token_file);
    }
  }
  if (const toml::node* file = table->get("password_file")) {
    std::string content;
    if (read_secret_file(reader, *file, "admin.password_file", &options.password_file, &content)) {
      // One crypt(3) hash, or an htpasswd line ("user:hash"; the name is not asked for).
      std::string hash = trim(std::move(content));
      if (size_t newline = hash.find('\n'); newline != std::string::npos) hash.resize(newline);
      if (size_t colon = hash.find(':'); colon != std::string::npos) hash.erase(0, colon + 1);
      hash = trim(std::move(hash));
      auth::HashKind kind;
      if (!auth::hash_kind(hash, &kind) || kind == auth::HashKind::kApr1) {
        reader.error(file->source(),
                     "admin.password_file '" + options.password_file +
                         "' does not hold a bcrypt, yescrypt or SHA-crypt hash",
                     "write one with: mkpasswd -m yescrypt > " + options.password_file +
                         ", or htpasswd -nB admin > " + options.password_file);
      } else {
        options.password_hash = std::move(hash);
      }
    }
  }
  if (options.auth == Auth::kLogin && options.token.empty() && options.password_hash.empty() &&
      !table->get("token_file") && !table->get("password_file")) {
    if (!generated_token.empty()) {
      options.token = generated_token;
    } else {
      reader.error(node.source(), "[admin] needs token_file or password_file (or auth = \"none\")",
                   "token_file = \"/etc/peregrine/admin.token\" holding a random token "
                   "(openssl rand -hex 32), or password_file holding a hash (mkpasswd -m "
                   "yescrypt)");
    }
  }
  if (const toml::node* hosts = table->get("hosts")) {
    std::vector<std::pair<std::string, const toml::node*>> names;
    if (reader.read_string_list(*hosts, "admin.hosts", &names))
      for (auto& [name, where] : names) {
        for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        options.hosts.push_back(std::move(name));
      }
  }
  options.enabled = true;
  config->listen.push_back(std::move(address));
}

}  // namespace peregrine::admin
