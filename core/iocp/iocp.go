//go:build windows

// Package iocp is the Windows reactor backend: readiness, not completion,
// over an I/O completion port. Each watched socket has one poll request
// (IOCTL_AFD_POLL) outstanding on a helper handle to the Ancillary
// Function Driver, \Device\Afd, whose completion reaches the port; a
// completed poll is reported and submitted again at the next Wait, which
// makes readiness level-triggered as on epoll and kqueue. This is the
// technique of wepoll, libuv's poll handles and mio; a wake-up is a
// completion posted with no request (Wake).
//
// A datagram socket whose poll reported AFD_POLL_CONNECT_FAIL (an ICMP
// error) is polled with a timeout from then on (recheckAfter): under Wine
// no poll outstanding on it ever completes again (see recheckAfter).
//
// Each watched socket also has a close watch outstanding for as long as it
// is registered: a poll for AFD_POLL_LOCAL_CLOSE alone (sock.watch). A
// socket closed without Deregister while no readiness poll is out (its
// last one reported, its callbacks running, the next not yet submitted)
// is known closed by it, so that a socket that takes the same handle value
// is never polled as the closed one's (see closedSince).
//
// It knows sockets (not pipes or files: AFD polls only sockets), opaque
// 64-bit tokens (all but the one the contract reserves) and the two
// readiness kinds of package poll; it knows nothing of timers, callbacks
// or Python, nor what a token means.
package iocp

import (
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/zloopgo/zloopgo/core/poll"
	"golang.org/x/sys/windows"
)

// The driver's interface, undocumented but stable since Windows Vista;
// golang.org/x/sys has no wrappers for these two ntdll calls nor for
// GetQueuedCompletionStatusEx.
var (
	ntdll                    = windows.NewLazySystemDLL("ntdll.dll")
	kernel32                 = windows.NewLazySystemDLL("kernel32.dll")
	procNtDeviceIoControl    = ntdll.NewProc("NtDeviceIoControlFile")
	procNtCancelIoFileEx     = ntdll.NewProc("NtCancelIoFileEx")
	procGetQueuedCompletions = kernel32.NewProc("GetQueuedCompletionStatusEx")
)

const (
	ioctlAFDPoll  = 0x00012024 // FILE_DEVICE_NETWORK, function 9 (AFD_POLL), METHOD_BUFFERED
	sioBaseHandle = 0x48000022 // WSAIoctl: the socket under any layered service provider

	// AFD_POLL_* event bits.
	afdReceive     = 0x0001
	afdSend        = 0x0004
	afdDisconnect  = 0x0008 // the peer shut down its sending side
	afdAbort       = 0x0010 // reset
	afdLocalClose  = 0x0020 // this socket was closed
	afdAccept      = 0x0080
	afdConnectFail = 0x0100

	afdReadable = afdReceive | afdAccept | afdDisconnect
	afdWritable = afdSend
	afdError    = afdAbort | afdConnectFail

	// Completion keys: the helper handle's polls, and wake-ups.
	afdKey  = 0
	wakeKey = 1

	// AFD_POLL_INFO.Timeout: none, or below zero a relative one (in 100 ns).
	noTimeout = math.MaxInt64

	soType = 0x1008 // SO_TYPE (winsock2.h), which golang.org/x/sys lacks
)

// recheckAfter bounds each poll of a datagram socket once one of its polls
// reported AFD_POLL_CONNECT_FAIL. Under Wine (8.0) that report is the
// server's answer to POLLERR on the host socket, after which the server
// watches that socket no more: a poll outstanding on it never completes,
// though datagrams arrive; only a poll's submission looks at the socket
// (scripts/wine/probe_afd_poll_icmp.py). A poll that times out comes back
// empty and is submitted again at the next Wait, so that a datagram is
// seen within this long. Windows is documented to report such an error
// to the next receive instead (WSAECONNRESET), and was not tried.
const recheckAfter = 50 * time.Millisecond

// afdPollInfo is AFD_POLL_INFO with room for one socket.
type afdPollInfo struct {
	Timeout         int64
	NumberOfHandles uint32
	Exclusive       uint32
	Handle          windows.Handle
	Events          uint32
	Status          windows.NTStatus
}

// overlappedEntry is OVERLAPPED_ENTRY. The request pointer is kept as an
// integer: it is only a key into Poller.inflight, never dereferenced.
type overlappedEntry struct {
	Key        uintptr
	Overlapped uintptr
	Internal   uintptr
	Bytes      uint32
}

// request is one poll. While it is outstanding the kernel owns iosb and
// info and writes them when the poll completes, so it stays referenced
// from Poller.inflight (the Go heap does not move objects) until its
// completion has been dequeued, even after Deregister.
type request struct {
	iosb windows.IO_STATUS_BLOCK // its address identifies the completion
	info afdPollInfo
	s    *sock
	busy bool // outstanding: its completion is not yet dequeued
}

// sock is one watched socket. It has two requests so that a poll asking
// for more kinds can start while the one it supersedes is still being
// taken back (cancelled polls come back through the port, later), and a
// third, its close watch.
type sock struct {
	reqs [2]request
	cur  *request // the outstanding poll whose answer counts, if any
	// watch: the close watch, a poll for AFD_POLL_LOCAL_CLOSE alone,
	// outstanding from Register until the socket is forgotten. A handle
	// value names whichever object holds it now, but a poll is tied to the
	// socket it was submitted for: the driver completes it when that
	// socket is closed, whatever takes the value after.
	watch  request
	fd     int
	base   windows.Handle
	tok    poll.Token
	want   poll.Interest
	asked  uint32 // AFD events of cur
	gone   bool   // deregistered or closed: drop at completion
	queued bool   // in Poller.updates
	polled bool   // the driver took a poll of it once
	// recheck: a datagram socket whose poll reported CONNECT_FAIL; its
	// polls time out after recheckAfter (see there)
	recheck bool
}

// idle is a request of s not outstanding, or nil.
func (s *sock) idle() *request {
	for i := range s.reqs {
		if !s.reqs[i].busy {
			return &s.reqs[i]
		}
	}
	return nil
}

// Poller owns one completion port and one AFD helper handle.
type Poller struct {
	port     windows.Handle
	afd      windows.Handle
	socks    map[int]*sock        // watched sockets, by descriptor
	inflight map[uintptr]*request // outstanding polls, by &request.iosb
	updates  []*sock              // sockets whose poll to (re)submit or cancel
	entries  []overlappedEntry
	woken    atomic.Bool // a wake-up is posted and not yet dequeued
	reasked  bool        // a cancelled current poll came back: Wait asks again
}

var _ poll.Backend = (*Poller)(nil)

// New opens a completion port and an AFD helper handle attached to it.
func New() (*Poller, error) {
	port, err := windows.CreateIoCompletionPort(windows.InvalidHandle, 0, 0, 0)
	if err != nil {
		return nil, err
	}
	afd, err := openAFD(port)
	if err != nil {
		windows.CloseHandle(port)
		return nil, err
	}
	return &Poller{
		port: port, afd: afd,
		socks: map[int]*sock{}, inflight: map[uintptr]*request{},
		entries: make([]overlappedEntry, 128),
	}, nil
}

// openAFD opens \Device\Afd (any name below it will do; the suffix only
// shows who opened it) and routes its completions to port.
func openAFD(port windows.Handle) (windows.Handle, error) {
	name, err := windows.NewNTUnicodeString(`\Device\Afd\Zloopgo`)
	if err != nil {
		return 0, err
	}
	oa := windows.OBJECT_ATTRIBUTES{ObjectName: name}
	oa.Length = uint32(unsafe.Sizeof(oa))
	var afd windows.Handle
	var iosb windows.IO_STATUS_BLOCK
	err = windows.NtCreateFile(&afd, windows.SYNCHRONIZE, &oa, &iosb, nil, 0,
		windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE, windows.FILE_OPEN, 0, 0, 0)
	if err != nil {
		return 0, err
	}
	if _, err := windows.CreateIoCompletionPort(afd, port, afdKey, 0); err != nil {
		windows.CloseHandle(afd)
		return 0, err
	}
	// No event to signal on completion: the port is the only waiter.
	if err := windows.SetFileCompletionNotificationModes(afd, windows.FILE_SKIP_SET_EVENT_ON_HANDLE); err != nil {
		windows.CloseHandle(afd)
		return 0, err
	}
	return afd, nil
}

// baseSocket asks for the socket under any layered service provider: AFD
// knows only base sockets.
func baseSocket(fd int) (windows.Handle, error) {
	var base windows.Handle
	var n uint32
	err := windows.WSAIoctl(windows.Handle(fd), sioBaseHandle, nil, 0,
		(*byte)(unsafe.Pointer(&base)), uint32(unsafe.Sizeof(base)), &n, nil, 0)
	if err != nil {
		return 0, err
	}
	return base, nil
}

// Register starts watching socket fd. Registering a watched socket again
// replaces its registration.
func (p *Poller) Register(fd int, tok poll.Token, in poll.Interest) error {
	if tok == poll.ReservedToken {
		return poll.ErrReservedToken
	}
	if s := p.socks[fd]; s != nil {
		if !p.closedSince(s) {
			return p.Reregister(fd, tok, in)
		}
		// closed, and its value taken by the socket registered now
		p.forget(s)
	}
	base, err := baseSocket(fd)
	if err != nil {
		return err
	}
	s := &sock{fd: fd, base: base, tok: tok, want: in}
	s.reqs[0].s, s.reqs[1].s, s.watch.s = s, s, s
	// The close watch first: it also refuses a handle that is no socket.
	if err := p.start(&s.watch, s.base, afdLocalClose, noTimeout); err != nil {
		return err
	}
	if in != 0 {
		// Submitted now rather than at the next Wait so that a handle the
		// driver refuses fails here, not every Wait after.
		if err := p.submit(s, toAFD(in)); err != nil {
			p.forget(s)
			return err
		}
	}
	p.socks[fd] = s
	return nil
}

// Reregister changes what fd is watched for. A socket this backend has
// seen closed is an error, as on epoll and kqueue, even when another
// socket holds its value now (its close watch has come back). Wake-ups
// carry no token (a completion without a request), but the contract's
// reserved one is refused here as on every backend.
func (p *Poller) Reregister(fd int, tok poll.Token, in poll.Interest) error {
	if tok == poll.ReservedToken {
		return poll.ErrReservedToken
	}
	s := p.socks[fd]
	if s != nil && p.closedSince(s) {
		p.forget(s)
		s = nil
	}
	if s == nil {
		return windows.ERROR_NOT_FOUND
	}
	s.tok, s.want = tok, in
	p.queue(s)
	return nil
}

// Deregister stops watching fd at once: its outstanding poll is cancelled
// and whatever it reports is dropped. An unknown or closed socket is not
// an error.
func (p *Poller) Deregister(fd int) error {
	if s := p.socks[fd]; s != nil {
		p.forget(s)
	}
	return nil
}

func (p *Poller) queue(s *sock) {
	if !s.queued {
		s.queued = true
		p.updates = append(p.updates, s)
	}
}

// flush brings every queued socket's poll in line with what it wants:
// submit one if none is outstanding, cancel one that misses a wanted
// event (its completion queues the socket again).
func (p *Poller) flush() error {
	var err error
	for i, s := range p.updates {
		s.queued = false
		p.updates[i] = nil
		if s.gone {
			continue
		}
		if p.closedSince(s) {
			// Closed while no poll was out: its value may be another
			// socket's now, which a poll submitted for it would watch.
			p.forget(s)
			continue
		}
		want := toAFD(s.want)
		switch {
		case s.cur != nil && s.want == 0:
			p.cancel(s.cur)
		case s.cur != nil && want&^s.asked != 0 && s.idle() != nil:
			// More kinds wanted: the new poll starts now and the old one
			// is taken back, its answer ignored (the new one asks for all
			// it did), so that a kind already there is reported by this
			// Wait, as epoll and select() report it.
			old := s.cur
			s.cur = nil
			p.cancel(old)
			if e := p.submit(s, want); e != nil && e != windows.STATUS_INVALID_HANDLE {
				err = errors.Join(err, e)
			}
		case s.cur != nil && want&^s.asked != 0:
			// Both requests out (one superseded, not back yet): the
			// current one is taken back and Wait asks again when it is.
			p.cancel(s.cur)
		case s.cur == nil && s.want != 0:
			if e := p.submit(s, want); e != nil && e != windows.STATUS_INVALID_HANDLE {
				err = errors.Join(err, e)
			}
		}
	}
	p.updates = p.updates[:0]
	return err
}

// submit starts one poll for s. It completes through the port even when
// the driver answers at once (the helper handle does not skip the port on
// success).
// Its callers leave s a request idle: s has no current poll, or flush
// checked.
func (p *Poller) submit(s *sock, events uint32) error {
	timeout := int64(noTimeout)
	if s.recheck {
		timeout = -int64(recheckAfter / 100)
	}
	q := s.idle()
	switch status := p.start(q, s.base, events, timeout); status {
	case nil:
		s.cur, s.asked, s.polled = q, events, true
		return nil
	case windows.STATUS_INVALID_HANDLE:
		// Closed without Deregister: nothing left to watch.
		p.forget(s)
		return status
	default:
		if s.polled {
			// A socket the driver polled before was closed without
			// Deregister and its handle value given to another object
			// (a file, a pipe), which the driver refuses: as closed.
			// (Its close watch has come back too, unless the driver
			// has not written it yet.)
			p.forget(s)
			return windows.STATUS_INVALID_HANDLE
		}
		return status
	}
}

// start submits poll q of socket base for events, and returns nil or the
// driver's refusal.
func (p *Poller) start(q *request, base windows.Handle, events uint32, timeout int64) error {
	q.info = afdPollInfo{Timeout: timeout, NumberOfHandles: 1, Handle: base, Events: events}
	q.iosb = windows.IO_STATUS_BLOCK{Status: windows.STATUS_PENDING}
	r, _, _ := procNtDeviceIoControl.Call(uintptr(p.afd), 0, 0,
		uintptr(unsafe.Pointer(&q.iosb)), uintptr(unsafe.Pointer(&q.iosb)), ioctlAFDPoll,
		uintptr(unsafe.Pointer(&q.info)), unsafe.Sizeof(q.info),
		uintptr(unsafe.Pointer(&q.info)), unsafe.Sizeof(q.info))
	switch status := windows.NTStatus(r); status {
	case windows.STATUS_SUCCESS, windows.STATUS_PENDING:
		q.busy = true
		p.inflight[uintptr(unsafe.Pointer(&q.iosb))] = q
		return nil
	default:
		return status
	}
}

// closedSince says whether s was closed since it was registered: its close
// watch has been answered with AFD_POLL_LOCAL_CLOSE, though its completion
// may not have been dequeued yet. The driver completes the poll within the
// close, writing the answer, then the status block.
func (p *Poller) closedSince(s *sock) bool {
	q := &s.watch
	if !q.busy {
		return false // dequeued: watched decided
	}
	status := atomic.LoadUint32((*uint32)(unsafe.Pointer(&q.iosb.Status)))
	if windows.NTStatus(status) != windows.STATUS_SUCCESS {
		return false
	}
	return atomic.LoadUint32(&q.info.Events)&afdLocalClose != 0
}

// cancel asks the driver to end poll q early; it still completes
// through the port (STATUS_CANCELLED), or already has (STATUS_NOT_FOUND).
func (p *Poller) cancel(q *request) {
	var iosb windows.IO_STATUS_BLOCK
	procNtCancelIoFileEx.Call(uintptr(p.afd), uintptr(unsafe.Pointer(&q.iosb)), uintptr(unsafe.Pointer(&iosb)))
}

// forget stops watching s (deregistered or closed): its outstanding
// polls, the close watch among them, are cancelled and whatever they
// report is dropped.
func (p *Poller) forget(s *sock) {
	if s.gone {
		return
	}
	s.gone = true
	if p.socks[s.fd] == s {
		delete(p.socks, s.fd)
	}
	for _, q := range []*request{&s.reqs[0], &s.reqs[1], &s.watch} {
		if q.busy {
			p.cancel(q)
		}
	}
}

// isDatagram says whether socket fd is a datagram socket (asked only when
// one of its polls reported CONNECT_FAIL).
func isDatagram(fd int) bool {
	kind, err := windows.GetsockoptInt(windows.Handle(fd), windows.SOL_SOCKET, soType)
	return err == nil && kind == windows.SOCK_DGRAM
}

func toAFD(in poll.Interest) uint32 {
	e := uint32(afdLocalClose | afdError)
	if in&poll.Readable != 0 {
		e |= afdReadable
	}
	if in&poll.Writable != 0 {
		e |= afdWritable
	}
	return e
}

// fromAFD wakes both kinds on a reset or a failed connect, as the epoll
// backend does on EPOLLERR, so that whichever callback waits sees it.
func fromAFD(e uint32) poll.Interest {
	var in poll.Interest
	if e&(afdReadable|afdError) != 0 {
		in |= poll.Readable
	}
	if e&(afdWritable|afdError) != 0 {
		in |= poll.Writable
	}
	return in
}

// Wait (re)submits the polls queued since the last Wait, then waits for
// at most timeout (negative: forever; rounded up to milliseconds) and
// fills events.
func (p *Poller) Wait(events []poll.Event, timeout time.Duration) (int, error) {
	if err := p.flush(); err != nil {
		return 0, err
	}
	ms := uint32(windows.INFINITE)
	if timeout >= 0 {
		ms = uint32(min((timeout+time.Millisecond-1)/time.Millisecond, windows.INFINITE-1))
	}
	k, err := p.dequeue(events, ms)
	// A poll that flush cancelled to ask for more kinds came back empty:
	// its socket's new poll is submitted and taken within this Wait, so
	// that a kind added to a socket already ready for it is reported now,
	// as epoll and select() report it, not one Wait later. Cancels come
	// only from flush, so this ends once the re-asked polls are in.
	for err == nil && p.reasked && k < len(events) {
		p.reasked = false
		if err = p.flush(); err != nil {
			break
		}
		var more int
		more, err = p.dequeue(events[k:], 0)
		k += more
	}
	if err != nil {
		// What was taken is reported again: complete queued each socket
		// for its next poll, and readiness is level-triggered.
		return 0, err
	}
	return k, nil
}

// dequeue takes the completions the port has (waiting up to ms for the
// first) into events and returns how many report readiness.
func (p *Poller) dequeue(events []poll.Event, ms uint32) (int, error) {
	if len(events) > len(p.entries) {
		p.entries = make([]overlappedEntry, len(events))
	}
	var n uint32
	r, _, err := procGetQueuedCompletions.Call(uintptr(p.port),
		uintptr(unsafe.Pointer(&p.entries[0])), uintptr(len(events)),
		uintptr(unsafe.Pointer(&n)), uintptr(ms), 0)
	if r == 0 {
		if err == windows.WAIT_TIMEOUT {
			return 0, nil
		}
		return 0, err
	}
	k := 0
	for _, e := range p.entries[:n] {
		if e.Overlapped == 0 { // a wake-up
			p.woken.Store(false)
			continue
		}
		if tok, mask := p.complete(e.Overlapped); mask != 0 {
			events[k] = poll.Event{Token: tok, Mask: mask}
			k++
		}
	}
	return k, nil
}

// complete takes a finished poll back from the kernel and returns what it
// reports to the host, then queues the socket so that the next Wait polls
// it again.
func (p *Poller) complete(key uintptr) (poll.Token, poll.Interest) {
	q := p.inflight[key]
	if q == nil {
		return 0, 0 // not ours: only polls are posted with a request
	}
	delete(p.inflight, key)
	q.busy = false
	s := q.s
	if q == &s.watch {
		p.watched(s)
		return 0, 0
	}
	if s.gone || q != s.cur {
		return 0, 0 // dropped, or superseded by a poll asking for more
	}
	s.cur = nil
	var e uint32
	switch status := q.iosb.Status; {
	case status == windows.STATUS_CANCELLED:
		// Cancelled by flush to ask for other events: nothing happened,
		// and Wait asks again at once (if anything is still wanted).
		p.reasked = p.reasked || s.want != 0
	case int32(status) < 0:
		// The poll itself failed; report an error so that the host's
		// callback finds out by trying (mio does the same).
		e = afdConnectFail
	case q.info.NumberOfHandles == 0:
		// Timed out (a recheck poll) with nothing to report.
	case q.info.Events&afdLocalClose != 0:
		// Closed without Deregister: nothing left to watch.
		p.forget(s)
		return 0, 0
	default:
		e = q.info.Events
		if e&afdConnectFail != 0 && !s.recheck && isDatagram(s.fd) {
			s.recheck = true
		}
	}
	p.queue(s)
	return s.tok, fromAFD(e) & s.want
}

// watched takes s's close watch back. Cancelled, s was forgotten already;
// answered with AFD_POLL_LOCAL_CLOSE, s was closed. Anything else (not
// seen) starts the watch again, and a socket the driver no longer takes
// is forgotten as closed.
func (p *Poller) watched(s *sock) {
	q := &s.watch
	switch {
	case s.gone:
	case q.iosb.Status == windows.STATUS_SUCCESS && q.info.Events&afdLocalClose != 0:
		p.forget(s)
	case p.start(q, s.base, afdLocalClose, noTimeout) != nil:
		p.forget(s)
	}
}

// Wake posts a completion with no request; safe from any goroutine.
// Wake-ups before the Wait that dequeues one post only one.
func (p *Poller) Wake() error {
	if !p.woken.CompareAndSwap(false, true) {
		return nil
	}
	if err := windows.PostQueuedCompletionStatus(p.port, 0, wakeKey, nil); err != nil {
		p.woken.Store(false)
		return err
	}
	return nil
}

// WakeHandle: PostQueuedCompletionStatus(Handle, 0, Ident, NULL).
func (p *Poller) WakeHandle() poll.WakeHandle {
	return poll.WakeHandle{Kind: poll.WakeIOCP, Handle: uintptr(p.port), Ident: wakeKey}
}

// leaked keeps the sockets whose poll did not come back within Close's
// grace period: the kernel may still write them.
var leaked struct {
	sync.Mutex
	socks []map[uintptr]*request
}

// Close cancels every outstanding poll and waits (up to a second) for the
// kernel to hand each one back, so that no memory it owns is freed, then
// closes the helper handle and the port.
func (p *Poller) Close() error {
	for _, q := range p.inflight {
		q.s.gone = true
		p.cancel(q)
	}
	for deadline := time.Now().Add(time.Second); len(p.inflight) > 0 && time.Now().Before(deadline); {
		var n uint32
		r, _, _ := procGetQueuedCompletions.Call(uintptr(p.port),
			uintptr(unsafe.Pointer(&p.entries[0])), uintptr(len(p.entries)),
			uintptr(unsafe.Pointer(&n)), 100, 0)
		if r == 0 {
			continue
		}
		for _, e := range p.entries[:n] {
			delete(p.inflight, e.Overlapped)
		}
	}
	if len(p.inflight) > 0 {
		leaked.Lock()
		leaked.socks = append(leaked.socks, p.inflight)
		leaked.Unlock()
	}
	return errors.Join(windows.CloseHandle(p.afd), windows.CloseHandle(p.port))
}
