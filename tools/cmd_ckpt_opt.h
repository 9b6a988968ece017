/* cmd_ckpt_opt.h - the opt side of `reshard ckpt` (tools/cmd_ckpt_opt.c): save, load and check
 * with --impl opt|both and --transport local|mpi, and the replay of ckpt_opt fixtures. */
#ifndef RS_TOOLS_CMD_CKPT_OPT_H
#define RS_TOOLS_CMD_CKPT_OPT_H

/* 1 when argv asks for opt (--impl opt|both) or a transport other than local. */
int ckpt_opt_wanted(int argc, char **argv);
int cmd_ckpt_opt_save(int argc, char **argv);
int cmd_ckpt_opt_load(int argc, char **argv);
int cmd_ckpt_opt_check(int argc, char **argv);
/* `ckpt check`'s flags (cmd_ckpt.c), parsed once for ref's and opt's campaigns: returns -1 when
 * every flag parses, else the exit code (a usage error was printed). impl, tr, junit and jsonp
 * keep their defaults when the flag is absent. */
struct rs_ckpt_campaign;
int ckpt_check_args(int argc, char **argv, struct rs_ckpt_campaign *o, const char **impl, const char **tr,
                    const char **junit, const char **jsonp);
/* -1: not a ckpt_opt fixture (the caller replays it); else the exit code */
int ckpt_opt_replay_file(const char *path);

/* `reshard ckpt import DIR --root OUT --step N` (cmd_ckpt_import.c): PyTorch's safetensors DCP
 * checkpoint (HuggingFaceStorageWriter) as a reshard checkpoint. */
int cmd_ckpt_import(int argc, char **argv);

#endif
