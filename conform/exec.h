/* exec.h - one child process spoken to in JSON lines: spawned with `sh -c CMD`, a line written to
 * its stdin, a line read from its stdout within a timeout, its stderr kept (the last lines) for the
 * failure report, never parsed. Generic: the conformance backends and the planner fuzzer both use
 * it. A child that exits, hangs or writes something that is not one line of JSON is a fault of
 * the exchange (rs_exec_fault), never of the harness; rs_exec_restart gives a fresh child. */
#ifndef RS_CONFORM_EXEC_H
#define RS_CONFORM_EXEC_H

#include <stddef.h>
#include "reshard/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum rs_exec_fault {
  RS_EXEC_FINE = 0,
  RS_EXEC_CRASHED = 1, /* the child exited, was killed, or closed its stdout/stdin */
  RS_EXEC_TIMEOUT = 2, /* no complete line within the timeout */
  RS_EXEC_GARBAGE = 3, /* a line that is not what was asked for (not JSON, too long, binary) */
  RS_EXEC_SPAWN = 4    /* the child could not be started */
} rs_exec_fault;

typedef struct rs_exec rs_exec;

/* s as one word of an `sh -c` command line: '...' with each ' written '\'' (cut to fit cap). */
void rs_exec_quote(const char *s, char *out, size_t cap);
/* Start `sh -c cmd` in its own process group (stdin, stdout, stderr are pipes). max_line: the
 * longest line accepted from the child (0: 1 GiB). On Linux the child is killed when the process
 * that started it dies (PR_SET_PDEATHSIG), so no backend outlives its harness. */
rs_status rs_exec_start(const char *cmd, size_t max_line, rs_exec **out);
/* Write `line` and a '\n' (line has none) within timeout seconds. */
rs_status rs_exec_send(rs_exec *x, const char *line, double timeout);
/* Read one line (without its '\n') within timeout seconds; *line is the child's buffer, valid
 * until the next call. */
rs_status rs_exec_recv(rs_exec *x, double timeout, const char **line);
/* What the last failing send/recv ran into (RS_EXEC_FINE after a success). rs_exec_recv never
 * sets GARBAGE itself (it does not parse); callers that parse call rs_exec_set_garbage. */
rs_exec_fault rs_exec_last_fault(const rs_exec *x);
/* Bytes the child wrote to stdout that no rs_exec_recv has handed out, waiting up to `settle`
 * seconds for the first of them (0: only what is already there); quote (when set) gets a bounded,
 * escaped prefix of them ('...' form, "..." appended when cut). A stray line after an answer is
 * found here and blamed on the request it followed. */
size_t rs_exec_pending(rs_exec *x, double settle, char *quote, size_t cap);
/* n bytes at p as a bounded '...' quote (non-printables as \xNN, "..." when cut to fit cap). */
void rs_exec_quote_prefix(const char *p, size_t n, char *out, size_t cap);
/* Seconds rs_exec_stop waits, after the kill, for the child and its process group to be gone. */
#define RS_EXEC_REAP_SECONDS 5.0
void rs_exec_set_garbage(rs_exec *x);
const char *rs_exec_fault_name(rs_exec_fault f);
/* The last lines (about 2 KiB) the child wrote to stderr, "" when none. */
const char *rs_exec_stderr_tail(rs_exec *x);
/* How the child ended ("exited with status 3", "killed by signal 11 (SIGSEGV)") or "running". */
const char *rs_exec_exit_text(rs_exec *x);
int rs_exec_pid(const rs_exec *x);
/* Children this process starts from now on get OMP_NUM_THREADS, MKL_NUM_THREADS and
 * OPENBLAS_NUM_THREADS = n in their environment, each unless this process's environment already
 * sets it (n <= 0: none is added). Each conform --jobs N worker sets max(1, cores / N) for its own
 * children, so N children of a framework do not each start a thread per core. */
void rs_exec_set_child_threads(int n);
/* Close the child's stdin, give it `grace` seconds to exit, then kill its process group. */
void rs_exec_stop(rs_exec *x, double grace);
/* Stop (grace 0) and start the same command again. */
rs_status rs_exec_restart(rs_exec *x);
/* Free x without touching its child: only our ends of its pipes are closed (no kill, no wait). A
 * forked --jobs worker forgets the child it inherited from conform this way: that child stays
 * conform's, and the worker starts its own. NULL is fine. */
void rs_exec_forget(rs_exec *x);
/* The command it runs (sh -c CMD). */
const char *rs_exec_cmd(const rs_exec *x);
/* Stop (grace seconds) and free. NULL is fine. */
void rs_exec_free(rs_exec *x, double grace);

#ifdef __cplusplus
}
#endif
#endif
