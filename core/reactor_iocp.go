//go:build windows

// Picks the Windows reactor: readiness over an I/O completion port (see
// reactor_epoll.go).
package core

import "github.com/zloopgo/zloopgo/core/iocp"

// Backend names the reactor NewReactor opens (for build_info()).
const Backend = "iocp"

// NewReactor opens the platform's reactor.
func NewReactor() (Reactor, error) { return iocp.New() }
