//go:build windows

// How code outside Go wakes the iocp backend: post a completion to its port.
package polltest

import (
	"fmt"

	"github.com/zloopgo/zloopgo/core/poll"
	"golang.org/x/sys/windows"
)

func wakeFromOutside(h poll.WakeHandle) error {
	if h.Kind != poll.WakeIOCP {
		return fmt.Errorf("wake handle kind %d on Windows, want WakeIOCP", h.Kind)
	}
	return windows.PostQueuedCompletionStatus(windows.Handle(h.Handle), 0, h.Ident, nil)
}
