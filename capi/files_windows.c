//go:build windows

/* The Windows part of the file operations (capi/files.h): what a worker
 * calls for each, the OSError it raises, on the C runtime's descriptors.
 *
 * The descriptors are the C runtime's (UCRT, the one CPython links), not
 * handles the engine opens itself: a file's fileno() is what open()'s
 * gives, os.* calls on it work, and OP_OPEN is _wopen with the very flags
 * FileIO passes (io.open's own, O_BINARY | O_NOINHERIT included), so the
 * sharing modes (read and write, not delete), the binary mode, O_APPEND's
 * meaning (the runtime moves to the end before each write) and the errno a
 * failure sets (a directory: EACCES) are FileIO's. The calls FileIO and os
 * make on a descriptor are made the same way: a stream's read and write
 * are _read and _write, a seek _lseeki64, truncating _chsize_s, closing
 * _close; their errors are errno values, raised as os raises them. A read
 * or write at an offset (what Linux's pread and pwrite do) is ReadFile or
 * WriteFile on the descriptor's handle (_get_osfhandle) with the offset in
 * an OVERLAPPED: one call, atomic with respect to the handle's position,
 * which it leaves just past what it read or wrote (the handle is
 * synchronous); the file object keeps its own position, so nothing of
 * zloopgo's depends on it. A Win32 call's failure (ReadFile's, and the
 * path operations') keeps GetLastError's code, raised as os raises it
 * (OSError's winerror, and the errno CPython maps it to).
 *
 * The path operations are os's Windows calls: rename is MoveFileExW, unlink
 * removes a symbolic link or junction to a directory with
 * RemoveDirectoryW and anything else with DeleteFileW (os's
 * Py_DeleteFileW), rmdir RemoveDirectoryW, mkdir CreateDirectoryW (os's
 * mkdir with mode 0o700, a directory only its owner may use, is left to
 * os: zloopgo/os.py). Not performed here, so not offered (zloopgo/os.py
 * runs os's own in the executor): stat and lstat (os.stat's Windows result
 * carries what a stat tuple has no place for: st_file_attributes,
 * st_reparse_tag, a 128-bit st_ino, and follows reparse points by its own
 * rules), listdir. There is no read that cannot block to try first.
 *
 * A C runtime call given a descriptor that is not open calls the runtime's
 * invalid parameter handler, whose default ends the process: a worker
 * silences it for its own thread around each call, as CPython does
 * (_Py_BEGIN_SUPPRESS_IPH), and the call fails with EBADF.
 *
 * It knows the C runtime and Win32 calls; nothing of futures, loops or the
 * pool (files.c). */
#include "files.h"
#include <errno.h>
#include <fcntl.h>
#include <io.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <wchar.h>

/* Exported by the UCRT (ucrtbase.dll), not declared by mingw-w64's headers. */
_invalid_parameter_handler __cdecl _set_thread_local_invalid_parameter_handler(
    _invalid_parameter_handler handler);

static void __cdecl ignore_invalid_parameter(const wchar_t *expression, const wchar_t *function,
                                             const wchar_t *file, unsigned int line,
                                             uintptr_t reserved)
{
    (void)expression, (void)function, (void)file, (void)line, (void)reserved;
}

int zl_file_supported(int code)
{
    switch (code) {
    case OP_OPEN:
    case OP_PREAD:
    case OP_READALL:
    case OP_PWRITE:
    case OP_LSEEK:
    case OP_CLOSE:
    case OP_FTRUNCATE:
    case OP_RENAME:
    case OP_UNLINK:
    case OP_RMDIR:
    case OP_MKDIR:
        return 1;
    default:
        return 0;
    }
}

/* ---- on a worker's thread: no GIL, no Python ---- */

/* The most one ReadFile, WriteFile, _read or _write call is given. */
#define CHUNK (1u << 30)

static DWORD chunk(int64_t left) { return left > (int64_t)CHUNK ? CHUNK : (DWORD)left; }

static void fail_os(zl_fileop *op) { op->oserr = (int64_t)GetLastError(); }

/* The descriptor's handle; INVALID_HANDLE_VALUE with op->err EBADF if it
 * is not open. */
static HANDLE handle_of(zl_fileop *op)
{
    HANDLE h = (HANDLE)_get_osfhandle(op->fd);
    if (h == INVALID_HANDLE_VALUE)
        op->err = EBADF;
    return h;
}

static void do_open(zl_fileop *op)
{
    int fd = _wopen(op->path, (int)op->n, (int)op->mode);
    if (fd < 0) {
        op->err = errno;
        return;
    }
    HANDLE h = (HANDLE)_get_osfhandle(fd);
    /* _Py_fstat's file types: a disk file is regular, a character device
     * (a console, NUL) is one, a pipe or socket is a FIFO */
    switch (GetFileType(h)) {
    case FILE_TYPE_DISK:
        op->st_mode = _S_IFREG;
        break;
    case FILE_TYPE_CHAR:
        op->st_mode = _S_IFCHR;
        break;
    default:
        op->st_mode = _S_IFIFO;
        break;
    }
    LARGE_INTEGER size;
    op->size = op->st_mode == _S_IFREG && GetFileSizeEx(h, &size) ? size.QuadPart : 0;
    /* FileIO's step after opening in append mode: go to the end */
    if ((op->n & _O_APPEND) && _lseeki64(fd, 0, SEEK_END) < 0 && errno != ESPIPE) {
        op->err = errno;
        _close(fd);
        return;
    }
    op->pos = op->st_mode == _S_IFREG ? _lseeki64(fd, 0, SEEK_CUR) : -1;
    op->isatty = _isatty(fd) ? 1 : 0;
    op->blksize = 0; /* none on Windows: FileIO's buffer is io.DEFAULT_BUFFER_SIZE */
    op->fstype = 0;
    op->result = fd;
}

/* op->len - op->result bytes at op->offset + op->result into op->buf + op->result:
 * until the end of the file, or one read of a stream (offset -1) */
static void do_read(zl_fileop *op)
{
    if (op->offset < 0) {
        int got = _read(op->fd, op->buf + op->result, chunk(op->len - op->result));
        if (got < 0)
            op->err = errno;
        else
            op->result += got;
        return;
    }
    HANDLE h = handle_of(op);
    if (h == INVALID_HANDLE_VALUE)
        return;
    while (op->result < op->len) {
        uint64_t at = (uint64_t)(op->offset + op->result);
        OVERLAPPED ov = {0};
        ov.Offset = (DWORD)at;
        ov.OffsetHigh = (DWORD)(at >> 32);
        DWORD got = 0;
        if (!ReadFile(h, op->buf + op->result, chunk(op->len - op->result), &got, &ov)) {
            DWORD e = GetLastError();
            if (e == ERROR_HANDLE_EOF || e == ERROR_BROKEN_PIPE)
                return;
            if (op->result == 0) {
                /* the C runtime's _read: a handle not open for reading is EBADF */
                if (e == ERROR_ACCESS_DENIED || e == ERROR_INVALID_HANDLE)
                    op->err = EBADF;
                else
                    op->oserr = (int64_t)e;
            }
            return;
        }
        if (got == 0)
            return;
        op->result += got;
    }
}

static void do_write(zl_fileop *op)
{
    HANDLE h = INVALID_HANDLE_VALUE;
    if (op->offset >= 0 && (h = handle_of(op)) == INVALID_HANDLE_VALUE)
        return;
    int64_t done = 0;
    while (done < op->len) {
        if (op->offset < 0) {
            int w = _write(op->fd, op->buf + done, chunk(op->len - done));
            if (w < 0) {
                op->err = errno;
                break;
            }
            done += w;
            continue;
        }
        uint64_t at = (uint64_t)(op->offset + done);
        OVERLAPPED ov = {0};
        ov.Offset = (DWORD)at;
        ov.OffsetHigh = (DWORD)(at >> 32);
        DWORD w = 0;
        if (!WriteFile(h, op->buf + done, chunk(op->len - done), &w, &ov)) {
            DWORD e = GetLastError();
            if (e == ERROR_ACCESS_DENIED || e == ERROR_INVALID_HANDLE)
                op->err = EBADF; /* the C runtime's _write's */
            else
                op->oserr = (int64_t)e;
            break;
        }
        done += w;
    }
    op->result = done;
    /* n = 1: where the descriptor is afterwards (an append-mode file,
     * whose writes go to the end) */
    if (op->err == 0 && op->oserr == 0 && op->n == 1 &&
        (op->result = _lseeki64(op->fd, 0, SEEK_CUR)) < 0)
        op->err = errno;
}

/* os.unlink's Py_DeleteFileW: a symbolic link or junction to a directory
 * is removed as a directory */
static BOOL delete_file(const wchar_t *path)
{
    WIN32_FILE_ATTRIBUTE_DATA info;
    int is_link = 0;
    if (GetFileAttributesExW(path, GetFileExInfoStandard, &info) &&
        (info.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY) &&
        (info.dwFileAttributes & FILE_ATTRIBUTE_REPARSE_POINT)) {
        WIN32_FIND_DATAW found;
        HANDLE find = FindFirstFileW(path, &found);
        if (find != INVALID_HANDLE_VALUE) {
            is_link = found.dwReserved0 == IO_REPARSE_TAG_SYMLINK ||
                      found.dwReserved0 == IO_REPARSE_TAG_MOUNT_POINT;
            FindClose(find);
        }
    }
    return is_link ? RemoveDirectoryW(path) : DeleteFileW(path);
}

static void perform(zl_fileop *op)
{
    errno = 0;
    switch (op->op) {
    case OP_OPEN:
        do_open(op);
        return;
    case OP_PREAD:
    case OP_READALL:
        do_read(op);
        return;
    case OP_PWRITE:
        do_write(op);
        return;
    case OP_LSEEK:
        if ((op->result = _lseeki64(op->fd, op->offset, (int)op->n)) < 0)
            op->err = errno;
        return;
    case OP_CLOSE:
        if (_close(op->fd) < 0)
            op->err = errno;
        return;
    case OP_FTRUNCATE:
        op->err = _chsize_s(op->fd, op->offset); /* os.ftruncate's: it returns the errno */
        return;
    case OP_RENAME:
        if (!MoveFileExW(op->path, op->path2, 0))
            fail_os(op);
        return;
    case OP_UNLINK:
        if (!delete_file(op->path))
            fail_os(op);
        return;
    case OP_RMDIR:
        if (!RemoveDirectoryW(op->path))
            fail_os(op);
        return;
    case OP_MKDIR:
        if (!CreateDirectoryW(op->path, NULL))
            fail_os(op);
        return;
    default:
        op->err = EINVAL;
    }
}

void zl_file_perform(zl_fileop *op)
{
    _invalid_parameter_handler old =
        _set_thread_local_invalid_parameter_handler(ignore_invalid_parameter);
    perform(op);
    _set_thread_local_invalid_parameter_handler(old);
}

/* ---- on the loop thread ---- */

/* The path as os sees it: os.fsencode's bytes decoded back (UTF-8 with
 * surrogatepass on Windows), as UTF-16. */
void *zl_file_path_new(PyObject *bytes)
{
    PyObject *text =
        PyUnicode_DecodeFSDefaultAndSize(PyBytes_AS_STRING(bytes), PyBytes_GET_SIZE(bytes));
    if (text == NULL)
        return NULL;
    Py_ssize_t n;
    wchar_t *wide = PyUnicode_AsWideCharString(text, &n);
    Py_DECREF(text);
    if (wide == NULL)
        return NULL;
    wchar_t *copy = malloc(((size_t)n + 1) * sizeof *copy);
    if (copy == NULL)
        PyErr_NoMemory();
    else
        memcpy(copy, wide, ((size_t)n + 1) * sizeof *copy);
    PyMem_Free(wide);
    return copy;
}

void zl_file_close_quietly(int64_t fd)
{
    _invalid_parameter_handler old =
        _set_thread_local_invalid_parameter_handler(ignore_invalid_parameter);
    _close((int)fd);
    _set_thread_local_invalid_parameter_handler(old);
}

PyObject *zl_file_raise(zl_fileop *op)
{
    if (op->oserr != 0)
        return PyErr_SetExcFromWindowsErrWithFilenameObjects(PyExc_OSError, (int)op->oserr,
                                                             op->name, op->name2);
    errno = op->err;
    if (op->name != NULL)
        return PyErr_SetFromErrnoWithFilenameObjects(PyExc_OSError, op->name, op->name2);
    return PyErr_SetFromErrno(PyExc_OSError);
}

PyObject *zl_file_sys_value(zl_fileop *op)
{
    (void)op;
    PyErr_SetString(PyExc_SystemError, "file_op: no such operation on Windows");
    return NULL;
}

int zl_file_try_inline(zl_fileop *op)
{
    (void)op;
    return -1;
}
