//go:build !linux && !darwin && !freebsd && !windows

// No backend exists for this system, so nothing can be woken from outside.
package polltest

import (
	"errors"

	"github.com/zloopgo/zloopgo/core/poll"
)

func wakeFromOutside(poll.WakeHandle) error { return errors.New("no backend on this system") }
