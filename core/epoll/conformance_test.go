//go:build linux

// The epoll backend against the reactor conformance suite.

package epoll

import (
	"testing"

	"github.com/zloopgo/zloopgo/core/poll"
	"github.com/zloopgo/zloopgo/core/poll/polltest"
)

func TestConformance(t *testing.T) {
	polltest.Run(t, func() (poll.Backend, error) { return New() })
}
