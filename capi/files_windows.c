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
 * os: zloopgo/os.py). stat and lstat are os.stat's win32_xstat, the same
 * calls in the same order (CreateFileW, the reparse tag, following a
 * reparse point that is not a link, the handle's information, FileIdInfo;
 * the parent directory's entry for a file that cannot be opened), and
 * their result carries every field os.stat_result shows on Windows
 * (st_file_attributes, st_reparse_tag, a 128-bit st_ino from 3.12, the
 * creation time); listdir is os.listdir's FindFirstFileW over "path\*.*".
 * Where os.stat would try GetFileInformationByName first (3.12+ on a
 * Windows that has it), whose results this file does not build, stat is
 * not offered and zloopgo/os.py runs os's own in the executor. There is
 * no read that cannot block to try first.
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

/* 1 if os.stat would try GetFileInformationByName first (CPython 3.12+,
 * on a Windows whose api-ms-win-core-file-l2-1-4 has it: Windows 11 24H2
 * and later). That path builds the result from FILE_STAT_BASIC_INFORMATION
 * by rules this file does not copy, so stat is then left to os. */
static int os_stats_by_name(void)
{
#if PY_VERSION_HEX >= 0x030C0000
    HMODULE lib = LoadLibraryW(L"api-ms-win-core-file-l2-1-4");
    if (lib == NULL)
        return 0;
    int found = GetProcAddress(lib, "GetFileInformationByName") != NULL;
    FreeLibrary(lib);
    return found;
#else
    return 0;
#endif
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
    case OP_LISTDIR:
        return 1;
    case OP_STAT:
        return !os_stats_by_name();
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

/* ---- stat and lstat: os.stat's win32_xstat, step for step ----
 *
 * CPython's Modules/posixmodule.c (win32_xstat_slow_impl,
 * attributes_from_dir, update_st_mode_from_path) and Python/fileutils.c
 * (_Py_attribute_data_to_stat): the same calls in the same order, so that
 * the same file gives the same fields and the same failure its
 * GetLastError code. */

/* os's stat struct on Windows, as far as os.stat_result shows it */
typedef struct win_stat {
    uint32_t mode, attributes, reparse_tag, nlink;
    uint64_t ino, ino_high, dev;
    int64_t size;
    int64_t sec[3]; /* access, write, creation (os's st_ctime and st_birthtime) */
    int32_t nsec[3];
} win_stat;

/* What a stat result is made from: a handle's information, or a
 * directory entry's (attributes_from_dir). */
typedef struct file_info {
    DWORD attributes, nlink, serial;
    uint64_t index;
    int64_t size;
    int64_t times[3]; /* 100 ns units since 1601: access, write, creation */
    FILE_ID_INFO id;
    int has_id;
} file_info;

#define ZL_S_IFMT 0xF000
#define ZL_S_IFLNK 0xA000 /* CPython's S_IFLNK on Windows (0120000) */
#define ZL_S_IFBLK 0x6000

static int64_t filetime(FILETIME t)
{
    return (int64_t)(((uint64_t)t.dwHighDateTime << 32) | t.dwLowDateTime);
}

/* FILE_TIME_to_time_t_nsec: C's truncating division, as os's */
static void to_time(int64_t in, int64_t *sec, int32_t *nsec)
{
    *nsec = (int32_t)(in % 10000000) * 100;
    *sec = in / 10000000 - INT64_C(11644473600);
}

static uint32_t attributes_to_mode(DWORD attr)
{
    uint32_t m = (attr & FILE_ATTRIBUTE_DIRECTORY) ? (_S_IFDIR | 0111) : _S_IFREG;
    return m | ((attr & FILE_ATTRIBUTE_READONLY) ? 0444 : 0666);
}

static void info_to_stat(const file_info *info, ULONG tag, win_stat *st)
{
    memset(st, 0, sizeof *st);
    st->mode = attributes_to_mode(info->attributes);
    st->size = info->size;
    st->dev = info->serial;
    for (int i = 0; i < 3; i++)
        to_time(info->times[i], &st->sec[i], &st->nsec[i]);
    st->nlink = info->nlink;
#if PY_VERSION_HEX >= 0x030C0000
    /* 3.12+: the volume's 64-bit serial and the 128-bit file id */
    if (info->has_id) {
        st->dev = info->id.VolumeSerialNumber;
        memcpy(&st->ino, info->id.FileId.Identifier, 8);
        memcpy(&st->ino_high, info->id.FileId.Identifier + 8, 8);
    }
    if (st->ino == 0 && st->ino_high == 0)
        st->ino = info->index;
#else
    st->ino = info->index;
#endif
    st->reparse_tag = tag;
    if ((info->attributes & FILE_ATTRIBUTE_REPARSE_POINT) && tag == IO_REPARSE_TAG_SYMLINK)
        st->mode = (st->mode & ~ZL_S_IFMT) | ZL_S_IFLNK;
    st->attributes = info->attributes;
}

/* update_st_mode_from_path: a file named like a program is executable */
static void mode_from_path(const wchar_t *path, DWORD attr, win_stat *st)
{
    if (attr & FILE_ATTRIBUTE_DIRECTORY)
        return;
    const wchar_t *ext = wcsrchr(path, L'.');
    if (ext != NULL && (_wcsicmp(ext, L".exe") == 0 || _wcsicmp(ext, L".bat") == 0 ||
                        _wcsicmp(ext, L".cmd") == 0 || _wcsicmp(ext, L".com") == 0))
        st->mode |= 0111;
}

/* attributes_from_dir: the entry of path in its directory's listing
 * (trailing separators dropped), for a file that cannot be opened */
static BOOL attributes_from_dir(const wchar_t *path, file_info *info, ULONG *tag)
{
    size_t n = wcslen(path);
    wchar_t *name = NULL;
    if (n && (path[n - 1] == L'\\' || path[n - 1] == L'/')) {
        name = malloc((n + 1) * sizeof *name);
        if (name == NULL) {
            SetLastError(ERROR_NOT_ENOUGH_MEMORY);
            return FALSE;
        }
        memcpy(name, path, (n + 1) * sizeof *name);
        while (--n > 0 && (name[n] == L'\\' || name[n] == L'/'))
            name[n] = L'\0';
        if (!n || (n == 1 && name[1] == L':')) {
            free(name);
            return FALSE;
        }
    }
    WIN32_FIND_DATAW found;
    HANDLE find = FindFirstFileW(name ? name : path, &found);
    free(name);
    if (find == INVALID_HANDLE_VALUE)
        return FALSE;
    FindClose(find);
    memset(info, 0, sizeof *info);
    info->attributes = found.dwFileAttributes;
    info->times[0] = filetime(found.ftLastAccessTime);
    info->times[1] = filetime(found.ftLastWriteTime);
    info->times[2] = filetime(found.ftCreationTime);
    info->size = (int64_t)(((uint64_t)found.nFileSizeHigh << 32) | found.nFileSizeLow);
    *tag = (found.dwFileAttributes & FILE_ATTRIBUTE_REPARSE_POINT) ? found.dwReserved0 : 0;
    return TRUE;
}

/* The errors of a device that has no such information: os then calls it
 * a block device, or takes no reparse tag. */
static int not_supported_here(DWORD e)
{
    return e == ERROR_INVALID_PARAMETER || e == ERROR_INVALID_FUNCTION || e == ERROR_NOT_SUPPORTED;
}

/* A disk file's information from its handle (os: the handle's
 * information, FileBasicInfo, FileIdInfo); 1 for a block device (st
 * filled), -1 on failure. */
static int handle_info(HANDLE h, file_info *info, win_stat *st)
{
    BY_HANDLE_FILE_INFORMATION by_handle;
    FILE_BASIC_INFO basic;
    if (!GetFileInformationByHandle(h, &by_handle) ||
        !GetFileInformationByHandleEx(h, FileBasicInfo, &basic, sizeof basic)) {
        if (not_supported_here(GetLastError())) {
            /* volumes and physical disks: \\.\C:, \\.\PhysicalDrive0 */
            memset(st, 0, sizeof *st);
            st->mode = ZL_S_IFBLK;
            return 1;
        }
        return -1;
    }
    info->attributes = by_handle.dwFileAttributes;
    info->nlink = by_handle.nNumberOfLinks;
    info->serial = by_handle.dwVolumeSerialNumber;
    info->index = ((uint64_t)by_handle.nFileIndexHigh << 32) | by_handle.nFileIndexLow;
    info->size = (int64_t)(((uint64_t)by_handle.nFileSizeHigh << 32) | by_handle.nFileSizeLow);
    info->times[0] = basic.LastAccessTime.QuadPart;
    info->times[1] = basic.LastWriteTime.QuadPart;
    info->times[2] = basic.CreationTime.QuadPart;
    info->has_id = GetFileInformationByHandleEx(h, FileIdInfo, &info->id, sizeof info->id) != 0;
    return 0;
}

/* win32_xstat_slow_impl: 0 with st filled, -1 with GetLastError's code */
static int xstat(const wchar_t *path, win_stat *st, BOOL traverse)
{
    file_info info = {0};
    FILE_ATTRIBUTE_TAG_INFO tag = {0};
    BOOL unhandled_tag = FALSE;
    DWORD access = FILE_READ_ATTRIBUTES;
    DWORD flags = FILE_FLAG_BACKUP_SEMANTICS | (traverse ? 0 : FILE_FLAG_OPEN_REPARSE_POINT);
    int r = 0;

    HANDLE h = CreateFileW(path, access, 0, NULL, OPEN_EXISTING, flags, NULL);
    if (h == INVALID_HANDLE_VALUE) {
        DWORD error = GetLastError();
        switch (error) {
        case ERROR_ACCESS_DENIED:     /* cannot read its attributes */
        case ERROR_SHARING_VIOLATION: /* a paging file */
            if (!attributes_from_dir(path, &info, &tag.ReparseTag)) {
                switch (GetLastError()) {
                case ERROR_FILE_NOT_FOUND:
                case ERROR_PATH_NOT_FOUND:
                case ERROR_NOT_READY:
                case ERROR_BAD_NET_NAME:
                    break;
                default:
                    SetLastError(error);
                }
                return -1;
            }
            if ((info.attributes & FILE_ATTRIBUTE_REPARSE_POINT) &&
                (traverse || !IsReparseTagNameSurrogate(tag.ReparseTag))) {
                SetLastError(error);
                return -1;
            }
            break;
        case ERROR_INVALID_PARAMETER: /* \\.\con needs read or write access */
            h = CreateFileW(path, access | GENERIC_READ, FILE_SHARE_READ | FILE_SHARE_WRITE, NULL,
                            OPEN_EXISTING, flags, NULL);
            if (h == INVALID_HANDLE_VALUE) {
                SetLastError(error);
                return -1;
            }
            break;
        case ERROR_CANT_ACCESS_FILE: /* an unhandled reparse point: open it instead */
            if (traverse) {
                traverse = FALSE;
                unhandled_tag = TRUE;
                h = CreateFileW(path, access, 0, NULL, OPEN_EXISTING,
                                flags | FILE_FLAG_OPEN_REPARSE_POINT, NULL);
            }
            if (h == INVALID_HANDLE_VALUE) {
                SetLastError(error);
                return -1;
            }
            break;
        default:
            return -1;
        }
    }

    if (h != INVALID_HANDLE_VALUE) {
        DWORD type = GetFileType(h);
        if (type != FILE_TYPE_DISK) {
            if (type == FILE_TYPE_UNKNOWN && GetLastError() != 0) {
                r = -1;
                goto cleanup;
            }
            DWORD attr = GetFileAttributesW(path);
            memset(st, 0, sizeof *st);
            if (attr != INVALID_FILE_ATTRIBUTES && (attr & FILE_ATTRIBUTE_DIRECTORY))
                st->mode = _S_IFDIR; /* \\.\pipe\ */
            else if (type == FILE_TYPE_CHAR)
                st->mode = _S_IFCHR; /* \\.\nul */
            else if (type == FILE_TYPE_PIPE)
                st->mode = _S_IFIFO;
            goto cleanup;
        }
        if (!traverse) {
            /* the reparse tag; a reparse point that is not a link is followed */
            if (!GetFileInformationByHandleEx(h, FileAttributeTagInfo, &tag, sizeof tag)) {
                if (!not_supported_here(GetLastError())) {
                    r = -1;
                    goto cleanup;
                }
                tag.FileAttributes = FILE_ATTRIBUTE_NORMAL;
                tag.ReparseTag = 0;
            } else if (tag.FileAttributes & FILE_ATTRIBUTE_REPARSE_POINT) {
                if (IsReparseTagNameSurrogate(tag.ReparseTag)) {
                    if (unhandled_tag) {
                        SetLastError(ERROR_CANT_ACCESS_FILE);
                        r = -1;
                        goto cleanup;
                    }
                } else if (!unhandled_tag) {
                    CloseHandle(h);
                    return xstat(path, st, TRUE);
                }
            }
        }
        r = handle_info(h, &info, st);
        if (r != 0) {
            r = r > 0 ? 0 : -1;
            goto cleanup;
        }
    }
    info_to_stat(&info, tag.ReparseTag, st);
    mode_from_path(path, info.attributes, st);

cleanup:
    if (h != INVALID_HANDLE_VALUE) {
        DWORD error = r ? GetLastError() : 0;
        if (!CloseHandle(h))
            r = -1;
        else if (r)
            SetLastError(error);
    }
    return r;
}

static void do_stat(zl_fileop *op)
{
    win_stat *st = calloc(1, sizeof *st);
    if (st == NULL) {
        op->err = ENOMEM;
        return;
    }
    op->sys = st;
    if (xstat(op->path, st, op->n != 0) < 0)
        fail_os(op);
}

/* ---- listdir: os's _listdir_windows_no_opendir ---- */

/* op->sys: the names, each ending in a NUL wide character; op->result
 * their count. A directory with no entry at all (ERROR_FILE_NOT_FOUND,
 * an empty drive) is an empty list, as os's. */
static void do_listdir(zl_fileop *op)
{
    const wchar_t *path = op->path;
    size_t len = wcslen(path);
    wchar_t *pattern = malloc((len + 5) * sizeof *pattern);
    if (pattern == NULL) {
        op->err = ENOMEM;
        return;
    }
    memcpy(pattern, path, (len + 1) * sizeof *pattern);
    if (len > 0) {
        wchar_t last = pattern[len - 1];
        if (last != L'\\' && last != L'/' && last != L':')
            pattern[len++] = L'\\';
        wcscpy(pattern + len, L"*.*");
    }
    WIN32_FIND_DATAW found;
    HANDLE find = FindFirstFileW(pattern, &found);
    free(pattern);
    if (find == INVALID_HANDLE_VALUE) {
        DWORD e = GetLastError();
        if (e != ERROR_FILE_NOT_FOUND)
            op->oserr = (int64_t)e;
        return;
    }
    zl_name_list names = {0};
    BOOL more;
    do {
        if (wcscmp(found.cFileName, L".") != 0 && wcscmp(found.cFileName, L"..") != 0) {
            size_t size = (wcslen(found.cFileName) + 1) * sizeof found.cFileName[0];
            if (zl_name_list_add(&names, found.cFileName, size) < 0) {
                op->err = ENOMEM;
                break;
            }
            op->result++;
        }
        more = FindNextFileW(find, &found);
        if (!more) {
            DWORD e = GetLastError();
            if (e != ERROR_NO_MORE_FILES)
                op->oserr = (int64_t)e;
        }
    } while (more);
    if (!FindClose(find) && op->oserr == 0 && op->err == 0)
        fail_os(op);
    op->sys = names.data;
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
    case OP_STAT:
        do_stat(op);
        return;
    case OP_LISTDIR:
        do_listdir(op);
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

/* OP_STAT: (st_mode, st_ino's low and high 64 bits, st_dev, st_nlink,
 * st_size, then seconds and nanoseconds of access, write and creation,
 * st_file_attributes, st_reparse_tag), which zloopgo/os.py makes into the
 * os.stat_result os makes. OP_LISTDIR: the names, as str (os.listdir's
 * PyUnicode_FromWideChar; zloopgo/os.py encodes them for a bytes path). */
PyObject *zl_file_sys_value(zl_fileop *op)
{
    if (op->op == OP_STAT) {
        const win_stat *st = op->sys;
        return Py_BuildValue(
            "(kKKKkLLlLlLlkk)", (unsigned long)st->mode, (unsigned long long)st->ino,
            (unsigned long long)st->ino_high, (unsigned long long)st->dev, (unsigned long)st->nlink,
            (long long)st->size, (long long)st->sec[0], (long)st->nsec[0], (long long)st->sec[1],
            (long)st->nsec[1], (long long)st->sec[2], (long)st->nsec[2],
            (unsigned long)st->attributes, (unsigned long)st->reparse_tag);
    }
    PyObject *list = PyList_New((Py_ssize_t)op->result);
    const wchar_t *p = op->sys;
    for (int64_t i = 0; list != NULL && i < op->result; i++) {
        size_t n = wcslen(p);
        PyObject *name = PyUnicode_FromWideChar(p, (Py_ssize_t)n);
        if (name == NULL) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, name);
        p += n + 1;
    }
    return list;
}

int zl_file_try_inline(zl_fileop *op)
{
    (void)op;
    return -1;
}
