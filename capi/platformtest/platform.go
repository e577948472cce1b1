//go:build unix

// Package platformtest checks the platform layer (capi/platform.h) from Go,
// as its header describes it: the poller calls against the engine's own
// backend (what C registers, the backend's Wait reports with the token and
// interest the backend itself would give; what the backend registered, C's
// look sees the same way), and the socket, error, clock and thread calls.
// A new platform's files pass the same checks (a Windows one, its own
// socket set-up in the tests).
//
// It calls only the header's inline functions, so it needs no Python; the
// extension itself (capi/) is not built here. The go command does not
// see changes to headers outside a package's folder: after editing
// capi/platform*.h, run it with -a or with other CGO_CFLAGS (scripts/test
// adds the headers' hash to them), or it tests the build it cached.
package platformtest

/*
#include <stdint.h>
#include <string.h>
#include "../platform.h"

static int watch(int poller, int fd, uint32_t old, uint32_t want, int64_t *watched,
                 int32_t *changed)
{
    return zl_sys_poller_watch(poller, fd, old, want, watched, changed);
}

#define LOOK_ROOM 16

static int look(int poller, uint64_t *tokens, uint32_t *interests)
{
    zl_sys_poller_event seen[LOOK_ROOM];
    int n = zl_sys_poller_look(poller, seen, LOOK_ROOM);
    for (int i = 0; i < n; i++) {
        tokens[i] = zl_sys_poller_token(&seen[i]);
        interests[i] = zl_sys_poller_interest(&seen[i]);
    }
    return n;
}

static ptrdiff_t sock_recv(int fd, void *buf, size_t len, int *err)
{
    ptrdiff_t n;
    do
        n = zl_sys_recv(fd, buf, len);
    while (n < 0 && zl_sys_interrupted(zl_sys_error()));
    *err = n < 0 ? zl_sys_error() : 0;
    return n;
}

static ptrdiff_t sock_send(int fd, const void *buf, size_t len, int nosignal, int *err)
{
    ptrdiff_t n = nosignal ? zl_sys_send_nosignal(fd, buf, len) : zl_sys_send(fd, buf, len);
    *err = n < 0 ? zl_sys_error() : 0;
    return n;
}

static int would_block(int err) { return zl_sys_would_block(err); }

// Receives one datagram on fd and sends it back to its sender: the bytes
// echoed, or -1 with *err; *port is the sender's port.
static ptrdiff_t echo_datagram(int fd, int *port, int *err)
{
    char buf[2048];
    struct sockaddr_storage from;
    socklen_t len = sizeof from;
    ptrdiff_t n = zl_sys_recvfrom(fd, buf, sizeof buf, &from, &len);
    if (n < 0) {
        *err = zl_sys_error();
        return -1;
    }
    *port = from.ss_family == AF_INET ? ntohs(((struct sockaddr_in *)&from)->sin_port) : -1;
    n = zl_sys_sendto(fd, buf, (size_t)n, &from, len);
    *err = n < 0 ? zl_sys_error() : 0;
    return n;
}

static int64_t monotonic_ns(void) { return zl_sys_monotonic_ns(); }
static double clock_resolution(void) { return zl_sys_clock_resolution(); }
static void sleep_us(long us) { zl_sys_sleep_us(us); }

// Waits on a condition nobody signals until ns from now: 1 if it timed out.
static int wait_unsignalled(int64_t ns)
{
    zl_sys_mutex m = ZL_SYS_MUTEX_INIT;
    zl_sys_cond c = ZL_SYS_COND_INIT;
    zl_sys_deadline d = zl_sys_deadline_after(ns);
    zl_sys_mutex_lock(&m);
    int timed_out = zl_sys_cond_wait_until(&c, &m, &d);
    zl_sys_mutex_unlock(&m);
    return timed_out;
}

static int once_runs;
static void count_run(void) { once_runs++; }
static zl_sys_once once = ZL_SYS_ONCE_INIT;

// zl_sys_call_once twice: how many times the function ran.
static int call_once_twice(void)
{
    zl_sys_call_once(&once, count_run);
    zl_sys_call_once(&once, count_run);
    return once_runs;
}
*/
import "C"

import (
	"syscall"
	"time"
	"unsafe"
)

// Watch is zl_sys_poller_watch: the error (0 for none), and the change it
// made to the count of descriptors watched.
func Watch(poller, fd int, old, want uint32) (syscall.Errno, int64) {
	var watched C.int64_t
	var changed C.int32_t
	err := C.watch(C.int(poller), C.int(fd), C.uint32_t(old), C.uint32_t(want), &watched, &changed)
	if int64(watched) != int64(changed) {
		panic("zl_sys_poller_watch added different changes to its two counts")
	}
	return syscall.Errno(err), int64(watched)
}

// Event is one event of a look.
type Event struct {
	Token    uint64
	Interest uint32
}

// Look is zl_sys_poller_look with room for 16 events: nil and false when it
// failed.
func Look(poller int) ([]Event, bool) {
	var tokens [C.LOOK_ROOM]C.uint64_t
	var interests [C.LOOK_ROOM]C.uint32_t
	n := int(C.look(C.int(poller), &tokens[0], &interests[0]))
	if n < 0 {
		return nil, false
	}
	events := make([]Event, n)
	for i := range events {
		events[i] = Event{uint64(tokens[i]), uint32(interests[i])}
	}
	return events, true
}

// Recv is zl_sys_recv into buf (EINTR made again): the count and the error.
func Recv(fd int, buf []byte) (int, syscall.Errno) {
	var err C.int
	n := C.sock_recv(C.int(fd), unsafe.Pointer(&buf[0]), C.size_t(len(buf)), &err)
	return int(n), syscall.Errno(err)
}

// Send is zl_sys_send, or zl_sys_send_nosignal: the count and the error.
func Send(fd int, data []byte, nosignal bool) (int, syscall.Errno) {
	var err C.int
	flag := C.int(0)
	if nosignal {
		flag = 1
	}
	n := C.sock_send(C.int(fd), unsafe.Pointer(&data[0]), C.size_t(len(data)), flag, &err)
	return int(n), syscall.Errno(err)
}

// WouldBlock is zl_sys_would_block.
func WouldBlock(err syscall.Errno) bool { return C.would_block(C.int(err)) != 0 }

// EchoDatagram receives one datagram on fd (zl_sys_recvfrom) and sends it
// back to its sender (zl_sys_sendto): the bytes echoed, the sender's port
// and the error.
func EchoDatagram(fd int) (int, int, syscall.Errno) {
	var port, err C.int
	n := C.echo_datagram(C.int(fd), &port, &err)
	return int(n), int(port), syscall.Errno(err)
}

// MonotonicNs is zl_sys_monotonic_ns.
func MonotonicNs() int64 { return int64(C.monotonic_ns()) }

// ClockResolution is zl_sys_clock_resolution.
func ClockResolution() time.Duration {
	return time.Duration(float64(C.clock_resolution()) * float64(time.Second))
}

// SleepUs is zl_sys_sleep_us.
func SleepUs(us int) { C.sleep_us(C.long(us)) }

// WaitUnsignalled waits with zl_sys_cond_wait_until until d from now on a
// condition nobody signals: whether it reported the deadline passed.
func WaitUnsignalled(d time.Duration) bool { return C.wait_unsignalled(C.int64_t(d)) != 0 }

// CallOnceTwice calls zl_sys_call_once twice with one function: how many
// times it ran.
func CallOnceTwice() int { return int(C.call_once_twice()) }
