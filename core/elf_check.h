/* elf_check.h - is a file a complete shared object of this machine, before dlopen maps it?
 *
 * dlopen maps a library's PT_LOAD segments straight from the file; a library cut short (a copy that
 * stopped, a full disk) maps pages past the end of the file, and the first touch of one raises
 * SIGBUS inside the loader: the process dies instead of refusing the input. This check reads only
 * the headers, so it is cheap enough to run before every load of a plug-in. */
#ifndef RS_CORE_ELF_CHECK_H
#define RS_CORE_ELF_CHECK_H

#include "reshard/status.h"

/* RS_OK when `path` names (without following a symbolic link) a regular file holding an ELF shared
 * object of this machine's class, byte order and architecture whose ELF header, program header
 * table, section header table and every PT_LOAD / PT_DYNAMIC segment lie inside the file.
 * Otherwise RS_ERR_INVALID (RS_ERR_IO when the file cannot be opened) with a message
 * "<flag>: '<path>': <reason>" (flag may be NULL or "": the message then starts with the quoted
 * path). */
rs_status rs_elf_check_file(const char *flag, const char *path);

/* rs_elf_check_file, then dlopen(mode) of the very file that was checked: the library is loaded
 * through the descriptor the check read (/proc/self/fd/N), so a file renamed or linked over the
 * path between the check and the load is not what gets mapped. *handle is the dlopen handle on
 * RS_OK. A library the loader refuses is RS_ERR_INVALID "<flag>: '<path>': cannot load: <why>". */
rs_status rs_elf_dlopen(const char *flag, const char *path, int mode, void **handle);

#endif
