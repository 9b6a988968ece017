/* json.h - cJSON with exact integers: every parser of reshard (cases, fixtures, state specs, models,
 * checkpoint metadata) reads JSON through these, so a number is an integer only when its text is one
 * (no fraction, no exponent) and fits int64, never rounded through a double. */
#ifndef RS_CORE_JSON_H
#define RS_CORE_JSON_H

#include <cjson/cJSON.h>
#include <stdint.h>
#include "reshard/status.h"

/* Parse `text` (NUL-terminated). Each number node keeps its source text in valuestring, so
 * rs_json_i64/u64 can read it exactly. Errors name the byte offset. Free with cJSON_Delete. */
rs_status rs_json_parse(const char *text, cJSON **out);

/* Read `item` as an integer in [lo, hi]. `field` names it in the error ("mesh.shape[2]"). A
 * non-number, a fraction, an exponent or a value beyond int64 is an error. */
rs_status rs_json_i64(const cJSON *item, const char *field, int64_t lo, int64_t hi, int64_t *out);
/* Same for an unsigned 64-bit value (seeds): 0 .. 2^64-1. */
rs_status rs_json_u64(const cJSON *item, const char *field, uint64_t *out);
/* An int array of at most `max` entries, each in [lo, hi]. */
rs_status rs_json_i64_array(const cJSON *arr, const char *field, int max, int64_t lo, int64_t hi,
                            int64_t *out, int *n);
/* Object member that must be absent or of the given cJSON type mask (cJSON_Number, cJSON_String,
 * cJSON_Array, cJSON_Object, cJSON_True|cJSON_False, cJSON_NULL); *out is NULL when absent. */
rs_status rs_json_member(const cJSON *obj, const char *parent, const char *key, int type_mask,
                         const cJSON **out);
/* Integer member `key` of obj in [lo, hi], errors naming "parent.key": absent leaves *out as it is
 * (callers preset the default) or, when `required`, is an error; any non-number is an error. */
rs_status rs_json_i64_member(const cJSON *obj, const char *parent, const char *key, int64_t lo, int64_t hi,
                             int required, int64_t *out);

/* The codecs' shared wrappers (cases, TP cases, state specs, p2p models): each format is written
 * once as a reader of the parsed tree, and these give it its from-text and from-file forms. */
typedef rs_status (*rs__json_reader)(const cJSON *root, void *out);
/* rs_json_parse `text`, then `read` the tree into `out`; the tree is freed either way. */
rs_status rs__json_from_text(const char *text, rs__json_reader read, void *out);
/* Read the whole file at `path`, then rs__json_from_text. Every error names the file: a read error
 * as rs_read_text words it (RS_ERR_IO), any other prefixed with "PATH: ". */
rs_status rs__json_from_file(const char *path, rs__json_reader read, void *out);

#endif
