// Picks the Linux reactor. Other systems get their backend from their own
// reactor_<os>.go file; shared code never asks which system it runs on.
package core

import (
	"time"

	"github.com/zloopgo/zloopgo/core/epoll"
)

// NewReactor opens the platform's reactor.
func NewReactor() (Reactor, error) {
	p, err := epoll.New()
	if err != nil {
		return nil, err
	}
	return reactorAdapter{p}, nil
}

// reactorAdapter converts between the backend's plain integers and the
// core's named types, so that the backend does not import core.
type reactorAdapter struct{ p *epoll.Poller }

func (r reactorAdapter) Register(fd int, tok Token, in Interest) error {
	return r.p.Register(fd, tok, uint32(in))
}

func (r reactorAdapter) Reregister(fd int, tok Token, in Interest) error {
	return r.p.Reregister(fd, tok, uint32(in))
}

func (r reactorAdapter) Deregister(fd int) error { return r.p.Deregister(fd) }

func (r reactorAdapter) Wait(events []Event, timeout time.Duration) (int, error) {
	n, err := r.p.Wait(len(events), timeout)
	for i := 0; i < n; i++ {
		tok, mask := r.p.Event(i)
		events[i] = Event{Token: tok, Mask: Interest(mask)}
	}
	return n, err
}

func (r reactorAdapter) WakeFD() int  { return r.p.WakeFD() }
func (r reactorAdapter) Wake() error  { return r.p.Wake() }
func (r reactorAdapter) Close() error { return r.p.Close() }
