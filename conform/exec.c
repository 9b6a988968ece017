/* exec.c - a child process spoken to in JSON lines (see exec.h). Every wait goes through poll()
 * with a deadline; while waiting for either direction both of the child's output pipes are
 * drained, so a child that writes a lot of stderr (or answers early) never deadlocks us. */
#define _POSIX_C_SOURCE 200809L
#include "conform/exec.h"
#include "core/mutant.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#define TAIL_CAP 2048

struct rs_exec {
  char *cmd;
  pid_t pid;
  int in, out, err;       /* our ends: child's stdin (write), stdout, stderr (read) */
  char *buf;              /* bytes read from stdout; buf[start..len) not yet handed out */
  size_t len, cap, start;
  size_t max_line;
  char tail[TAIL_CAP + 1];/* the last bytes of stderr */
  size_t tail_len;
  char tail_text[TAIL_CAP + 1];
  int exited, status;
  char exit_text[96];
  rs_exec_fault fault;
};

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void set_nonblock(int fd) {
  int fl = fcntl(fd, F_GETFL);
  if (fl >= 0) fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

/* Threads per child (rs_exec_set_child_threads): 0 leaves the environment as it is. */
static int child_threads;
static const char *const THREAD_VARS[] = {"OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"};
#define NTHREAD_VARS (sizeof THREAD_VARS / sizeof THREAD_VARS[0])
extern char **environ;

void rs_exec_set_child_threads(int n) { child_threads = n > 0 ? n : 0; }

/* The child's environment: ours, plus each thread variable the user did not set (made before the
 * fork: the child only calls execle). NULL: ours as it is (*own: 0), or out of memory. */
static char **child_env(char store[NTHREAD_VARS][48], int *own) {
  *own = 0;
  if (!child_threads) return environ;
  size_t n = 0;
  while (environ && environ[n]) n++;
  char **env = malloc((n + NTHREAD_VARS + 1) * sizeof *env);
  if (!env) return NULL;
  if (n) memcpy(env, environ, n * sizeof *env);
  for (size_t i = 0; i < NTHREAD_VARS; i++) {
    if (getenv(THREAD_VARS[i]) && !RS_MUTANT(762)) continue; /* the user's own setting wins */
    snprintf(store[i], 48, "%s=%d", THREAD_VARS[i], child_threads);
    env[n++] = store[i];
  }
  env[n] = NULL;
  *own = 1;
  return env;
}

static void close_fd(int *fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

static rs_status spawn(rs_exec *x) {
  int pin[2] = {-1, -1}, pout[2] = {-1, -1}, perr[2] = {-1, -1};
  x->fault = RS_EXEC_FINE;
  x->exited = 0;
  x->len = x->start = 0;
  x->tail_len = 0;
  if (pipe(pin) || pipe(pout) || pipe(perr)) {
    int e = errno;
    for (int i = 0; i < 2; i++) {
      if (pin[i] >= 0) close(pin[i]);
      if (pout[i] >= 0) close(pout[i]);
      if (perr[i] >= 0) close(perr[i]);
    }
    x->fault = RS_EXEC_SPAWN;
    return rs_fail(RS_ERR_IO, "exec: pipe: %s", strerror(e));
  }
  char store[NTHREAD_VARS][48];
  int own_env = 0;
  char **env = child_env(store, &own_env);
  if (!env) env = environ; /* out of memory: the variables are a hint, the run goes on without them */
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    int e = errno;
    if (own_env) free(env);
    close(pin[0]), close(pin[1]), close(pout[0]), close(pout[1]), close(perr[0]), close(perr[1]);
    x->fault = RS_EXEC_SPAWN;
    return rs_fail(RS_ERR_IO, "exec: fork: %s", strerror(e));
  }
  if (pid == 0) {
#ifdef __linux__
    /* the child dies with the process that started it (conform, or one of its --jobs workers):
     * a worker killed by the runner leaves no backend behind */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127); /* it died before the line above */
#else
    (void)parent;
#endif
    setpgid(0, 0);
    signal(SIGPIPE, SIG_DFL);
    dup2(pin[0], 0), dup2(pout[1], 1), dup2(perr[1], 2);
    close(pin[0]), close(pin[1]), close(pout[0]), close(pout[1]), close(perr[0]), close(perr[1]);
    execle("/bin/sh", "sh", "-c", x->cmd, (char *)NULL, env);
    _exit(127);
  }
  if (own_env) free(env);
  setpgid(pid, pid); /* also here: no race with a kill of the group before the child ran */
  close(pin[0]), close(pout[1]), close(perr[1]);
  fcntl(pin[1], F_SETFD, FD_CLOEXEC), fcntl(pout[0], F_SETFD, FD_CLOEXEC), fcntl(perr[0], F_SETFD, FD_CLOEXEC);
  x->in = pin[1], x->out = pout[0], x->err = perr[0];
  set_nonblock(x->in), set_nonblock(x->out), set_nonblock(x->err);
  x->pid = pid;
  return RS_OK;
}

rs_status rs_exec_start(const char *cmd, size_t max_line, rs_exec **out) {
  *out = NULL;
  if (!cmd || !cmd[0]) return rs_fail(RS_ERR_INVALID, "exec: empty command");
  /* A child that dies while we write must show up as EPIPE, not kill the harness. */
  signal(SIGPIPE, SIG_IGN);
  rs_exec *x = calloc(1, sizeof *x);
  if (!x || !(x->cmd = strdup(cmd))) {
    free(x);
    return rs_fail(RS_ERR_NOMEM, "exec: out of memory");
  }
  x->in = x->out = x->err = -1;
  x->max_line = max_line ? max_line : ((size_t)1 << 30);
  rs_status st = spawn(x);
  if (st) {
    free(x->cmd);
    free(x);
    return st;
  }
  *out = x;
  return RS_OK;
}

static void tail_add(rs_exec *x, const char *p, size_t n) {
  if (n >= TAIL_CAP) {
    memcpy(x->tail, p + n - TAIL_CAP, TAIL_CAP);
    x->tail_len = TAIL_CAP;
    return;
  }
  if (x->tail_len + n > TAIL_CAP) {
    size_t drop = x->tail_len + n - TAIL_CAP;
    memmove(x->tail, x->tail + drop, x->tail_len - drop);
    x->tail_len -= drop;
  }
  memcpy(x->tail + x->tail_len, p, n);
  x->tail_len += n;
}

/* Read what stderr has; 0 at EOF. */
static void drain_err(rs_exec *x) {
  char b[4096];
  for (;;) {
    ssize_t r = read(x->err, b, sizeof b);
    if (r > 0) tail_add(x, b, (size_t)r);
    else {
      if (r == 0) close_fd(&x->err);
      return;
    }
  }
}

/* Read what stdout has into buf; returns -1 at EOF, -2 past max_line, 0 otherwise. */
static int drain_out(rs_exec *x) {
  for (;;) {
    if (x->cap - x->len < 65536) {
      if (x->start) { /* drop what was handed out before growing */
        memmove(x->buf, x->buf + x->start, x->len - x->start);
        x->len -= x->start;
        x->start = 0;
      }
      if (x->cap - x->len < 65536) {
        size_t nc = x->cap ? x->cap * 2 : 131072;
        char *nb = realloc(x->buf, nc);
        if (!nb) return -2;
        x->buf = nb, x->cap = nc;
      }
    }
    ssize_t r = read(x->out, x->buf + x->len, x->cap - x->len - 1);
    if (r > 0) {
      x->len += (size_t)r;
      if (x->len - x->start > x->max_line + 1 && !memchr(x->buf + x->start, '\n', x->len - x->start))
        return -2;
      continue;
    }
    if (r == 0) return -1;
    return 0;
  }
}

/* 1 when a process of group pgid other than a zombie is left (Linux /proc; elsewhere: kill(-pgid, 0)). */
static int group_running(pid_t pgid) {
  DIR *d = opendir("/proc");
  if (!d) return 1;
  struct dirent *e;
  int left = 0;
  while (!left && (e = readdir(d))) {
    if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
    char path[300], buf[512];
    snprintf(path, sizeof path, "/proc/%.255s/stat", e->d_name);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *rp = strrchr(buf, ')'), state = 0;
    long ppid = 0, pg = 0;
    if (rp && sscanf(rp + 1, " %c %ld %ld", &state, &ppid, &pg) == 3 && pg == (long)pgid && state != 'Z' &&
        state != 'X')
      left = 1;
  }
  closedir(d);
  return left;
}

static void reap(rs_exec *x, int block) {
  if (x->exited || x->pid <= 0) return;
  int st;
  pid_t r = waitpid(x->pid, &st, block ? 0 : WNOHANG);
  if (r == x->pid) x->exited = 1, x->status = st;
}

static rs_status crashed(rs_exec *x, const char *what) {
  /* The pipe closed: give the child a moment to finish dying so the report says how. */
  for (int i = 0; i < 50 && !x->exited; i++) {
    reap(x, 0);
    if (!x->exited) nanosleep(&(struct timespec){0, 10000000}, NULL);
  }
  if (x->err >= 0) drain_err(x);
  x->fault = RS_EXEC_CRASHED;
  return rs_fail(RS_ERR_TRANSPORT, "backend process %s (%s)", what, rs_exec_exit_text(x));
}

/* Wait for the child: until `wbuf` is written (when set) or a line is in buf (when not). */
static rs_status pump(rs_exec *x, const char *wbuf, size_t wlen, double timeout) {
  double deadline = now() + timeout;
  size_t done = 0;
  for (;;) {
    if (wbuf && done == wlen) return RS_OK;
    if (!wbuf && memchr(x->buf + x->start, '\n', x->len - x->start)) return RS_OK;
    struct pollfd p[3];
    int n = 0, iw = -1, io = -1, ie = -1;
    if (wbuf) {
      if (x->in < 0) return crashed(x, "closed its stdin");
      iw = n, p[n++] = (struct pollfd){x->in, POLLOUT, 0};
    }
    if (x->out >= 0) io = n, p[n++] = (struct pollfd){x->out, POLLIN, 0};
    else if (!wbuf) return crashed(x, "closed its stdout");
    if (x->err >= 0) ie = n, p[n++] = (struct pollfd){x->err, POLLIN, 0};
    double left = deadline - now();
    if (left <= 0) {
      x->fault = RS_EXEC_TIMEOUT;
      reap(x, 0);
      if (!wbuf && x->len > x->start) { /* half a line, then silence: say what arrived */
        char q[100];
        rs_exec_quote_prefix(x->buf + x->start, x->len - x->start, q, sizeof q);
        return rs_fail(RS_ERR_TRANSPORT,
                       "backend process timed out after %.3g s: it wrote half a line and then went silent "
                       "(%zu bytes, no newline: %s)", timeout, x->len - x->start, q);
      }
      return rs_fail(RS_ERR_TRANSPORT, "backend process timed out after %.3g s (%s)", timeout,
                     wbuf ? "not reading its stdin" : "no answer line");
    }
    int r = poll(p, (nfds_t)n, (int)(left * 1000) + 1);
    if (r < 0) {
      if (errno == EINTR) continue;
      return rs_fail(RS_ERR_IO, "exec: poll: %s", strerror(errno));
    }
    if (ie >= 0 && p[ie].revents) drain_err(x);
    if (io >= 0 && p[io].revents) {
      int d = drain_out(x);
      if (d == -2) {
        x->fault = RS_EXEC_GARBAGE;
        return rs_fail(RS_ERR_TRANSPORT, "backend process wrote a line longer than %zu bytes", x->max_line);
      }
      if (d == -1) {
        close_fd(&x->out);
        if (!wbuf && !memchr(x->buf + x->start, '\n', x->len - x->start))
          return crashed(x, x->len > x->start ? "ended its stdout in the middle of a line" : "closed its stdout");
      }
    }
    if (iw >= 0 && p[iw].revents) {
      ssize_t w = write(x->in, wbuf + done, wlen - done);
      if (w > 0) done += (size_t)w;
      else if (w < 0 && errno != EAGAIN && errno != EINTR) {
        close_fd(&x->in);
        return crashed(x, "stopped reading its stdin");
      }
    }
  }
}

rs_status rs_exec_send(rs_exec *x, const char *line, double timeout) {
  x->fault = RS_EXEC_FINE;
  size_t n = strlen(line);
  rs_status st = pump(x, line, n, timeout);
  if (st == RS_OK) st = pump(x, "\n", 1, timeout);
  return st;
}

rs_status rs_exec_recv(rs_exec *x, double timeout, const char **line) {
  *line = NULL;
  x->fault = RS_EXEC_FINE;
  if (!x->buf) {
    x->buf = malloc(131072);
    if (!x->buf) return rs_fail(RS_ERR_NOMEM, "exec: out of memory");
    x->cap = 131072;
  }
  rs_status st = pump(x, NULL, 0, timeout);
  if (st) return st;
  char *b = x->buf + x->start, *nl = memchr(b, '\n', x->len - x->start);
  *nl = 0;
  if (nl > b && nl[-1] == '\r') nl[-1] = 0;
  x->start = (size_t)(nl + 1 - x->buf);
  if ((size_t)(nl - b) > x->max_line) {
    x->fault = RS_EXEC_GARBAGE;
    return rs_fail(RS_ERR_TRANSPORT, "backend process wrote a line longer than %zu bytes", x->max_line);
  }
  if (memchr(b, 0, (size_t)(nl - b))) {
    x->fault = RS_EXEC_GARBAGE;
    return rs_fail(RS_ERR_TRANSPORT, "backend process wrote a NUL byte in its answer line");
  }
  *line = b;
  return RS_OK;
}

void rs_exec_quote_prefix(const char *p, size_t n, char *out, size_t cap) {
  size_t k = 0, i = 0;
  if (cap < 8) {
    if (cap) out[0] = 0;
    return;
  }
  out[k++] = '\'';
  for (; i < n && k + 9 < cap; i++) {
    unsigned char c = (unsigned char)p[i];
    if (c == '\n') out[k++] = '\\', out[k++] = 'n';
    else if (c == '\'' || c == '\\') out[k++] = '\\', out[k++] = (char)c;
    else if (c >= 0x20 && c < 0x7f) out[k++] = (char)c;
    else k += (size_t)snprintf(out + k, cap - k, "\\x%02x", c);
  }
  out[k++] = '\'';
  if (i < n) memcpy(out + k, "...", 3), k += 3;
  out[k] = 0;
}

size_t rs_exec_pending(rs_exec *x, double settle, char *quote, size_t cap) {
  if (quote && cap) quote[0] = 0;
  if (!x->buf || x->out < 0) return x->buf ? x->len - x->start : 0;
  double deadline = now() + settle;
  for (;;) {
    int d = drain_out(x);
    if (d == -1) close_fd(&x->out);
    if (x->len > x->start || d != 0) break;
    double left = deadline - now();
    if (left <= 0) break;
    struct pollfd p = {x->out, POLLIN, 0};
    if (poll(&p, 1, (int)(left * 1000) + 1) <= 0) break;
  }
  size_t n = x->len - x->start;
  if (n && quote) rs_exec_quote_prefix(x->buf + x->start, n, quote, cap);
  return n;
}

rs_exec_fault rs_exec_last_fault(const rs_exec *x) { return x->fault; }
void rs_exec_set_garbage(rs_exec *x) { x->fault = RS_EXEC_GARBAGE; }

const char *rs_exec_fault_name(rs_exec_fault f) {
  switch (f) {
    case RS_EXEC_FINE: return "fine";
    case RS_EXEC_CRASHED: return "crashed";
    case RS_EXEC_TIMEOUT: return "timeout";
    case RS_EXEC_GARBAGE: return "garbage";
    case RS_EXEC_SPAWN: return "spawn";
  }
  return "?";
}

const char *rs_exec_stderr_tail(rs_exec *x) {
  if (x->err >= 0) drain_err(x);
  size_t n = x->tail_len, s = 0;
  /* Start at a line boundary when the tail was cut. */
  if (n == TAIL_CAP) {
    while (s < n && x->tail[s] != '\n') s++;
    if (s < n) s++;
  }
  while (n > s && (x->tail[n - 1] == '\n' || x->tail[n - 1] == '\r')) n--;
  memcpy(x->tail_text, x->tail + s, n - s);
  x->tail_text[n - s] = 0;
  return x->tail_text;
}

const char *rs_exec_exit_text(rs_exec *x) {
  reap(x, 0);
  if (!x->exited) snprintf(x->exit_text, sizeof x->exit_text, "running");
  else if (WIFEXITED(x->status))
    snprintf(x->exit_text, sizeof x->exit_text, "exited with status %d", WEXITSTATUS(x->status));
  else if (WIFSIGNALED(x->status)) {
    int s = WTERMSIG(x->status);
    const char *nm = s == SIGSEGV ? "SIGSEGV" : s == SIGABRT ? "SIGABRT" : s == SIGKILL ? "SIGKILL"
                   : s == SIGBUS ? "SIGBUS" : s == SIGFPE ? "SIGFPE" : s == SIGTERM ? "SIGTERM" : "";
    snprintf(x->exit_text, sizeof x->exit_text, "killed by signal %d%s%s%s", s, nm[0] ? " (" : "", nm,
             nm[0] ? ")" : "");
  } else
    snprintf(x->exit_text, sizeof x->exit_text, "ended (status 0x%x)", (unsigned)x->status);
  return x->exit_text;
}

int rs_exec_pid(const rs_exec *x) { return (int)x->pid; }

void rs_exec_stop(rs_exec *x, double grace) {
  if (!x || x->pid <= 0) return;
  close_fd(&x->in);
  double deadline = now() + grace;
  while (!x->exited) {
    reap(x, 0);
    if (x->exited || now() >= deadline) break;
    /* keep draining so a child blocked on a full pipe can finish */
    struct pollfd p[2];
    int n = 0;
    if (x->out >= 0) p[n++] = (struct pollfd){x->out, POLLIN, 0};
    if (x->err >= 0) p[n++] = (struct pollfd){x->err, POLLIN, 0};
    if (n) {
      poll(p, (nfds_t)n, 10);
      if (x->err >= 0) drain_err(x);
      if (x->out >= 0) {
        x->len = x->start = 0; /* nothing more is read from a stopping child */
        if (x->buf && drain_out(x) == -1) close_fd(&x->out);
      }
    } else
      nanosleep(&(struct timespec){0, 10000000}, NULL);
  }
  if (!x->exited) {
    kill(-x->pid, SIGKILL); /* the child's own process group: sh and what it started */
    kill(x->pid, SIGKILL);
  }
  /* Reap the child and wait (bounded) until nothing of its process group runs any more: a killed
   * grandchild (what sh started) is not ours to wait for, but it must be gone before conform goes
   * on or exits, so no backend outlives the harness. */
  double until = now() + RS_EXEC_REAP_SECONDS;
  for (;;) {
    reap(x, 0);
    int group = kill(-x->pid, 0) == 0 && group_running(x->pid);
    if ((x->exited && !group) || now() >= until) break;
    if (group) kill(-x->pid, SIGKILL);
    nanosleep(&(struct timespec){0, 2000000}, NULL);
  }
  close_fd(&x->out);
  close_fd(&x->err);
}

rs_status rs_exec_restart(rs_exec *x) {
  rs_exec_stop(x, 0);
  x->pid = -1;
  return spawn(x);
}

void rs_exec_forget(rs_exec *x) {
  if (!x) return;
  close_fd(&x->in);
  close_fd(&x->out);
  close_fd(&x->err);
  free(x->buf);
  free(x->cmd);
  free(x);
}

const char *rs_exec_cmd(const rs_exec *x) { return x->cmd; }

void rs_exec_free(rs_exec *x, double grace) {
  if (!x) return;
  rs_exec_stop(x, grace);
  free(x->buf);
  free(x->cmd);
  free(x);
}

void rs_exec_quote(const char *s, char *out, size_t cap) {
  size_t n = 0;
  if (cap < 3) return;
  out[n++] = '\'';
  for (; *s && n + 6 < cap; s++) {
    if (*s == '\'') {
      memcpy(out + n, "'\\''", 4);
      n += 4;
    } else
      out[n++] = *s;
  }
  out[n++] = '\'';
  out[n] = 0;
}
