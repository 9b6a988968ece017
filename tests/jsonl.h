/* jsonl.h - reading the recorded corpora of the fixture tests (fixtures/pytorch, tp, pytorch_order): a
 * folder's files in name order, and the lines of a gzip'd JSON-lines file however long. */
#ifndef RS_TEST_JSONL_H
#define RS_TEST_JSONL_H

/* The names in `dir` ending with `suffix`, sorted; *out and each name are malloc'd. 0 when the
 * folder is missing or has none. */
int rs_test_list_dir(const char *dir, const char *suffix, char ***out);

/* Calls line(ctx, text, where) for each line of the gzip'd file `path` (text keeps its '\n';
 * where is "NAME:LINENO"). Returns -1 when the file does not open, else 0. */
typedef void (*rs_test_line_fn)(void *ctx, char *text, const char *where);
int rs_test_jsonl_gz(const char *path, const char *name, rs_test_line_fn line, void *ctx);

#endif
