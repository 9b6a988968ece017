/* ckpt_import.h - what `reshard ckpt import` reads besides the tensors: the names PyTorch's
 * HuggingFaceStorageWriter gives its files and the index it writes (model.safetensors.index.json).
 * A directory can hold more than one save; these say which files belong to the one being imported
 * (ckpt_import_names.c). Errors are RS_ERR_INVALID naming the file (exit 2). */
#ifndef RS_TOOLS_CKPT_IMPORT_H
#define RS_TOOLS_CKPT_IMPORT_H

#include <stdint.h>
#include "reshard/status.h"

#define RS_IMP_INDEX "model.safetensors.index.json"

/* A writer's file name (torch/distributed/checkpoint/_hf_utils.py _gen_file_name):
 * RS_IMP_WHOLE  model-NNNNN-of-MMMMM.safetensors        (save_distributed=False: whole tensors)
 * RS_IMP_SHARD  shard-SSSSS-model-NNNNN-of-MMMMM.safetensors (save_distributed=True: one rank's)
 * RS_IMP_OTHER  anything else. Numbers have at least 5 digits (zfill(5)). */
enum { RS_IMP_OTHER = 0, RS_IMP_WHOLE = 1, RS_IMP_SHARD = 2 };
typedef struct rs_imp_name {
  int family;
  int64_t shard, idx, total;
} rs_imp_name;
void rs_imp_parse_name(const char *name, rs_imp_name *out);

/* Without an index, the n sorted names must be one save's numbering: one family, one total MMMMM,
 * 1 <= NNNNN <= MMMMM, and for whole-tensor files every NNNNN of 1..MMMMM present. A lone file of
 * any name is one save. */
rs_status rs_imp_names_check(const char *dir, char *const *names, int n);

/* The writer's index: weight_map (key -> file) and metadata.total_size (bytes of all tensors). */
typedef struct rs_imp_index {
  int n;           /* keys */
  char **key, **file;
  char **files;    /* distinct files it names, sorted */
  int nfiles;
  int has_total;
  int64_t total;
} rs_imp_index;
/* DIR/model.safetensors.index.json when present (*present = 1), read under the checkpoint read
 * rule (no links, no FIFOs). Every file it names is a plain name. */
rs_status rs_imp_index_read(const char *dir, int *present, rs_imp_index *ix);
void rs_imp_index_free(rs_imp_index *ix);
/* the file the index maps key to, or NULL */
const char *rs_imp_index_file_of(const rs_imp_index *ix, const char *key);
int rs_imp_index_names(const rs_imp_index *ix, const char *file);

#endif
