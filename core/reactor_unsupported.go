//go:build !linux && !darwin && !freebsd && !windows

// Systems without a reactor backend: the engine still builds (its tests
// use fake reactors), NewReactor says why it cannot open one.

package core

import (
	"errors"
	"runtime"
)

// ReactorName is empty: there is no reactor on this system.
const ReactorName = ""

// NewReactor fails: no backend supports this system.
func NewReactor() (Reactor, error) {
	return nil, errors.New("zloopgo: no reactor backend for " + runtime.GOOS)
}
