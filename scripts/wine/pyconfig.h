/* pyconfig.h for building zloopgo's extension for Windows CPython 3.10-3.14
 * (x86_64, the python.org kind: MSVC-built, python3XY.dll) with a GCC-style
 * cross compiler (zig cc -target x86_64-windows-gnu). scripts/windows copies
 * CPython's headers (a Linux build's of the same minor version) and puts
 * this file in place of their pyconfig.h, which describes Linux.
 *
 * It states what an extension module needs to agree with the interpreter:
 * the platform macros, the interpreter in a DLL, the sizes of C types on
 * Win64 (LLP64: long is 4 bytes) and Py_ssize_t. It does not describe how
 * CPython itself was configured beyond that; written for zloopgo from the
 * values CPython's own PC/pyconfig.h gives, not a copy of it. */
#ifndef Py_CONFIG_H
#define Py_CONFIG_H

#ifndef _WIN64
#error "scripts/wine/pyconfig.h: for 64-bit Windows targets only"
#endif

#define MS_WIN32
#define MS_WIN64
#define MS_WINDOWS
#define NT_THREADS
#define WITH_THREAD
#define USE_SOCKET
#define PLATFORM "win32"
#define COMPILER "[clang]"
#define PYD_PLATFORM_TAG "win_amd64"

/* the interpreter is python3XY.dll; its symbols are imported */
#define Py_ENABLE_SHARED 1
#define MS_COREDLL
#define HAVE_DECLSPEC_DLL

#include <io.h>
#include <stdint.h>
#include <stdio.h>
#include <limits.h>
#include <basetsd.h>

typedef long long Py_ssize_t;
/* 3.10's pyport.h defines PY_SSIZE_T_MAX itself; from 3.11 on it expects
 * it here with HAVE_PY_SSIZE_T (Python.h includes patchlevel.h first) */
#if PY_VERSION_HEX >= 0x030B0000
#define PY_SSIZE_T_MAX LLONG_MAX
#endif
#define HAVE_PY_SSIZE_T 1

#define PY_LONG_LONG long long
#define PY_LLONG_MIN LLONG_MIN
#define PY_LLONG_MAX LLONG_MAX
#define PY_ULLONG_MAX ULLONG_MAX
#define PY_UINT32_T uint32_t
#define PY_UINT64_T uint64_t
#define PY_INT32_T int32_t
#define PY_INT64_T int64_t

#define SIZEOF_SHORT 2
#define SIZEOF_INT 4
#define SIZEOF_LONG 4
#define ALIGNOF_LONG 4
#define SIZEOF_LONG_LONG 8
#define SIZEOF_DOUBLE 8
#define SIZEOF_FLOAT 4
#define SIZEOF_VOID_P 8
#define SIZEOF_SIZE_T 8
#define ALIGNOF_SIZE_T 8
#define ALIGNOF_MAX_ALIGN_T 8
#define SIZEOF_TIME_T 8
#define SIZEOF_OFF_T 4
#define SIZEOF_FPOS_T 8
#define SIZEOF_HKEY 8
#define SIZEOF_WCHAR_T 2
#define SIZEOF__BOOL 1
#define SIZEOF_PID_T SIZEOF_INT
#define HAVE_UINTPTR_T 1
#define HAVE_INTPTR_T 1
#define HAVE_LARGEFILE_SUPPORT
#define DOUBLE_IS_LITTLE_ENDIAN_IEEE754 1

#define HAVE_ERRNO_H 1
#define HAVE_FCNTL_H 1
#define HAVE_SIGNAL_H 1
#define HAVE_STDDEF_H 1
#define HAVE_SYS_STAT_H 1
#define HAVE_SYS_TYPES_H 1
#define HAVE_WCHAR_H 1
#define HAVE_DYNAMIC_LOADING
#define WITH_PYMALLOC 1
#define WITH_DOC_STRINGS 1
#define Py_SOCKET_FD_CAN_BE_GE_FD_SETSIZE

#endif
