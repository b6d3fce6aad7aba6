#include "server/server_process.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "config/listen_address.h"
#include "core/clock.h"
#include "core/log.h"
#include "metrics/metrics.h"
#include "server/access_log.h"
#include "server/worker.h"

extern char** environ;

namespace peregrine::server {
namespace {

constexpr const char* kListenFdsEnv = "PEREGRINE_LISTEN_FDS";
constexpr const char* kReadyFdEnv = "PEREGRINE_READY_FD";

bool is_unix(const config::ListenAddress& address) {
  return address.addr.ss_family == AF_UNIX;
}

const char* unix_path(const sockaddr_storage& addr) {
  return reinterpret_cast<const sockaddr_un&>(addr).sun_path;
}

// Binds but does not listen yet: another process's listener is looked for in between (see
// foreign_listener), before this socket could take a share of its connections.
int open_tcp(const config::ListenAddress& address, const sockaddr_storage& addr,
             std::string* error) {
  int fd = socket(addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *error = address.text + ": socket: " + std::strerror(errno);
    return -1;
  }
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
  if (addr.ss_family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
  // Inherited by accepted sockets: responses leave at once, and accept() returns only when the
  // request's first bytes are there, so the first read seldom finds nothing.
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  setsockopt(fd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &one, sizeof one);
  socklen_t len = addr.ss_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
  if (bind(fd, reinterpret_cast<const sockaddr*>(&addr), len) != 0) {
    *error = address.text + ": bind: " + std::strerror(errno);
    if (errno == EADDRINUSE) *error += " (another process listens there)";
    ::close(fd);
    return -1;
  }
  return fd;
}

// A unix socket cannot be shared through SO_REUSEPORT: one socket serves every worker. A socket
// file left by a crash is removed, but only when nothing answers on it.
int open_unix(const config::ListenAddress& address, std::string* error) {
  const char* path = unix_path(address.addr);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *error = address.text + ": socket: " + std::strerror(errno);
    return -1;
  }
  auto fail = [&](const char* what) {
    *error = address.text + ": " + what + ": " + std::strerror(errno);
    ::close(fd);
    return -1;
  };
  const auto* sa = reinterpret_cast<const sockaddr*>(&address.addr);
  if (bind(fd, sa, address.addr_len) != 0) {
    if (errno != EADDRINUSE) return fail("bind");
    int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    bool live = probe >= 0 && connect(probe, sa, address.addr_len) == 0;
    int probe_errno = errno;
    if (probe >= 0) ::close(probe);
    if (live || probe_errno != ECONNREFUSED) {
      *error = address.text + ": address already in use (another process listens there)";
      ::close(fd);
      return -1;
    }
    LOG_INFO("removing stale socket file %s", path);
    if (unlink(path) != 0 && errno != ENOENT) return fail("unlink stale socket");
    if (bind(fd, sa, address.addr_len) != 0) return fail("bind");
  }
  if (address.mode >= 0 && chmod(path, static_cast<mode_t>(address.mode)) != 0)
    return fail("chmod");
  if (!address.owner.empty() || !address.group.empty()) {
    uid_t uid = static_cast<uid_t>(-1);
    gid_t gid = static_cast<gid_t>(-1);
    passwd* pw = address.owner.empty() ? nullptr : getpwnam(address.owner.c_str());
    group* gr = address.group.empty() ? nullptr : getgrnam(address.group.c_str());
    if ((!address.owner.empty() && !pw) || (!address.group.empty() && !gr)) {
      *error =
          address.text + ": unknown " +
          (!address.owner.empty() && !pw ? "owner " + address.owner : "group " + address.group);
      ::close(fd);
      return -1;
    }
    if (pw) uid = pw->pw_uid;
    if (gr) gid = gr->gr_gid;
    if (chown(path, uid, gid) != 0) return fail("chown");
  }
  if (listen(fd, address.backlog) != 0) return fail("listen");
  return fd;
}

// True when a listener on `other` (any family; `other_v6only` for an IPv6 one) would receive
// connections meant for `ours`: the same address, either a wildcard, or an IPv6 socket that
// also takes IPv4 (v6only off) on :: or on the v4-mapped form of our IPv4 address. Our own IPv6
// sockets are always v6only, so an IPv4 listener never overlaps them.
bool overlaps(const sockaddr_storage& ours, const sockaddr_storage& other, bool other_v6only) {
  if (ours.ss_family == AF_INET) {
    in_addr_t x = reinterpret_cast<const sockaddr_in&>(ours).sin_addr.s_addr;
    if (other.ss_family == AF_INET) {
      in_addr_t y = reinterpret_cast<const sockaddr_in&>(other).sin_addr.s_addr;
      return x == y || x == htonl(INADDR_ANY) || y == htonl(INADDR_ANY);
    }
    const in6_addr& y = reinterpret_cast<const sockaddr_in6&>(other).sin6_addr;
    if (other_v6only) return false;
    if (IN6_IS_ADDR_UNSPECIFIED(&y)) return true;
    in_addr_t mapped;
    std::memcpy(&mapped, y.s6_addr + 12, 4);
    return IN6_IS_ADDR_V4MAPPED(&y) && (mapped == x || x == htonl(INADDR_ANY));
  }
  if (other.ss_family != AF_INET6) return false;
  const in6_addr& x = reinterpret_cast<const sockaddr_in6&>(ours).sin6_addr;
  const in6_addr& y = reinterpret_cast<const sockaddr_in6&>(other).sin6_addr;
  return std::memcmp(&x, &y, sizeof x) == 0 || IN6_IS_ADDR_UNSPECIFIED(&x) ||
         IN6_IS_ADDR_UNSPECIFIED(&y);
}

struct TcpListener {
  sockaddr_storage addr{};
  bool v6only = false;
  ino_t inode = 0;
};

// Every listening TCP socket of `family` on `port`, from the kernel's sock_diag interface: it
// dumps listeners only, so the cost does not grow with the connections and TIME_WAIT entries
// /proc/net/tcp would list. False (with `error`) when the kernel refuses the query.
bool tcp_listeners(int family, uint16_t port, std::vector<TcpListener>* out, std::string* error) {
  int sock = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  if (sock < 0) {
    *error = std::string("sock_diag: ") + std::strerror(errno);
    return false;
  }
  struct {
    nlmsghdr header;
    inet_diag_req_v2 request;
  } query{};
  query.header.nlmsg_len = sizeof query;
  query.header.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  query.header.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  query.request.sdiag_family = static_cast<uint8_t>(family);
  query.request.sdiag_protocol = IPPROTO_TCP;
  query.request.idiag_states = 1u << TCP_LISTEN;
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  if (sendto(sock, &query, sizeof query, 0, reinterpret_cast<sockaddr*>(&kernel), sizeof kernel) !=
      static_cast<ssize_t>(sizeof query)) {
    *error = std::string("sock_diag: send: ") + std::strerror(errno);
    ::close(sock);
    return false;
  }
  alignas(nlmsghdr) char buffer[32 * 1024];
  for (;;) {
    ssize_t n = recv(sock, buffer, sizeof buffer, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      *error = std::string("sock_diag: recv: ") + (n < 0 ? std::strerror(errno) : "end of data");
      ::close(sock);
      return false;
    }
    int length = static_cast<int>(n);
    for (auto* h = reinterpret_cast<nlmsghdr*>(buffer); NLMSG_OK(h, length);
         h = NLMSG_NEXT(h, length)) {
      if (h->nlmsg_type == NLMSG_DONE) {
        ::close(sock);
        return true;
      }
      if (h->nlmsg_type == NLMSG_ERROR) {
        const auto* e = static_cast<const nlmsgerr*>(NLMSG_DATA(h));
        *error = std::string("sock_diag: ") + std::strerror(-e->error);
        ::close(sock);
        return false;
      }
      const auto* msg = static_cast<const inet_diag_msg*>(NLMSG_DATA(h));
      if (ntohs(msg->id.idiag_sport) != port) continue;
      TcpListener l;
      l.inode = static_cast<ino_t>(msg->idiag_inode);
      l.addr.ss_family = msg->idiag_family;
      if (msg->idiag_family == AF_INET) {
        std::memcpy(&reinterpret_cast<sockaddr_in&>(l.addr).sin_addr, msg->id.idiag_src, 4);
      } else {
        std::memcpy(&reinterpret_cast<sockaddr_in6&>(l.addr).sin6_addr, msg->id.idiag_src, 16);
      }
      // The kernel reports INET_DIAG_SKV6ONLY for every IPv6 socket.
      int attributes = static_cast<int>(h->nlmsg_len - NLMSG_LENGTH(sizeof *msg));
      for (auto* a = reinterpret_cast<const rtattr*>(msg + 1); RTA_OK(a, attributes);
           a = RTA_NEXT(a, attributes)) {
        if (a->rta_type == INET_DIAG_SKV6ONLY)
          l.v6only = *static_cast<const uint8_t*>(RTA_DATA(a)) != 0;
      }
      out->push_back(l);
    }
  }
}

// Every worker binds its own SO_REUSEPORT socket, and the kernel would just as well let another
// process of the same user join the group and take a share of the connections. So a listener
// on an overlapping address (of either family) whose socket (inode) is not one of `ours` is an
// error, like the EADDRINUSE nginx reports. Looked for before our sockets listen (nothing of the
// other process's traffic is taken) and again after (two servers started at the same moment
// both see the other).
bool foreign_listener(const sockaddr_storage& addr, const std::set<ino_t>& ours) {
  const uint16_t port = config::endpoint_port(addr);
  std::vector<TcpListener> listeners;
  std::string error;
  for (int family : {AF_INET, AF_INET6}) {
    if (!tcp_listeners(family, port, &listeners, &error)) {
      static bool warned = false;
      if (!warned) LOG_WARN("cannot look for other listeners on the same port: %s", error.c_str());
      warned = true;
      return false;
    }
  }
  for (const TcpListener& l : listeners)
    if (overlaps(addr, l.addr, l.v6only) && !ours.contains(l.inode)) return true;
  return false;
}

ino_t inode_of(int fd) {
  struct stat st;
  return fstat(fd, &st) == 0 ? st.st_ino : 0;
}

bool is_listening_socket(int fd) {
  int listening = 0;
  socklen_t len = sizeof listening;
  return fcntl(fd, F_GETFD) >= 0 &&
         getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) == 0 && listening;
}

// A socket handed over by the process that started this one (SIGUSR2).
struct Inherited {
  int fd;
  std::string text;
  sockaddr_storage addr{};
  bool used = false;
};

// PEREGRINE_LISTEN_FDS: one "FD TEXT" per line. Taken out of the environment at once, so that
// neither a later upgrade nor a child of this process sees stale numbers.
std::vector<Inherited> take_inherited_sockets() {
  std::vector<Inherited> out;
  const char* value = std::getenv(kListenFdsEnv);
  if (!value) return out;
  std::istringstream lines{std::string(value)};
  unsetenv(kListenFdsEnv);
  std::string line;
  while (std::getline(lines, line)) {
    size_t space = line.find(' ');
    if (space == std::string::npos) continue;
    int fd = std::atoi(line.substr(0, space).c_str());
    if (fd <= STDERR_FILENO || !is_listening_socket(fd)) {
      LOG_WARN("%s: %s is not a listening socket; ignored", kListenFdsEnv, line.c_str());
      continue;
    }
    fcntl(fd, F_SETFD, FD_CLOEXEC);
    Inherited socket{fd, line.substr(space + 1)};
    socklen_t len = sizeof socket.addr;
    getsockname(fd, reinterpret_cast<sockaddr*>(&socket.addr), &len);
    out.push_back(std::move(socket));
  }
  return out;
}

bool same_socket_address(const sockaddr_storage& a, const sockaddr_storage& b) {
  if (a.ss_family == AF_UNIX && b.ss_family == AF_UNIX)
    return std::strcmp(unix_path(a), unix_path(b)) == 0;
  return config::endpoint_port(a) != 0 && config::same_endpoint(a, b);
}

void raise_fd_limit() {
  rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
}

sigset_t handled_signals() {
  sigset_t set;
  sigemptyset(&set);
  for (int s : {SIGTERM, SIGINT, SIGQUIT, SIGHUP, SIGUSR1, SIGUSR2}) sigaddset(&set, s);
  return set;
}

std::vector<std::string> read_cmdline() {
  std::ifstream file("/proc/self/cmdline", std::ios::binary);
  std::vector<std::string> argv;
  std::string arg;
  while (std::getline(file, arg, '\0')) argv.push_back(arg);
  return argv;
}

std::string read_exe() {
  char path[4096];
  ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
  return n > 0 ? std::string(path, static_cast<size_t>(n)) : std::string();
}

// A binary upgrade must not fork this process: the child would hold a reference to every
// client and upstream socket until its exec, and a socket closed meanwhile stays in its worker's
// epoll set (epoll forgets a socket only when its last reference goes), so an event could reach
// a freed connection. The spawner is forked at start, before any thread or connection exists,
// keeps nothing but its end of a socket pair, and on request forks and execs the new binary with
// the listening sockets it is sent (SCM_RIGHTS) -- as nginx's master process does.
constexpr size_t kMaxPassedFds = 253;  // SCM_MAX_FD

// Strings travel NUL-terminated, a list as its count then its items.
void put_list(std::string& out, const std::vector<std::string>& items) {
  out += std::to_string(items.size());
  out += '\0';
  for (const std::string& item : items) {
    out += item;
    out += '\0';
  }
}

bool take_list(std::string_view& in, std::vector<std::string>* items) {
  auto take = [&in](std::string* out) {
    size_t end = in.find('\0');
    if (end == std::string_view::npos) return false;
    *out = std::string(in.substr(0, end));
    in.remove_prefix(end + 1);
    return true;
  };
  std::string count;
  if (!take(&count)) return false;
  items->resize(std::strtoul(count.c_str(), nullptr, 10));
  for (std::string& item : *items)
    if (!take(&item)) return false;
  return true;
}

// `exe` and `argv` are fixed here, and the environment is the one the server started with: the
// spawner keeps the privileges the server had at start (root, say, to bind a new port below
// 1024), so a request can choose the listening sockets but never what runs.
[[noreturn]] void spawner_main(int sock, const std::string& exe, std::vector<std::string> argv) {
  // Signals stay blocked (inherited): a stop of the server reaches the spawner as end-of-file.
  if (sock != 3) {
    dup2(sock, 3);
    sock = 3;
  }
  close_range(4, ~0U, 0);
  fcntl(sock, F_SETFD, FD_CLOEXEC);
  // Not value-initialized: only the pages a message lands in are ever touched, so the spawner
  // stays at ~100 KB of private memory instead of the whole buffer's megabyte.
  constexpr size_t kBufferSize = 1 << 20;
  std::unique_ptr<char[]> buffer(new char[kBufferSize]);
  for (;;) {
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxPassedFds)];
    iovec iov{buffer.get(), kBufferSize};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    ssize_t n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) _exit(0);
    std::vector<int> fds;
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      const int* data = reinterpret_cast<const int*>(CMSG_DATA(c));
      fds.insert(fds.end(), data, data + count);
    }
    std::string_view in(buffer.get(), static_cast<size_t>(n));
    std::vector<std::string> env, texts;
    for (char** e = environ; *e; ++e) env.emplace_back(*e);
    pid_t pid = -1;
    if (take_list(in, &texts) && texts.size() + 1 == fds.size()) {
      std::string listen;
      for (size_t i = 0; i < texts.size(); ++i)
        listen += std::to_string(fds[i]) + " " + texts[i] + "\n";
      // Appended, not chained with +: GCC 12 warns (-Warray-bounds, a false positive) on the
      // temporaries + makes of a short literal.
      env.emplace_back(kListenFdsEnv).append("=").append(listen);
      env.emplace_back(kReadyFdEnv).append("=").append(std::to_string(fds.back()));
      std::vector<char*> envp, args;
      for (std::string& e : env) envp.push_back(e.data());
      envp.push_back(nullptr);
      for (std::string& a : argv) args.push_back(a.data());
      args.push_back(nullptr);
      // Forked twice, so that the new server is nobody's child here and needs no reaping.
      pid_t middle = fork();
      if (middle == 0) {
        pid_t server = fork();
        if (server == 0) {
          for (int fd : fds) fcntl(fd, F_SETFD, 0);
          sigset_t none;
          sigemptyset(&none);
          sigprocmask(SIG_SETMASK, &none, nullptr);
          signal(SIGPIPE, SIG_DFL);
          execve(exe.c_str(), args.data(), envp.data());
          _exit(127);
        }
        ssize_t ignored = ::send(sock, &server, sizeof server, MSG_NOSIGNAL);
        (void)ignored;
        _exit(0);
      }
      if (middle > 0) {
        waitpid(middle, nullptr, 0);
        pid = 0;  // the middle process sent the pid
      }
    }
    for (int fd : fds) ::close(fd);
    if (pid < 0) ::send(sock, &pid, sizeof pid, MSG_NOSIGNAL);
  }
}

// Returns this process's end of the socket pair, or -1 (upgrades then are not possible).
int start_spawner(const std::string& exe, const std::vector<std::string>& argv,
                  pid_t* spawner_pid) {
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) {
    LOG_WARN("binary upgrade unavailable: socketpair: %s", std::strerror(errno));
    return -1;
  }
  pid_t pid = fork();
  if (pid == 0) {
    ::close(pair[0]);
    // The variables that describe this process's own sockets must not reach the next one.
    unsetenv(kListenFdsEnv);
    unsetenv(kReadyFdEnv);
    spawner_main(pair[1], exe, argv);
  }
  ::close(pair[1]);
  if (pid < 0) {
    LOG_WARN("binary upgrade unavailable: fork: %s", std::strerror(errno));
    ::close(pair[0]);
    return -1;
  }
  *spawner_pid = pid;
  return pair[0];
}

// Asks the spawner to start `exe`; returns the new process's pid, or -1.
pid_t spawn(int spawner, const std::vector<std::string>& texts, const std::vector<int>& fds) {
  std::string message;
  put_list(message, texts);
  std::vector<char> control(CMSG_SPACE(sizeof(int) * fds.size()));
  iovec iov{message.data(), message.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control.data();
  msg.msg_controllen = control.size();
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
  std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  if (sendmsg(spawner, &msg, MSG_NOSIGNAL) < 0) return -1;
  pid_t pid = -1;
  // The spawner answers at once (fork and exec take no notice of the configuration); a bound
  // wait keeps a wedged spawner from stopping the signal loop.
  pollfd p{spawner, POLLIN, 0};
  if (poll(&p, 1, 5000) != 1 || ::recv(spawner, &pid, sizeof pid, 0) != sizeof pid) return -1;
  return pid;
}

// The event backend, chosen once for the process (a reload keeps it). Logs the choice, and why
// io_uring cannot be used when it was asked for.
event::BackendChoice choose_backend(const config::Config& config) {
  event::Backend wanted = event::Backend::kEpoll;
  if (config.event_backend == config::EventBackend::kIoUring) wanted = event::Backend::kIoUring;
  if (config.event_backend == config::EventBackend::kAuto) wanted = event::Backend::kAuto;
  event::BackendChoice choice = event::choose_backend(wanted);
  if (!choice.ok) {
    LOG_ERROR(
        "event_backend = \"io_uring\": io_uring is unavailable here: %s (hint: set "
        "event_backend = \"auto\" to fall back to epoll, or \"epoll\")",
        choice.reason.c_str());
    return choice;
  }
  if (!choice.reason.empty()) {
    LOG_WARN("event_backend = \"auto\": using epoll, io_uring is unavailable: %s",
             choice.reason.c_str());
  }
  const char* name = choice.backend == event::Backend::kIoUring ? "io_uring" : "epoll";
  if (config.batch_wait_us > 0)
    LOG_INFO("event backend: %s (batch wait %u us)", name, config.batch_wait_us);
  else
    LOG_INFO("event backend: %s (batch wait off)", name);
  return choice;
}

}  // namespace

int worker_count(const config::Config& config) {
  if (config.workers > 0) return config.workers;
  cpu_set_t cpus;
  if (sched_getaffinity(0, sizeof cpus, &cpus) == 0) return std::max(1, CPU_COUNT(&cpus));
  return std::max(1u, std::thread::hardware_concurrency());
}

ServerProcess::ServerProcess(std::shared_ptr<const config::Config> config, HandlerRegistry registry,
                             std::function<config::LoadResult()> reload, bool handle_signals)
    : config_(std::move(config)),
      registry_(std::move(registry)),
      reload_(std::move(reload)),
      file_backed_(reload_ && !config_->text.empty()),
      handle_signals_(handle_signals),
      exe_(read_exe()),
      argv_(read_cmdline()) {}

ServerProcess::~ServerProcess() {
  if (upgrade_pipe_ >= 0) ::close(upgrade_pipe_);
}

void ServerProcess::stop(bool graceful) {
  int want = graceful ? 1 : 2;
  int current = stop_request_.load();
  while (current < want && !stop_request_.compare_exchange_weak(current, want)) {
  }
}

bool ServerProcess::bind_listeners(std::vector<std::vector<int>>& per_worker, std::string* error) {
  std::vector<Inherited> inherited = take_inherited_sockets();
  const size_t workers = per_worker.size();
  std::vector<int> owned;  // closed on failure
  auto fail = [&] {
    for (int fd : owned) ::close(fd);
    for (const Inherited& s : inherited)
      if (!s.used) ::close(s.fd);
    for (auto& fds : per_worker) fds.clear();
    return false;
  };
  for (const config::ListenAddress& address : config_->listen) {
    std::vector<int> fds;
    for (Inherited& s : inherited) {
      if (s.used || s.addr.ss_family != address.addr.ss_family) continue;
      if (s.text == address.text || same_socket_address(s.addr, address.addr)) {
        s.used = true;
        fds.push_back(s.fd);
        owned.push_back(s.fd);
      }
    }
    const bool handed_over = !fds.empty();
    sockaddr_storage bound = address.addr;
    if (is_unix(address)) {
      if (fds.empty()) {
        int fd = open_unix(address, error);
        if (fd < 0) return fail();
        owned.push_back(fd);
        fds.push_back(fd);
      }
      unix_paths_.push_back(unix_path(address.addr));
      // One socket for all: every worker polls its own descriptor of it.
      while (fds.size() < workers) {
        int fd = fcntl(fds.front(), F_DUPFD_CLOEXEC, 3);
        if (fd < 0) {
          *error = address.text + ": dup: " + std::strerror(errno);
          return fail();
        }
        owned.push_back(fd);
        fds.push_back(fd);
      }
    } else {
      if (handed_over) {
        socklen_t len = sizeof bound;
        getsockname(fds.front(), reinterpret_cast<sockaddr*>(&bound), &len);
      }
      // More workers than handed-over sockets: the extra ones join the same SO_REUSEPORT group.
      std::vector<int> fresh;
      while (fds.size() < workers) {
        int fd = open_tcp(address, bound, error);
        if (fd < 0) return fail();
        owned.push_back(fd);
        if (fds.empty()) {
          // Port 0: every worker's socket must share the port the kernel chose for the first.
          socklen_t len = sizeof bound;
          getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
        }
        fds.push_back(fd);
        fresh.push_back(fd);
      }
      std::set<ino_t> ours;
      for (int fd : fds) ours.insert(inode_of(fd));
      auto in_use = [&] {
        *error = address.text + ": address already in use (another process listens on " +
                 config::format_endpoint(bound) + ")";
        return fail();
      };
      if (foreign_listener(bound, ours)) return in_use();
      for (int fd : fresh) {
        if (listen(fd, address.backlog) != 0) {
          *error = address.text + ": listen: " + std::strerror(errno);
          return fail();
        }
      }
      if (!fresh.empty() && foreign_listener(bound, ours)) return in_use();
    }
    if (is_unix(address)) {
      LOG_INFO("%slistening on %s%s", address.admin ? "admin API " : "", address.text.c_str(),
               handed_over ? " (handed over)" : "");
    } else {
      LOG_INFO("%slistening on %s%s", address.admin ? "admin API " : "",
               config::format_endpoint(bound).c_str(), handed_over ? " (handed over)" : "");
    }
    // Handed-over sockets outnumber the workers when the new configuration has fewer: a worker
    // then polls several, so none is closed with connections in its queue.
    for (size_t i = 0; i < fds.size(); ++i) {
      per_worker[i % workers].push_back(fds[i]);
      sockets_.push_back({fds[i], address.text});
    }
  }
  for (const Inherited& s : inherited) {
    if (s.used) continue;
    LOG_WARN("a handed-over socket (%s) is no longer in the configuration; closing it",
             s.text.c_str());
    ::close(s.fd);
  }
  return true;
}

bool ServerProcess::drop_privileges(std::string* error) {
  if (config_->user.empty()) return true;
  passwd* pw = getpwnam(config_->user.c_str());
  if (geteuid() != 0) {
    // A binary upgrade starts the new process as the user the old one had become.
    if (!pw || pw->pw_uid != geteuid())
      LOG_WARN("user = \"%s\" ignored: not started as root", config_->user.c_str());
    return true;
  }
  if (!pw) {
    *error = "unknown user " + config_->user;
    return false;
  }
  gid_t gid = pw->pw_gid;
  if (!config_->group.empty()) {
    group* gr = getgrnam(config_->group.c_str());
    if (!gr) {
      *error = "unknown group " + config_->group;
      return false;
    }
    gid = gr->gr_gid;
  }
  if (initgroups(pw->pw_name, gid) != 0 || setgid(gid) != 0 || setuid(pw->pw_uid) != 0) {
    *error = std::string("cannot drop privileges: ") + std::strerror(errno);
    return false;
  }
  LOG_INFO("running as user %s", config_->user.c_str());
  return true;
}

std::shared_ptr<const config::Config> ServerProcess::running(uint64_t* generation) {
  std::lock_guard lock(reload_mutex_);
  *generation = generation_;
  return config_;
}

bool ServerProcess::probe_listener(const config::ListenAddress& address, std::string* error) {
  if (is_unix(address)) {
    // Free unless something answers there (a stale socket file is removed at the restart).
    int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    bool live = probe >= 0 && connect(probe, reinterpret_cast<const sockaddr*>(&address.addr),
                                      address.addr_len) == 0;
    if (probe >= 0) ::close(probe);
    if (live) *error = address.text + ": address already in use (another process listens there)";
    return !live;
  }
  if (config::endpoint_port(address.addr) == 0) return true;  // any free port will do
  int fd = open_tcp(address, address.addr, error);
  if (fd < 0) return false;
  std::set<ino_t> ours{inode_of(fd)};
  for (const Socket& s : sockets_) ours.insert(inode_of(s.fd));
  const bool taken = foreign_listener(address.addr, ours);
  ::close(fd);
  if (taken)
    *error = address.text + ": address already in use (another process listens on " +
             config::format_endpoint(address.addr) + ")";
  return !taken;
}

admin::ReloadOutcome ServerProcess::reload(bool probe_listeners) {
  admin::ReloadOutcome outcome;
  std::lock_guard lock(reload_mutex_);
  outcome.generation = generation_;
  if (!reload_) {
    outcome.failure = "no configuration file to re-read (quick mode)";
    LOG_WARN("reload ignored: this server has no configuration file to re-read");
    return outcome;
  }
  sd_notifyf(0, "RELOADING=1\nMONOTONIC_USEC=%llu",
             static_cast<unsigned long long>(Clock::precise_monotonic_us()));
  auto fail = [&](std::string why) {
    LOG_ERROR("reload failed: %s; the previous configuration keeps serving", why.c_str());
    sd_notify(0, "READY=1\nSTATUS=reload failed; the previous configuration keeps serving");
    metrics::registry().process().reloads_failed.add();
    outcome.failure = std::move(why);
    return outcome;
  };
  config::LoadResult result = reload_();
  if (!result.config) {
    for (const config::ConfigError& e : result.errors) LOG_ERROR("%s", e.to_string().c_str());
    outcome.errors = std::move(result.errors);
    return fail(std::to_string(outcome.errors.size()) + " error(s) in " + config_->source);
  }
  for (const config::ConfigError& w : result.warnings) LOG_WARN("%s", w.to_string().c_str());
  const config::Config& next = *result.config;
  // Listeners are bound at start only: a new one waits for a restart or an upgrade (SIGUSR2),
  // so the admin API at least makes sure it could be bound then.
  auto find = [](const config::Config& config, const config::ListenAddress& address) {
    for (const config::ListenAddress& l : config.listen)
      if (l.text == address.text) return &l;
    return static_cast<const config::ListenAddress*>(nullptr);
  };
  for (const config::ListenAddress& address : next.listen) {
    const config::ListenAddress* now = find(*config_, address);
    if (!now) {
      std::string error;
      if (probe_listeners && !probe_listener(address, &error)) return fail(error);
      outcome.restart_required.push_back("listen " + address.text +
                                         ": added; bound at the next restart or upgrade");
    } else if (now->tls != address.tls || now->http2 != address.http2) {
      outcome.restart_required.push_back("listen " + address.text +
                                         ": tls/http2 changed; applied at the next restart or "
                                         "upgrade");
    }
  }
  for (const config::ListenAddress& address : config_->listen)
    if (!find(next, address))
      outcome.restart_required.push_back("listen " + address.text +
                                         ": removed; served until the next restart or upgrade");
  if (!outcome.restart_required.empty())
    LOG_WARN(
        "reload: listen addresses (or their tls/http2) changed; restart or upgrade (SIGUSR2) to "
        "apply that part");
  if (worker_count(next) != worker_count(*config_)) {
    outcome.restart_required.push_back("workers: " + std::to_string(worker_count(*config_)) +
                                       " -> " + std::to_string(worker_count(next)) +
                                       "; applied at the next restart or upgrade");
    LOG_WARN("reload: worker count changed; restart or upgrade (SIGUSR2) to apply that part");
  }
  if (next.error_log != config_->error_log) {
    std::string error;
    if (!log::open(next.error_log, &error)) LOG_ERROR("reload: error log: %s", error.c_str());
  }
  log::set_level(next.log_level);
  config_ = result.config;
  ++generation_;
  for (Worker* worker : workers_) worker->post_config(config_);
  metrics::registry().process().reloads_succeeded.add();
  metrics::registry().process().generation.set(static_cast<int64_t>(generation_));
  LOG_INFO("configuration reloaded from %s", config_->source.c_str());
  sd_notify(0, "READY=1\nSTATUS=serving");
  outcome.ok = true;
  outcome.generation = generation_;
  return outcome;
}

void ServerProcess::write_pid_file() {
  if (config_->pid_file.empty()) return;
  std::ofstream pid(config_->pid_file, std::ios::trunc);
  pid << getpid() << '\n';
  if (!pid) LOG_WARN("cannot write pid file %s", config_->pid_file.c_str());
}

void ServerProcess::remove_pid_file() {
  if (config_->pid_file.empty()) return;
  // After an upgrade the file names the new process; it is not ours to remove.
  std::ifstream file(config_->pid_file);
  long pid = 0;
  if (file >> pid && pid == getpid()) unlink(config_->pid_file.c_str());
}

void ServerProcess::start_upgrade() {
  if (upgrade_pid_ > 0) {
    LOG_WARN("SIGUSR2 ignored: an upgrade is already under way (process %d)", upgrade_pid_);
    return;
  }
  if (handed_over_ || stop_request_.load() != 0) {
    LOG_WARN("SIGUSR2 ignored: this process is stopping");
    return;
  }
  if (spawner_ < 0) {
    LOG_ERROR("upgrade: not possible in this process (no spawner)");
    return;
  }
  if (sockets_.size() + 1 > kMaxPassedFds) {
    LOG_ERROR("upgrade: %zu listening sockets are more than one message can pass (%zu)",
              sockets_.size(), kMaxPassedFds - 1);
    return;
  }
  int ready[2];
  if (pipe2(ready, O_CLOEXEC) != 0) {
    LOG_ERROR("upgrade: pipe: %s", std::strerror(errno));
    return;
  }
  std::vector<std::string> texts;
  std::vector<int> fds;
  for (const Socket& s : sockets_) {
    texts.push_back(s.text);
    fds.push_back(s.fd);
  }
  fds.push_back(ready[1]);
  pid_t pid = spawn(spawner_, texts, fds);
  ::close(ready[1]);
  if (pid <= 0) {
    LOG_ERROR("upgrade: the spawner could not start %s", exe_.c_str());
    ::close(ready[0]);
    return;
  }
  fcntl(ready[0], F_SETFL, O_NONBLOCK);
  upgrade_pid_ = pid;
  upgrade_pipe_ = ready[0];
  upgrade_deadline_ = std::chrono::steady_clock::now() + kUpgradeTimeout;
  LOG_INFO("upgrade: started %s as process %d with %zu listening socket(s)", exe_.c_str(), pid,
           sockets_.size());
}

void ServerProcess::check_upgrade() {
  if (upgrade_pid_ <= 0) return;
  char byte = 0;
  ssize_t n = ::read(upgrade_pipe_, &byte, 1);
  if (n == 1) {
    LOG_INFO("upgrade: process %d is serving; this one (%d) stops gracefully", upgrade_pid_,
             getpid());
    sd_notifyf(0, "MAINPID=%d\nSTATUS=upgraded", static_cast<int>(upgrade_pid_));
    handed_over_ = true;
  } else if (n < 0 && errno == EAGAIN) {
    if (std::chrono::steady_clock::now() < upgrade_deadline_) return;
    kill(upgrade_pid_, SIGKILL);
    LOG_ERROR(
        "upgrade failed: process %d did not report ready within %lld s; killed it, this "
        "process keeps serving",
        upgrade_pid_, static_cast<long long>(kUpgradeTimeout.count()));
  } else {
    // Only the new process held the pipe's write end: it exited (or exec failed).
    LOG_ERROR("upgrade failed: process %d exited before serving; this process keeps serving",
              upgrade_pid_);
  }
  ::close(upgrade_pipe_);
  upgrade_pipe_ = -1;
  upgrade_pid_ = -1;
  if (handed_over_) {
    stop(true);
  } else {
    std::lock_guard lock(reload_mutex_);
    write_pid_file();  // the failed process may have rewritten it before it died
  }
}

int ServerProcess::run() {
  signal(SIGPIPE, SIG_IGN);
  raise_fd_limit();
  sigset_t signals = handled_signals();
  if (handle_signals_) pthread_sigmask(SIG_BLOCK, &signals, nullptr);  // workers inherit the mask
  if (const char* ready = std::getenv(kReadyFdEnv)) {
    ready_fd_ = std::atoi(ready);
    unsetenv(kReadyFdEnv);
    if (ready_fd_ <= STDERR_FILENO || fcntl(ready_fd_, F_SETFD, FD_CLOEXEC) != 0) ready_fd_ = -1;
  }

  const event::BackendChoice backend = choose_backend(*config_);
  if (!backend.ok) {
    if (ready_fd_ >= 0) ::close(ready_fd_);
    return 1;
  }
  const int workers = worker_count(*config_);
  std::vector<std::vector<int>> listen_fds(static_cast<size_t>(workers));
  std::string error;
  if (!bind_listeners(listen_fds, &error)) {
    LOG_ERROR("%s", error.c_str());
    if (ready_fd_ >= 0) ::close(ready_fd_);
    return 1;
  }

  // Forked while this process is still single-threaded and has no client connection open.
  if (handle_signals_ && !exe_.empty() && !argv_.empty())
    spawner_ = start_spawner(exe_, argv_, &spawner_pid_);
  int status = 0;
  log::start_writer();
  {
    AccessLogWriter log_writer;
    std::vector<std::unique_ptr<Worker>> pool;
    std::vector<std::thread> threads;
    // Workers open their roots and log files here, while we may still be root: a log under
    // /var/log stays writable after the switch to an unprivileged user, as with nginx's master.
    for (int i = 0; i < workers; ++i) {
      pool.push_back(std::make_unique<Worker>(i, listen_fds[static_cast<size_t>(i)], config_,
                                              registry_, log_writer, workers, backend.backend));
      if (!pool.back()->ok()) {
        LOG_ERROR("%s", pool.back()->error().c_str());
        status = 1;
        break;
      }
    }
    if (status != 0)  // workers own their listeners; close the ones never handed out
      for (size_t j = pool.size(); j < listen_fds.size(); ++j)
        for (int fd : listen_fds[j]) ::close(fd);
    // Started by an upgrade, the pid file is written only once serving, so that a new binary
    // that fails leaves the old process's file alone.
    if (status == 0 && ready_fd_ < 0) write_pid_file();
    for (auto& worker : pool) worker->set_peers(&pool);  // post_to()/post_all() reach them all
    if (status == 0 && !drop_privileges(&error)) {
      LOG_ERROR("%s", error.c_str());
      status = 1;
    }
    if (status == 0) {
      metrics::registry().process().workers.set(workers);
      metrics::registry().process().generation.set(1);
      metrics::registry().process().start_seconds.set(static_cast<int64_t>(time(nullptr)));
      {
        std::lock_guard lock(reload_mutex_);
        for (auto& worker : pool) workers_.push_back(worker.get());
      }
      admin::set_control(this);
      for (auto& worker : pool) threads.emplace_back([&worker] { worker->run(); });
      LOG_INFO("peregrine started: %d worker(s)", workers);
      if (ready_fd_ >= 0) {
        // The old process tells systemd our pid (MAINPID) and drains once it reads this.
        std::lock_guard lock(reload_mutex_);
        write_pid_file();
        ssize_t ignored = ::write(ready_fd_, "R", 1);
        (void)ignored;
        ::close(ready_fd_);
        ready_fd_ = -1;
      } else {
        sd_notifyf(0, "READY=1\nSTATUS=serving\nMAINPID=%d", static_cast<int>(getpid()));
      }
      bool stopping = false;
      for (;;) {
        if (int request = stop_request_.load()) {
          if (!stopping && !handed_over_) sd_notify(0, "STOPPING=1");
          stopping = true;
          for (auto& worker : pool) worker->post_stop(request == 1, handed_over_);
          if (upgrade_pid_ > 0) {
            // Stopping while a new binary starts: it would serve alone, unasked for.
            kill(upgrade_pid_, SIGKILL);
            upgrade_pid_ = -1;
          }
          break;
        }
        check_upgrade();
        if (!handle_signals_) {
          usleep(100 * 1000);
          continue;
        }
        timespec tick{0, 200 * 1000 * 1000};
        int signal_number = sigtimedwait(&signals, nullptr, &tick);
        switch (signal_number) {
          case SIGTERM:
          case SIGINT:
            LOG_INFO("stopping (signal %d)", signal_number);
            stop(false);
            break;
          case SIGQUIT:
            LOG_INFO("stopping gracefully (SIGQUIT)");
            stop(true);
            break;
          case SIGHUP:
            reload(false);
            break;
          case SIGUSR1:
            log::reopen();
            log_writer.reopen_all();
            LOG_INFO("log files reopened");
            break;
          case SIGUSR2:
            start_upgrade();
            break;
          default:
            break;
        }
      }
      for (auto& t : threads) t.join();
      admin::set_control(nullptr);
      {
        std::lock_guard lock(reload_mutex_);
        workers_.clear();
      }
      pool.clear();
    }
    if (uint64_t dropped = log_writer.dropped_bytes())
      LOG_WARN("access log: %llu bytes dropped because the log could not keep up",
               static_cast<unsigned long long>(dropped));
  }
  if (!handed_over_)
    for (const std::string& path : unix_paths_) unlink(path.c_str());
  remove_pid_file();
  LOG_INFO("stopped");
  log::stop_writer();
  if (ready_fd_ >= 0) ::close(ready_fd_);
  if (spawner_ >= 0) {
    ::close(spawner_);  // the spawner exits when it reads end-of-file
    waitpid(spawner_pid_, nullptr, 0);
  }
  return status;
}

}  // namespace peregrine::server
