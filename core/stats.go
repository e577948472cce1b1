// What one engine counts as it iterates: plain increments and sums on the
// steps each iteration already takes, timed with the two clock readings an
// iteration already makes (before the wait, for its timeout; after it, for
// the due timers), and the optional per-iteration trace a benchmark asks
// for. It knows nothing of who reads the figures or how they cross to the
// host, and nothing of callbacks: the host counts those.

package core

// Stats are an engine's running totals since it was made. Nothing resets
// them: a reader that wants a window subtracts an earlier copy.
type Stats struct {
	Iterations    uint64 // RunOnce calls that reached their wait step
	Waits         uint64 // waits that made the system call
	WaitsBlocking uint64 // of which might block (the host's lock released)
	WaitsSkipped  uint64 // waits that could not block, skipped (nothing watched, quiet batch)
	WaitsFull     uint64 // waits that filled the event buffer
	Peeks         uint64 // waits that might block, made first with a zero timeout (counted in Waits)
	PeeksFound    uint64 // of which found events: the wait that might block was not made
	Events        uint64 // descriptor events the waits reported
	TimersFired   uint64 // timers handed back as due
	Yields        uint64 // hand-offs to the Go scheduler (busy loops, every 8 ms)
	PollNs        int64  // time in the wait step: from the reading before it to the one after
	IdleNs        int64  // of which in waits that might block: nothing was ready
	BusyNs        int64  // from the end of one wait to the start of the next: the host's batch and the engine's own steps
}

// Stats returns the engine's totals.
func (e *Engine) Stats() Stats { return e.stats }

// TimersHeld is the number of timers in the engine's heap, cancelled ones
// not yet swept included (the host knows how many of those it has).
func (e *Engine) TimersHeld() int { return e.timers.Len() }

// Watched is the number of descriptors the host has registered.
func (e *Engine) Watched() int { return e.watched }

// Iteration is one iteration as the trace records it: monotonic
// nanoseconds (the clock of Now) and what the iteration handed the host.
type Iteration struct {
	WaitStart   int64 // before the wait (or its skip)
	WaitEnd     int64 // after it
	End         int64 // after Dispatch returned
	Events      int32
	Timers      int32 // due timers handed back
	Completions int32
	Blocking    int32  // 1 if the wait might block
	Callbacks   uint64 // the host's callback count after Dispatch (see TraceCallbacks)
}

// TraceCallbacks is implemented by a host that counts the callbacks it
// has run; the trace reads the count after each Dispatch.
type TraceCallbacks interface {
	CallbacksRun() uint64
}

// StartTrace makes the engine record its next n iterations (a benchmark's
// timeline); it costs an extra clock reading per iteration while it lasts.
// A trace already running is dropped.
func (e *Engine) StartTrace(n int) {
	e.trace = make([]Iteration, 0, n)
	e.tracing = n > 0
}

// TakeTrace returns the iterations recorded and stops the trace.
func (e *Engine) TakeTrace() []Iteration {
	t := e.trace
	e.trace, e.tracing = nil, false
	return t
}

// record is the trace's step, taken after Dispatch when tracing.
func (e *Engine) record(it Iteration) {
	it.End = nanotime()
	if c, ok := e.host.(TraceCallbacks); ok {
		it.Callbacks = c.CallbacksRun()
	}
	e.trace = append(e.trace, it)
	if len(e.trace) == cap(e.trace) {
		e.tracing = false // full: the rest is not recorded
	}
}
