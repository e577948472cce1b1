//go:build linux

// How code outside Go wakes a Linux backend: 8 bytes to its eventfd.
package polltest

import (
	"encoding/binary"
	"fmt"

	"github.com/zloopgo/zloopgo/core/poll"
	"golang.org/x/sys/unix"
)

func wakeFromOutside(h poll.WakeHandle) error {
	if h.Kind != poll.WakeEventfd {
		return fmt.Errorf("wake handle kind %d on Linux, want WakeEventfd", h.Kind)
	}
	var one [8]byte
	binary.NativeEndian.PutUint64(one[:], 1)
	_, err := unix.Write(int(h.Handle), one[:])
	return err
}
