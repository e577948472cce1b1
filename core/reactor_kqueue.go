//go:build darwin || freebsd

// Picks the kqueue reactor on macOS and FreeBSD (see reactor_epoll.go).
package core

import "github.com/zloopgo/zloopgo/core/kqueue"

// Backend names the reactor NewReactor opens (for build_info()).
const Backend = "kqueue"

// NewReactor opens the platform's reactor.
func NewReactor() (Reactor, error) { return kqueue.New() }
