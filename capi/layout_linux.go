// Compile-time checks that the C adapter and the engine agree on the
// kernel's epoll_event, on Linux: both change and read the same epoll
// descriptor (the engine through golang.org/x/sys/unix's EpollEvent in
// core/epoll, the adapter through <sys/epoll.h>'s struct epoll_event in
// platform_linux.h's zl_sys_poller_watch and zl_sys_poller_look), and both name a
// descriptor by the 64-bit user data, which the engine writes and reads
// as EpollEvent's Fd (low half) and Pad (high half). That struct differs
// by architecture: packed, 12 bytes with the data at offset 4 on x86_64;
// 16 bytes with the data at offset 8 on arm64 (EpollEvent gains a PadFd
// field there). A mismatch fails this package's Go compile.
//
// Each constant is (c - g) + (g - c) in uintptr, as in layout.go: 0 when
// equal, the compile error "constant ... overflows uintptr" otherwise.

//go:build linux

package main

/*
#include <stddef.h>
#include <sys/epoll.h>

// Enum constants, which cgo hands to Go as constants: a packed struct's
// misaligned union field is not addressable from Go.
enum {
	zl_epoll_event_size = sizeof(struct epoll_event),
	zl_epoll_data_offset = offsetof(struct epoll_event, data),
	zl_epoll_data_size = sizeof(((struct epoll_event *)0)->data),
};
*/
import "C"

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

const (
	_ = (uintptr(C.zl_epoll_event_size) - unsafe.Sizeof(unix.EpollEvent{})) + (unsafe.Sizeof(unix.EpollEvent{}) - uintptr(C.zl_epoll_event_size))
	_ = (uintptr(C.zl_epoll_data_offset) - unsafe.Offsetof(unix.EpollEvent{}.Fd)) + (unsafe.Offsetof(unix.EpollEvent{}.Fd) - uintptr(C.zl_epoll_data_offset))
	_ = (uintptr(C.zl_epoll_data_offset) + 4 - unsafe.Offsetof(unix.EpollEvent{}.Pad)) + (unsafe.Offsetof(unix.EpollEvent{}.Pad) - 4 - uintptr(C.zl_epoll_data_offset))
	_ = (uintptr(C.zl_epoll_data_size) - 8) + (8 - uintptr(C.zl_epoll_data_size))
)
