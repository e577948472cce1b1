/* What capi/files.c (the file operations' submitting and settling, the
 * same on every platform) and its platform part (files_posix.c,
 * files_windows.c: the system calls a worker makes, and the values and
 * errors only the platform can build) share: the operations' numbers and
 * the operation itself.
 *
 * It knows the worker pool's zl_work and nothing of loops. */
#ifndef ZL_FILES_H
#define ZL_FILES_H

#include "zl.h"

/* The operations, one copy: zl_files_constants_add exports each the
 * platform performs (zl_file_supported) as the engine module's
 * FILE_OP_<NAME>, the number zloopgo/_files passes to file_op.
 *   OPEN       path, flags, mode -> (fd owner, st_mode, st_blksize, st_size,
 *              pos|-1, isatty, f_type)
 *   PREAD      fd, n, offset (-1: read(2)) -> bytes
 *   READALL    fd, offset (-1: read(2)), size hint -> bytes until EOF
 *   PWRITE     fd, data, offset (-1: write(2)) -> bytes written (all, or error)
 *   LSEEK      fd, offset, whence -> new offset
 *   CLOSE      fd -> None
 *   FTRUNCATE  fd, length -> None
 *   STAT       path, n (0: lstat) -> stat tuple
 *   RENAME     path, path2 -> None
 *   UNLINK     path -> None
 *   RMDIR      path -> None
 *   MKDIR      path, mode -> None
 *   LISTDIR    path -> list of bytes names */
/* clang-format off */
#define FILE_OPS(X) \
    X(OPEN) X(PREAD) X(READALL) X(PWRITE) X(LSEEK) X(CLOSE) X(FTRUNCATE) \
    X(STAT) X(RENAME) X(UNLINK) X(RMDIR) X(MKDIR) X(LISTDIR)
/* clang-format on */
#define FILE_OP_ENUM(name) OP_##name,
enum { OP_NONE, FILE_OPS(FILE_OP_ENUM) OP_LAST };
#undef FILE_OP_ENUM

typedef struct zl_fileop {
    zl_work work; /* the pool's part; its token carries ZL_DONE_FILE */
    int32_t op;
    int32_t fd;
    int64_t n;      /* bytes wanted / flags / whence / mode / follow */
    int64_t offset; /* file offset, -1 for the descriptor's own position */
    int64_t mode;
    char *buf; /* where a read lands / what a write sends */
    int64_t len;
    void *path, *path2; /* the platform's form of the names (zl_file_path_new) */
    /* results, written by the worker */
    int64_t result;
    int err;       /* an errno value, or 0 */
    int64_t oserr; /* the platform's own error code (Windows: GetLastError), or 0 */
    int64_t st_mode, blksize, size; /* OP_OPEN: what fstat said */
    int64_t pos;                    /* OP_OPEN: the offset after opening, -1 if not seekable */
    int64_t fstype;                 /* OP_OPEN: statfs's f_type (0: unknown) */
    int isatty;
    void *sys; /* OP_STAT, OP_LISTDIR: the platform's result, malloc'd */
    /* owned Python objects (touched with the GIL only) */
    PyObject *future;
    PyObject *data;   /* the bytes a read lands in */
    PyObject *name;   /* the name OSError reports */
    PyObject *name2;  /* the second name (rename) */
    PyObject *owner;  /* OP_OPEN: makes the object that owns the new descriptor */
    PyObject *holder; /* told when the operation ends after its future was cancelled */
    Py_buffer view;   /* what a write sends */
    int has_view;
} zl_fileop;

/* OP_LISTDIR's names as a worker collects them, in the platform's
 * characters, each with its terminator: one list for both platforms, so
 * that growing it is written once. Without the GIL (malloc, not PyMem). */
typedef struct {
    char *data;       /* NULL until the first name */
    size_t used, cap; /* in bytes */
} zl_name_list;

/* Appends the `size` bytes at `name` (its terminator included), doubling
 * the list when full. 0; or -1 with the list freed and emptied when
 * memory ran out. */
static inline int zl_name_list_add(zl_name_list *list, const void *name, size_t size)
{
    if (list->used + size > list->cap) {
        size_t cap = list->cap > 0 ? list->cap : 256;
        while (list->used + size > cap)
            cap *= 2;
        char *grown = realloc(list->data, cap);
        if (grown == NULL) {
            free(list->data);
            *list = (zl_name_list){0};
            return -1;
        }
        list->data = grown;
        list->cap = cap;
    }
    memcpy(list->data + list->used, name, size);
    list->used += size;
    return 0;
}

/* ---- the platform part (files_posix.c, files_windows.c) ---- */

/* 1 if this platform performs operation code. */
int zl_file_supported(int code);
/* On a worker's thread, without the GIL: the system call(s) of op, its
 * results and error left in op. */
void zl_file_perform(zl_fileop *op);
/* A path argument (bytes, os.fsencode's) in the platform's form, malloc'd
 * (free() frees it); NULL with an exception set. With the GIL. */
void *zl_file_path_new(PyObject *bytes);
/* Closes a descriptor an open made that nobody will see (errors ignored). */
void zl_file_close_quietly(int64_t fd);
/* Sets the OSError the same call raises in os/io for op's error; NULL. */
PyObject *zl_file_raise(zl_fileop *op);
/* The value of a finished OP_STAT or OP_LISTDIR (op->sys); NULL with an
 * exception set. */
PyObject *zl_file_sys_value(zl_fileop *op);
/* A read of op (offset >= 0) that cannot block, done at once if the
 * platform can: 1 when complete (op->result bytes), 0 when a worker must
 * do the rest (op->result counts what is done), -1 if the file (or the
 * platform) does not support it. */
int zl_file_try_inline(zl_fileop *op);

#endif
