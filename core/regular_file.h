/* regular_file.h - the one rule by which every reader opens a file: no symbolic link is followed
 * (O_NOFOLLOW), opening a FIFO or socket never waits (O_NONBLOCK, cleared once the file is known to
 * be regular), and anything but a regular file is refused. Callers word the refusal for their
 * users (a checkpoint file, a case file, a plug-in). */
#ifndef RS_CORE_REGULAR_FILE_H
#define RS_CORE_REGULAR_FILE_H
#include <sys/stat.h>

typedef enum rs_open_refusal {
  RS_OPEN_OK = 0,
  RS_OPEN_LINK,        /* the path is a symbolic link */
  RS_OPEN_NOT_REGULAR, /* a FIFO, socket, directory, device: sb->st_mode says which when known */
  RS_OPEN_ERRNO        /* open, fstat or fcntl failed: errno says why */
} rs_open_refusal;

/* Opens path read-only with O_CLOEXEC | extra_flags (e.g. O_DIRECT). On RS_OPEN_OK *fd is the open
 * descriptor and *sb its fstat; otherwise *fd is -1 and nothing stays open. When the refusal is
 * RS_OPEN_NOT_REGULAR, sb->st_mode is 0 if the kind is unknown (open failed with ENXIO). */
rs_open_refusal rs_open_regular(const char *path, int extra_flags, int *fd, struct stat *sb);

/* "a FIFO", "a directory", ... for a refusal message ("not a regular file" when unknown). */
const char *rs_file_kind(mode_t mode);

#endif
