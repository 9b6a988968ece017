/* cmd_ckpt_opt.h - the opt side of `reshard ckpt` (tools/cmd_ckpt_opt.c): save, load and check
 * with --impl opt|both and --transport local|local-device|mpi, the replay of ckpt_opt fixtures,
 * and the flag parsers both sides share (cmd_ckpt.c). */
#ifndef RS_TOOLS_CMD_CKPT_OPT_H
#define RS_TOOLS_CMD_CKPT_OPT_H

/* `ckpt save` (load = 0) and `ckpt load` (load = 1) flags, parsed once for ref and opt
 * (cmd_ckpt.c): -1 when every flag parses, else the exit code (a usage error was printed). */
typedef struct ckpt_io_args {
  const char *spec, *root, *impl, *tr, *strict;
  const char *json;             /* load --json FILE */
  long long step;               /* -1: not given (load: latest) */
  long long block, threads, segment; /* 0: not given */
  int direct, read_once;
} ckpt_io_args;
int ckpt_io_args_parse(const char *C, int argc, char **argv, int load, ckpt_io_args *a);
/* opt's side: --impl opt|both or a transport other than local */
int ckpt_wants_opt(const char *impl, const char *tr);
/* The exit code of a failed checkpoint operation (3 out of memory, 2 a refused file kind, 1). */
int ckpt_exit_code(rs_status st);
/* ckpt load's target: latest readable (step < 0) or step_<step> present; -1, else the exit code
 * (2: bad input, message printed). Both implementations' loads ask it first. */
int ckpt_load_target(const char *C, const char *root, long long step);
/* `ckpt load --json FILE`: per rank and entry, the xxh3-64 of the bytes the load left in memory
 * (after factory merges). rank >= 0: only that rank (an MPI process). 0, or the exit code. */
struct rs_ckpt_world;
int ckpt_load_json(const char *C, const char *path, const char *impl, const char *status,
                   const struct rs_ckpt_world *w, int rank);
int cmd_ckpt_opt_save(const ckpt_io_args *a);
int cmd_ckpt_opt_load(const ckpt_io_args *a);
/* `ckpt check`'s flags (cmd_ckpt.c), parsed once for ref's and opt's campaigns: returns -1 when
 * every flag parses, else the exit code (a usage error was printed). impl, tr, junit and jsonp
 * keep their defaults when the flag is absent. */
struct rs_ckpt_campaign;
struct cli_runner_args;
int ckpt_check_args(int argc, char **argv, struct rs_ckpt_campaign *o, const char **impl, const char **tr,
                    const char **junit, const char **jsonp, struct cli_runner_args *run);
/* ref's summary (per property and the totals line; impl: "ref" or "both") */
struct rs_ckpt_campaign_result;
struct rs_ckpt_opt_campaign_result;
void ckpt_ref_summary(const struct rs_ckpt_campaign *o, const struct rs_ckpt_campaign_result *res, const char *impl);
/* A campaign's exit code: st's (err printed: 3 out of memory, 4 a hung worker or a stalled peer),
 * else 1 when failed, else 0. */
int ckpt_campaign_exit(rs_status st, const char *err, int failed);
/* --junit / --json of `ckpt check` (either NULL: not asked) for what ran: ref NULL under --impl
 * opt, opt NULL under --impl ref. CLI_OK or the exit code of a write error. */
int ckpt_check_reports(const struct rs_ckpt_campaign *o, const struct rs_ckpt_campaign_result *ref,
                       const struct rs_ckpt_opt_campaign_result *opt, const char *junit, const char *jsonp);
int cmd_ckpt_opt_check(const struct rs_ckpt_campaign *o, const char *impl, const char *tr, const char *junit,
                       const char *jsonp);
/* -1: not a ckpt_opt fixture (the caller replays it); else the exit code */
int ckpt_opt_replay_file(const char *path);

/* `reshard ckpt import DIR --root OUT --step N` (cmd_ckpt_import.c): PyTorch's safetensors DCP
 * checkpoint (HuggingFaceStorageWriter) as a reshard checkpoint. */
int cmd_ckpt_import(int argc, char **argv);

#endif
