#include "server/server_process.h"

#include <grp.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <thread>

#include "config/listen_address.h"
#include "core/log.h"
#include "server/access_log.h"
#include "server/worker.h"

namespace peregrine::server {
namespace {

int open_listener(const config::ListenAddress& address, const sockaddr_storage& addr,
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
    ::close(fd);
    return -1;
  }
  if (listen(fd, address.backlog) != 0) {
    *error = address.text + ": listen: " + std::strerror(errno);
    ::close(fd);
    return -1;
  }
  return fd;
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
  for (int s : {SIGTERM, SIGINT, SIGQUIT, SIGHUP, SIGUSR1}) sigaddset(&set, s);
  return set;
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
      handle_signals_(handle_signals) {}

ServerProcess::~ServerProcess() = default;

void ServerProcess::stop(bool graceful) {
  int want = graceful ? 1 : 2;
  int current = stop_request_.load();
  while (current < want && !stop_request_.compare_exchange_weak(current, want)) {
  }
}

bool ServerProcess::bind_listeners(std::vector<std::vector<int>>& per_worker, std::string* error) {
  for (const config::ListenAddress& address : config_->listen) {
    sockaddr_storage addr = address.addr;
    for (size_t w = 0; w < per_worker.size(); ++w) {
      int fd = open_listener(address, addr, error);
      if (fd < 0) return false;
      if (w == 0) {
        // Port 0: every worker's socket must share the port the kernel chose for the first.
        socklen_t len = sizeof addr;
        getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
        LOG_INFO("listening on %s", config::format_endpoint(addr).c_str());
      }
      per_worker[w].push_back(fd);
    }
  }
  return true;
}

bool ServerProcess::drop_privileges(std::string* error) {
  if (config_->user.empty()) return true;
  if (geteuid() != 0) {
    LOG_WARN("user = \"%s\" ignored: not started as root", config_->user.c_str());
    return true;
  }
  passwd* pw = getpwnam(config_->user.c_str());
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

void ServerProcess::reload() {
  if (!reload_) {
    LOG_WARN("SIGHUP ignored: this server has no configuration file to re-read");
    return;
  }
  config::LoadResult result = reload_();
  if (!result.config) {
    for (const config::ConfigError& e : result.errors) LOG_ERROR("%s", e.to_string().c_str());
    LOG_ERROR("reload failed: %zu error(s); the previous configuration keeps serving",
              result.errors.size());
    return;
  }
  const config::Config& next = *result.config;
  bool same_listen = next.listen.size() == config_->listen.size();
  for (size_t i = 0; same_listen && i < next.listen.size(); ++i)
    same_listen = next.listen[i].text == config_->listen[i].text;
  if (!same_listen) LOG_WARN("reload: listen addresses changed; restart to apply that part");
  if (worker_count(next) != worker_count(*config_))
    LOG_WARN("reload: worker count changed; restart to apply that part");
  if (next.error_log != config_->error_log) {
    std::string error;
    if (!log::open(next.error_log, &error)) LOG_ERROR("reload: error log: %s", error.c_str());
  }
  log::set_level(next.log_level);
  config_ = result.config;
  to_workers_ = true;
  LOG_INFO("configuration reloaded from %s", config_->source.c_str());
}

int ServerProcess::run() {
  signal(SIGPIPE, SIG_IGN);
  raise_fd_limit();
  sigset_t signals = handled_signals();
  if (handle_signals_) pthread_sigmask(SIG_BLOCK, &signals, nullptr);  // workers inherit the mask

  const int workers = worker_count(*config_);
  std::vector<std::vector<int>> listen_fds(static_cast<size_t>(workers));
  std::string error;
  if (!bind_listeners(listen_fds, &error)) {
    LOG_ERROR("%s", error.c_str());
    for (auto& fds : listen_fds)
      for (int fd : fds) ::close(fd);
    return 1;
  }

  int status = 0;
  {
    AccessLogWriter log_writer;
    std::vector<std::unique_ptr<Worker>> pool;
    std::vector<std::thread> threads;
    // Workers open their roots and log files here, while we may still be root: a log under
    // /var/log stays writable after the switch to an unprivileged user, as with nginx's master.
    for (int i = 0; i < workers; ++i) {
      pool.push_back(std::make_unique<Worker>(i, listen_fds[static_cast<size_t>(i)], config_,
                                              registry_, log_writer, workers));
      if (!pool.back()->ok()) {
        LOG_ERROR("%s", pool.back()->error().c_str());
        status = 1;
        break;
      }
    }
    if (status != 0)  // workers own their listeners; close the ones never handed out
      for (size_t j = pool.size(); j < listen_fds.size(); ++j)
        for (int fd : listen_fds[j]) ::close(fd);
    if (status == 0 && !config_->pid_file.empty()) {
      std::ofstream pid(config_->pid_file, std::ios::trunc);
      pid << getpid() << '\n';
      if (!pid) LOG_WARN("cannot write pid file %s", config_->pid_file.c_str());
    }
    if (status == 0 && !drop_privileges(&error)) {
      LOG_ERROR("%s", error.c_str());
      status = 1;
    }
    if (status == 0) {
      for (auto& worker : pool) threads.emplace_back([&worker] { worker->run(); });
      LOG_INFO("peregrine started: %d worker(s)", workers);
      for (;;) {
        if (int request = stop_request_.load()) {
          for (auto& worker : pool) worker->post_stop(request == 1);
          break;
        }
        if (to_workers_) {
          to_workers_ = false;
          for (auto& worker : pool) worker->post_config(config_);
        }
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
            reload();
            break;
          case SIGUSR1:
            log::reopen();
            log_writer.reopen_all();
            LOG_INFO("log files reopened");
            break;
          default:
            break;
        }
      }
      for (auto& t : threads) t.join();
      pool.clear();
    }
    if (uint64_t dropped = log_writer.dropped_bytes())
      LOG_WARN("access log: %llu bytes dropped because the log could not keep up",
               static_cast<unsigned long long>(dropped));
  }
  if (!config_->pid_file.empty()) unlink(config_->pid_file.c_str());
  LOG_INFO("stopped");
  return status;
}

}  // namespace peregrine::server
