// Command loadgen is the echo benchmark's load generator: a client that
// needs far less CPU per request than any echo server it drives, so that
// requests/s measures the server and not the client.
//
// It opens -conns TCP connections to -addr and on each one sends -num
// messages of -msize bytes (or, with -duration D, as many as it can until D
// has passed, then waits for the echoes in flight: a fixed time instead of
// a fixed count, so that servers sharing a port through SO_REUSEPORT, each
// given a random share of the connections, are all busy until the end),
// one in flight per connection: a message goes
// out when the previous echo has fully arrived and matched what was sent
// (every byte compared; each message carries its connection and sequence
// number). One OS thread, one epoll set, non-blocking sockets with
// TCP_NODELAY, no goroutine switches and no allocation per request.
//
// At the end it prints one line
//
//	LOADGEN {"requests":N,"seconds":T,"rate":R,"cpu_seconds":C,...}
//
// with the client's own CPU time (user + system) and latency percentiles,
// and exits 0; on any error or mismatched echo it prints the reason and
// exits 1.
package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"runtime"
	"sort"
	"time"

	"golang.org/x/sys/unix"
)

type conn struct {
	fd     int
	id     int
	sent   int       // messages sent
	got    int       // bytes of the current echo received
	msg    []byte    // the message in flight
	buf    []byte    // where its echo lands
	sentAt time.Time // when the message in flight went out
}

type result struct {
	Requests   int     `json:"requests"`
	Seconds    float64 `json:"seconds"`
	Rate       float64 `json:"rate"`
	CPUSeconds float64 `json:"cpu_seconds"`
	CPUPerReq  float64 `json:"cpu_us_per_request"`
	P50us      float64 `json:"p50_us"`
	P99us      float64 `json:"p99_us"`
	Conns      int     `json:"conns"`
	Msize      int     `json:"msize"`
	Num        int     `json:"num"`
}

func main() {
	addr := flag.String("addr", "127.0.0.1:25000", "HOST:PORT of the echo server")
	conns := flag.Int("conns", 3, "connections, one request in flight on each")
	msize := flag.Int("msize", 1024, "message size in bytes (>= 16)")
	num := flag.Int("num", 20000, "messages per connection")
	timeout := flag.Duration("timeout", 120*time.Second, "give up after this long")
	spin := flag.Bool("spin", false, "busy-poll (epoll_wait with timeout 0) instead of sleeping")
	duration := flag.Duration("duration", 0, "> 0: send until this long has passed, not -num messages")
	flag.Parse()
	if *msize < 16 || *conns < 1 || (*num < 1 && *duration <= 0) {
		fail(errors.New("need -msize >= 16, -conns >= 1, -num >= 1 or -duration > 0"))
	}
	runtime.GOMAXPROCS(1)
	runtime.LockOSThread()
	if *duration > 0 {
		*num = 0 // no count: the time decides
	}
	res, err := run(*addr, *conns, *msize, *num, *duration, *timeout, *spin)
	if err != nil {
		fail(err)
	}
	out, _ := json.Marshal(res)
	fmt.Printf("LOADGEN %s\n", out)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "loadgen:", err)
	os.Exit(1)
}

func sockaddr(addr string) (*unix.SockaddrInet4, error) {
	tcp, err := net.ResolveTCPAddr("tcp4", addr)
	if err != nil {
		return nil, err
	}
	sa := &unix.SockaddrInet4{Port: tcp.Port}
	copy(sa.Addr[:], tcp.IP.To4())
	return sa, nil
}

func dial(sa *unix.SockaddrInet4) (int, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	if err := unix.Connect(fd, sa); err != nil {
		unix.Close(fd)
		return -1, err
	}
	if err := unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1); err != nil {
		unix.Close(fd)
		return -1, err
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// pattern is the body every message is cut from: messages differ by their
// header and by where in the pattern their body starts, and making one is
// a copy, not a loop over its bytes.
var pattern []byte

func makePattern(msize int) {
	pattern = make([]byte, msize+256)
	b := byte(0)
	for i := range pattern {
		pattern[i] = b
		b += 13
	}
}

// fill writes the message for request seq of connection id: a header with
// both numbers, then the pattern from an offset that depends on them.
func fill(msg []byte, id, seq int) {
	binary.LittleEndian.PutUint32(msg[0:], uint32(id))
	binary.LittleEndian.PutUint64(msg[4:], uint64(seq))
	copy(msg[12:], pattern[(seq*7+id)&255:])
}

// send writes the whole message; a short write waits for room with poll
// (a loopback socket with one message in flight rarely needs it).
func send(c *conn) error {
	p := c.msg
	for len(p) > 0 {
		n, err := unix.Write(c.fd, p)
		if err == unix.EAGAIN || err == unix.EINTR {
			pfd := []unix.PollFd{{Fd: int32(c.fd), Events: unix.POLLOUT}}
			if _, err := unix.Poll(pfd, 1000); err != nil && err != unix.EINTR {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		p = p[n:]
	}
	c.sentAt = time.Now()
	c.sent++
	return nil
}

func cpuSeconds() float64 {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// run drives the server; num == 0 means until duration has passed.
func run(addr string, nconns, msize, num int, duration, timeout time.Duration, spin bool) (*result, error) {
	sa, err := sockaddr(addr)
	if err != nil {
		return nil, err
	}
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	defer unix.Close(ep)
	makePattern(msize)
	conns := make([]*conn, nconns)
	byFd := map[int]*conn{}
	for i := range conns {
		fd, err := dial(sa)
		if err != nil {
			return nil, fmt.Errorf("connect %s: %w", addr, err)
		}
		defer unix.Close(fd)
		c := &conn{fd: fd, id: i, msg: make([]byte, msize), buf: make([]byte, msize)}
		conns[i], byFd[fd] = c, c
		ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP, Fd: int32(fd)}
		if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
			return nil, err
		}
	}
	lat := make([]int64, 0, max(nconns*num, 1<<16))
	events := make([]unix.EpollEvent, nconns)
	cpu0 := cpuSeconds()
	start := time.Now()
	deadline := start.Add(timeout)
	stopSending := start.Add(duration)
	for _, c := range conns {
		fill(c.msg, c.id, 0)
		if err := send(c); err != nil {
			return nil, err
		}
	}
	left := nconns
	for left > 0 {
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("timed out after %v with %d requests done", timeout, len(lat))
		}
		wait := 1000
		if spin {
			wait = 0
		}
		n, err := unix.EpollWait(ep, events, wait)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, ev := range events[:n] {
			// One read per readiness event: with one message in flight there
			// is nothing more to read after a whole echo, and a partial echo
			// is continued when epoll reports the rest (level-triggered).
			c := byFd[int(ev.Fd)]
			k, err := unix.Read(c.fd, c.buf[c.got:])
			if err == unix.EAGAIN || err == unix.EINTR {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("connection %d: read: %w", c.id, err)
			}
			if k == 0 {
				return nil, fmt.Errorf("connection %d: server closed after %d requests",
					c.id, c.sent-1)
			}
			c.got += k
			if c.got < msize {
				continue
			}
			lat = append(lat, int64(time.Since(c.sentAt)))
			if !bytes.Equal(c.buf, c.msg) {
				return nil, fmt.Errorf("connection %d: echo %d differs from what was sent",
					c.id, c.sent-1)
			}
			c.got = 0
			if c.sent == num || (num == 0 && time.Now().After(stopSending)) {
				if err := unix.EpollCtl(ep, unix.EPOLL_CTL_DEL, c.fd, nil); err != nil {
					return nil, err
				}
				left--
				continue
			}
			fill(c.msg, c.id, c.sent)
			if err := send(c); err != nil {
				return nil, fmt.Errorf("connection %d: write: %w", c.id, err)
			}
		}
	}
	elapsed := time.Since(start).Seconds()
	cpu := cpuSeconds() - cpu0
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	total := len(lat) // every echo received and matched
	return &result{
		Requests:   total,
		Seconds:    elapsed,
		Rate:       float64(total) / elapsed,
		CPUSeconds: cpu,
		CPUPerReq:  cpu / float64(total) * 1e6,
		P50us:      float64(lat[len(lat)/2]) / 1e3,
		P99us:      float64(lat[len(lat)*99/100]) / 1e3,
		Conns:      nconns,
		Msize:      msize,
		Num:        num,
	}, nil
}
