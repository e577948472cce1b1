//go:build darwin || freebsd

// How code outside Go wakes a kqueue backend: trigger its EVFILT_USER event.
package polltest

import (
	"fmt"

	"github.com/zloopgo/zloopgo/core/poll"
	"golang.org/x/sys/unix"
)

func wakeFromOutside(h poll.WakeHandle) error {
	if h.Kind != poll.WakeKqueueUser {
		return fmt.Errorf("wake handle kind %d on a kqueue system, want WakeKqueueUser", h.Kind)
	}
	var ev [1]unix.Kevent_t
	unix.SetKevent(&ev[0], int(h.Ident), unix.EVFILT_USER, 0)
	ev[0].Fflags = unix.NOTE_TRIGGER
	_, err := unix.Kevent(int(h.Handle), ev[:], nil, nil)
	return err
}
