/* cmd_ckpt_reshard.h - `reshard ckpt reshard` (a checkpoint read into another layout and world size
 * and written as a new checkpoint) and `reshard ckpt reshard-check` (its property campaign):
 * tools/cmd_ckpt_reshard.c, dispatched from cmd_ckpt.c. */
#ifndef RS_TOOLS_CMD_CKPT_RESHARD_H
#define RS_TOOLS_CMD_CKPT_RESHARD_H

int cmd_ckpt_reshard(int argc, char **argv);
int cmd_ckpt_reshard_check(int argc, char **argv);

#endif
