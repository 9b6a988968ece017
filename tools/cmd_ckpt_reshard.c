/* cmd_ckpt_reshard.c - `reshard ckpt reshard SRC --layout LAYOUT.json --root DST --step N`: the
 * checkpoint SRC (a root or a step directory; reshard's own or one `ckpt import` made) read into
 * the layout's meshes, placements and shard orders on its world size and written as the new
 * checkpoint root DST (props/ckpt_reshard.c), by ref (one process) or opt (local, or one process
 * per target rank under mpirun); and `reshard ckpt reshard-check`, its property campaign.
 * Exit: 0 written and verified, 1 a damaged source or a failed check, 2 bad input (flags, the
 * layout, SRC not a checkpoint, DST not new or empty, a link or FIFO in SRC), 3 out of memory,
 * 4 a peer stalled or died. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cli.h"
#include "cmd_ckpt_opt.h"
#include "cmd_ckpt_reshard.h"
#include "core/values.h"
#include "props/ckpt_reshard.h"
#include "reshard/opt.h"

static const char *HELP =
    "usage: reshard ckpt reshard SRC --layout LAYOUT.json --root DST --step N [--impl ref|opt]\n"
    "        [--transport local|mpi] [--block B] [--threads T] [--segment S] [--direct] [--read-once] [--timeout SEC]\n"
    "  SRC (a checkpoint root or a step directory) read into LAYOUT.json's layouts and world size and written\n"
    "  as the new checkpoint root DST (new or empty), step N; every byte from digest-verified source bytes,\n"
    "  the result verified before it is committed. --transport mpi: one process per target rank (mpirun).\n"
    "usage: reshard ckpt reshard-check [--seed S] [--cases N] [--impl ref|opt|both] [--scratch DIR] [--quiet]\n"
    "  random sources and layouts: the export of every result equals the source's, and back again\n";

static int exit_of(const rs_ckpt_reshard_result *res, rs_status st) {
  if (st == RS_ERR_NOMEM) return CLI_NOMEM;
  if (st == RS_ERR_TIMEOUT) return CLI_PEER;
  if (st == RS_ERR_UNSUPPORTED || res->input_error) return CLI_USAGE;
  return CLI_FAIL;
}

int cmd_ckpt_reshard(int argc, char **argv) {
  const char *C = "ckpt reshard", *src = NULL, *layout = NULL, *root = NULL, *stepv = NULL, *impl = "ref",
             *tr = "local", *blk = NULL, *thr = NULL, *seg = NULL, *v;
  int r, direct = 0, read_once = 0;
  for (int i = 1; i < argc; ++i) {
    if (cli_is_help(argv[i])) {
      fputs(HELP, stdout);
      return CLI_OK;
    }
    if (cli_flag(argv, i, "--direct")) {
      direct = 1;
      continue;
    }
    if (cli_flag(argv, i, "--read-once")) {
      read_once = 1;
      continue;
    }
    CLI_OPT(C, "--layout", layout);
    CLI_OPT(C, "--root", root);
    CLI_OPT(C, "--step", stepv);
    CLI_OPT(C, "--impl", impl);
    CLI_OPT(C, "--transport", tr);
    CLI_OPT(C, "--block", blk);
    CLI_OPT(C, "--threads", thr);
    CLI_OPT(C, "--segment", seg);
    CLI_TIMEOUT_OPT(C)
    if (argv[i][0] == '-') return cli_usage_error(C, "unknown option '%s'", argv[i]);
    if (src) return cli_usage_error(C, "one SRC only ('%s' and '%s')", src, argv[i]);
    src = argv[i];
  }
  if (!src || !layout || !root || !stepv) return cli_usage_error(C, "needs SRC --layout LAYOUT.json --root DST --step N");
  long long step, block = 0, threads = 0, segment = 0;
  if (cli_int(stepv, 0, INT64_MAX, &step)) return cli_usage_error(C, "--step: expected an integer >= 0");
  if (blk && (cli_int(blk, 64, 1 << 30, &block) || (block & (block - 1))))
    return cli_usage_error(C, "--block: a power of two in [64, 2^30]");
  if (thr && cli_int(thr, 1, 64, &threads)) return cli_usage_error(C, "--threads: expected 1..64");
  if (seg && (cli_int(seg, 4096, 1 << 30, &segment) || (segment & (segment - 1))))
    return cli_usage_error(C, "--segment: a power of two in [4096, 2^30]");
  int opt = !strcmp(impl, "opt");
  if (!opt && strcmp(impl, "ref")) return cli_usage_error(C, "--impl: '%s', expected ref or opt", impl);
  if (strcmp(tr, "local") && strcmp(tr, "mpi")) return cli_usage_error(C, "--transport: '%s', expected local or mpi", tr);
  if (!opt && strcmp(tr, "local")) return cli_usage_error(C, "--impl ref runs in one process: --transport mpi needs --impl opt");
  if (!opt && (thr || seg || direct || read_once))
    return cli_usage_error(C, "--threads, --segment, --direct and --read-once are opt's (add --impl opt)");
  rs_world *world = NULL;
  if (opt && rs_world_init(tr, NULL, NULL, &world)) return cli_status_error(C, "");
  rs_ckpt_reshard_opts o;
  memset(&o, 0, sizeof o);
  o.src = src;
  o.layout_path = layout;
  o.dst = root;
  o.step = step;
  o.opt = opt;
  o.world = world;
  o.oo.io_threads = (int)threads;
  o.oo.segment = segment;
  o.oo.block = block;
  o.oo.direct = direct;
  o.oo.read_once = read_once;
  rs_ckpt_reshard_result res;
  rs_status st = rs_ckpt_reshard(&o, &res);
  int me = world ? rs_world_rank(world) : 0, rc = CLI_OK;
  if (st) {
    fprintf(stderr, "reshard %s: %s\n", C, rs_last_error());
    rc = exit_of(&res, st);
  } else if (me == 0) {
    printf("resharded %s (%d rank files) to %s/step_%lld on %d ranks (%s%s): %d tensors re-laid out, %d carried over, "
           "%d objects; verified and committed; plan %.3f s, load %.3f s, save %.3f s, verify+commit %.3f s\n",
           src, res.src_world, root, step, res.world, opt ? "opt, " : "ref", opt ? tr : "", res.relaid, res.carried,
           res.objects, res.t_plan, res.t_load, res.t_save, res.t_verify);
  }
  if (world) rs_world_finalize(world);
  return rc;
}

int cmd_ckpt_reshard_check(int argc, char **argv) {
  const char *C = "ckpt reshard-check", *seedv = NULL, *casesv = NULL, *impl = "both", *scratchv = NULL, *v;
  int r, quiet = 0;
  for (int i = 1; i < argc; ++i) {
    if (cli_is_help(argv[i])) {
      fputs(HELP, stdout);
      return CLI_OK;
    }
    if (cli_flag(argv, i, "--quiet")) {
      quiet = 1;
      continue;
    }
    CLI_OPT(C, "--seed", seedv);
    CLI_OPT(C, "--cases", casesv);
    CLI_OPT(C, "--impl", impl);
    CLI_OPT(C, "--scratch", scratchv);
    return cli_usage_error(C, "unknown argument '%s'", argv[i]);
  }
  unsigned long long seed = 1;
  long long cases = 200;
  if (seedv && cli_u64(seedv, &seed)) return cli_usage_error(C, "--seed: expected an unsigned integer");
  if (casesv && cli_int(casesv, 1, 100000000, &cases)) return cli_usage_error(C, "--cases: expected a positive integer");
  int im = !strcmp(impl, "ref") ? 0 : !strcmp(impl, "opt") ? 1 : !strcmp(impl, "both") ? 2 : -1;
  if (im < 0) return cli_usage_error(C, "--impl: '%s', expected ref, opt or both", impl);
  if (scratchv && cli_dir_arg(C, "--scratch", scratchv)) return CLI_USAGE;
  char dir[4300], msg[2048];
  rs_ckpt_scratch_path(scratchv, "ckpt-reshard", (long)getpid(), dir, sizeof dir);
  long long pass = 0, skip = 0;
  int failed = 0;
  for (long long i = 0; i < cases && !failed; ++i) {
    rs_choices ch;
    rs_choices_seed(&ch, rs_hash3(seed, 0x72736864, (uint64_t)i));
    msg[0] = 0;
    rs_outcome out = rs_ckpt_reshard_prop_run(&ch, im, dir, msg, sizeof msg);
    rs_choices_free(&ch);
    if (out == RS_PASS) pass++;
    else if (out == RS_SKIP) skip++;
    else {
      failed = 1;
      printf("FAIL ckpt_reshard case %lld (seed %llu): %s\n  replay: reshard ckpt reshard-check --seed %llu --cases %lld --impl %s\n",
             i, seed, msg, seed, i + 1, impl);
    }
    if (!quiet && !failed && (i + 1) % 50 == 0) printf("  %lld cases\n", i + 1);
  }
  rs_ckpt_rmtree(dir);
  printf("ckpt reshard-check: %lld cases (seed %llu, impl %s): pass %lld  skip %lld  fail %d\n", pass + skip + failed,
         seed, impl, pass, skip, failed);
  return failed ? CLI_FAIL : CLI_OK;
}
