//go:build linux

// Picks the Linux reactor. Each system gets its backend from the one
// reactor_*.go file whose build constraint matches; shared code never asks
// which system it runs on.

package core

import "github.com/zloopgo/zloopgo/core/epoll"

// ReactorName names the backend NewReactor opens (build_info()'s "reactor").
const ReactorName = "epoll"

// NewReactor opens the platform's reactor.
func NewReactor() (Reactor, error) { return epoll.New() }
