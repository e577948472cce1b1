//go:build windows

// Picks the Windows reactor: readiness over an I/O completion port (see
// reactor_epoll.go).

package core

import "github.com/zloopgo/zloopgo/core/iocp"

// ReactorName names the backend NewReactor opens (build_info()'s "reactor").
const ReactorName = "iocp"

// NewReactor opens the platform's reactor.
func NewReactor() (Reactor, error) { return iocp.New() }
