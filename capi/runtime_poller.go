// The Go runtime's network poller, opened when the extension loads rather
// than at some later moment of the program's life. It knows the Go
// runtime's timers; nothing of Python, of the engine or of the loops.
//
// The runtime opens its poller (on Linux an epoll descriptor and an
// eventfd, kept for the life of the process) the first time any runtime
// timer is armed. zloopgo's Go code arms none, but the runtime's
// background scavenger does when it first paces itself, which happens
// only after the Go heap has been collected and has pages to give back
// to the system: after tens to over a thousand loops of issue 39's soak,
// or at once after one loop with 200,000 timers. Its two descriptors then
// appeared mid-program, exactly as a leak would, in every count that
// starts after the first loop (issue 39's soak: +2 after 1,200 loop
// cycles, on top of the cgroup files the runtime opens when it starts).
// Arming and stopping one timer at load makes the runtime open them now:
// from the first loop on, the process's descriptors no longer change.

package main

import "time"

func init() {
	openRuntimePoller()
}

// openRuntimePoller arms a timer and stops it: arming one is what makes
// the runtime open its poller (runtime/time.go, timers.addHeap), and a
// timer made by AfterFunc is armed at once (one made by NewTimer waits
// until something blocks on its channel).
func openRuntimePoller() {
	time.AfterFunc(time.Hour, func() {}).Stop()
}
