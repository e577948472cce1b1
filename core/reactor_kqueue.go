//go:build darwin || freebsd

// Picks the kqueue reactor on macOS and FreeBSD (see reactor_epoll.go).

package core

import "github.com/zloopgo/zloopgo/core/kqueue"

// ReactorName names the backend NewReactor opens (build_info()'s "reactor").
const ReactorName = "kqueue"

// NewReactor opens the platform's reactor.
func NewReactor() (Reactor, error) { return kqueue.New() }
