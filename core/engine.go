// The run-once engine: one iteration of the event loop, phase by phase, as
// listed in doc.go. It owns the timer heap and the reactor; it knows
// nothing of what a descriptor token, a timer slot or a request id means.

package core

import (
	"errors"
	"math"
	"runtime"
	"time"

	"github.com/zloopgo/zloopgo/core/timerheap"
)

// MaxTimeout caps one wait, as asyncio's MAXIMUM_SELECT_TIMEOUT does, so a
// timer scheduled absurdly far away still lets the loop wake once a day.
const MaxTimeout = 24 * time.Hour

// compactMin and compactShare decide when cancelled timers are swept from
// the whole heap rather than only from its top (asyncio's
// _MIN_SCHEDULED_TIMER_HANDLES and _MIN_CANCELLED_TIMER_HANDLES_FRACTION).
const (
	compactMin   = 100
	compactShare = 0.5
)

// TimerSlot is the host's number for one scheduled timer (the adapter's:
// the index of the timer's slot in its table). The engine keeps it in its
// heap and hands it back when the timer is due or cancelled, never
// interpreting it.
type TimerSlot uint64

// NewTimer is a timer the host scheduled since the last iteration. Its
// layout (float64 deadline, 8-byte slot) is shared with the C adapter.
type NewTimer struct {
	When float64
	Slot TimerSlot
}

// Host is the embedder's half of an iteration. Every method is called on
// the loop's thread; only Release, Reacquire and Dispatch may cost a call
// into foreign code, the others read shared memory.
type Host interface {
	// TakeNewTimers returns the timers scheduled since the last call, in
	// scheduling order, and forgets them; the slice is valid until the next
	// TakeNewTimers or Dispatch call.
	TakeNewTimers() []NewTimer
	// TimerCancelled reports whether the timer in slot was cancelled.
	TimerCancelled(slot TimerSlot) bool
	// CancelledTimers counts cancelled timers whose slots the host has not
	// yet been given back through Dispatch.
	CancelledTimers() int
	// MustNotBlock reports callbacks waiting to run or a stop request.
	MustNotBlock() bool
	// Quiet reports that nothing the last Dispatch ran can have made a
	// descriptor ready (the host knows what its callbacks did). A wait
	// that cannot block would then only report what became ready on its
	// own since the last wait, at a moment no program can rely on; the
	// engine skips it and the next wait reports it.
	Quiet() bool
	// Release is called before a wait that may block (the adapter drops the
	// GIL). What it gives up is taken back by the Dispatch that follows
	// (reacquire set), or by Reacquire if the wait failed: one call into
	// the host fewer per sleeping iteration.
	Release()
	Reacquire()
	// Dispatch hands over the ready descriptors, the timer slots the
	// engine is done with (due timers in firing order, and cancelled ones)
	// and the completions posted since the last iteration, and runs one
	// batch of callbacks; with reacquire set it first undoes Release.
	//
	// It may then run up to ahead.Batches further batches by itself, each
	// standing for an iteration the engine would have run exactly so (see
	// Lookahead), and reports how many it ran and how many of those made
	// their wait themselves: the engine counts them as iterations, the
	// rest as iterations that skipped their wait. An error ends Run.
	Dispatch(events []Event, timers []TimerSlot, done []Completion, reacquire bool, ahead Lookahead) (Alone, error)
	// Stopping reports a stop request; checked after each iteration.
	Stopping() bool
	// Clock is the time on the host's own clock when the program replaced
	// the loop's clock (asyncio lets tests patch loop.time()); ok false
	// means the engine reads the monotonic clock itself. It is read once
	// per iteration, before the wait, and serves for the timeout and for
	// the timers due after it.
	Clock() (now float64, ok bool)
}

// Lookahead tells the host when its next batch would be an iteration of
// the engine that does nothing but hand it over: callbacks are ready (so
// the wait cannot block), the wait would find nothing, no timer is due and
// no completion is posted. The wait finds nothing when it would be skipped
// (nothing is watched, or the batch before was quiet) or, if the reactor
// can be looked at (Peek), when the host's look finds nothing: that look
// is then the iteration's wait, and it must leave what the next wait
// reports, and its order, as it was. The host may then run that batch
// itself without returning to the engine, and save the iteration's
// crossing into Go and back; what runs, and in what order, is the same,
// and every iteration still polls unless the engine would have skipped
// its wait. It must stop at a stop request.
type Lookahead struct {
	// NextTimer is the deadline of the earliest timer the engine holds
	// (+Inf if none). A batch may run alone only while it, and every timer
	// the host scheduled since the engine last took them, is not due:
	// deadline >= now + the engine's resolution. A host with a replaced
	// clock runs no batch alone.
	NextTimer float64
	// Posted points at a word that is nonzero while completions wait in the
	// inbox; it is written by other goroutines, so load it atomically.
	Posted *uint32
	// Batches is the most batches the host may run alone in this Dispatch
	// (0 while a trace records every iteration).
	Batches int
	// Peek is how to look at the reactor (poll.PeekHandle); with
	// PeekNone a batch whose wait would not be skipped never runs alone.
	// With it, the host may also make a wait that may block itself when
	// a look finds events ready (no waker among them): it then hands the
	// events over as the engine's wait would, in the order the reactor
	// reports them, and runs their batch as that iteration. During the
	// Dispatch it may also change what descriptors the reactor watches
	// itself, with the reactor's own system calls and tokens, reporting
	// the change to their count in Alone.Watched.
	Peek PeekHandle
	// YieldBy is the monotonic time, in seconds (Now()), at which the
	// engine is due to yield (maybeYield): the host makes no look after
	// it, so the yield is not held up by a run of iterations, and the
	// events a look found are not polled again by the engine's wait.
	YieldBy float64
}

// Alone is what a Dispatch reports of the batches it ran by itself.
type Alone struct {
	Batches int // each an iteration
	Polled  int // of those, the ones whose wait the host made (Lookahead.Peek)
	Events  int // the events those waits handed over
	// LookedEmpty says that the host, last thing before it returned, looked
	// at the reactor for a wait that may block and found nothing, or
	// skipped that look because its looks found nothing lately: the
	// engine's next wait then goes without a look of its own.
	LookedEmpty bool
	// Watched is the change to the count of descriptors watched that the
	// host made itself through Lookahead.Peek (added to Watched()).
	Watched int
}

// aloneMax bounds the batches one Dispatch runs alone: the engine looks at
// the clock for its yield (maybeYield) between Dispatch calls, so a run of
// heavy batches alone must not carry it far, and a trace or a stats reader
// sees the loop's totals settle at least every aloneMax+1 iterations.
const aloneMax = 31

// EventBufferer is implemented by a host that wants ready events written
// straight into memory it owns (the C adapter: then handing them over
// passes no Go pointer across cgo). EventBuffer returns that memory with
// room for at least n events if it can, else as it was (a wait then
// reports no more than fit). The engine calls it when it is made and,
// when the descriptors watched outgrow the buffer, before a wait: never
// while the host is in Dispatch, which may still read the events.
type EventBufferer interface {
	EventBuffer(n int) []Event
}

// minEvents is the room for events an engine starts with.
const minEvents = 256

// eventsFor is the room a wait needs to report every event that can be
// ready at once, as asyncio's selectors do (their select asks for as
// many as there are registrations): two per descriptor (kqueue reports
// reading and writing apart) and the waker's. With less, the events
// beyond the buffer wait for the next iteration, so callbacks asyncio
// runs in one iteration would be spread over two.
func eventsFor(watched int) int { return 2*watched + 1 }

// Engine is one event loop's engine.
type Engine struct {
	host        Host
	reactor     Reactor
	resolution  float64
	timers      timerheap.Heap[TimerSlot]
	events      []Event
	out         []TimerSlot // timer slots handed back in this iteration
	inbox       *inbox      // completions posted by other goroutines
	watched     int         // descriptors registered by the host
	eventsAsk   int         // the most room for events asked of the host so far
	peekSkips   int         // waits that may block left to make without a look first (poll)
	peekBackoff int         // peekSkips after the next look that finds nothing
	peek        PeekHandle  // how the host looks at the reactor (Lookahead.Peek)
	lastYield   int64       // nanotime() after the last yield (maybeYield)
	yield       func()      // runtime.Gosched; tests count calls instead
	stats       Stats       // stats.go
	waitEnd     int64       // nanotime() after the last wait of this Run, 0 before the first
	trace       []Iteration
	tracing     bool
}

// yieldEvery is how often a busy loop hands its goroutine back to the Go
// scheduler. Go's sysmon thread treats a goroutine that has not been
// rescheduled for 10 ms as hogging its P: it signals the thread to preempt
// it, takes its P while it is in a call into the host (where it spends
// most of its time) and then polls every 20 µs for a while — on one CPU
// each poll is a context switch of the loop's thread. A yield is not free
// either: the goroutine is locked to the Python thread, so the scheduler
// hands the P to another thread and back, which is why it comes as rarely
// as still keeps sysmon quiet. The margin below 10 ms is for the iteration
// that is running when it falls due (the look comes at the start of the
// next one): iterations up to 2 ms long keep within it.
const yieldEvery = 8 * int64(time.Millisecond)

// NewEngine opens a reactor for host. resolution is the clock's, in
// seconds: a timer is due when its deadline is before now + resolution.
func NewEngine(host Host, resolution float64) (*Engine, error) {
	r, err := NewReactor()
	if err != nil {
		return nil, err
	}
	return NewEngineWithReactor(host, r, resolution), nil
}

// NewEngineWithReactor is NewEngine with a given reactor (tests use fakes).
func NewEngineWithReactor(host Host, r Reactor, resolution float64) *Engine {
	e := &Engine{host: host, reactor: r, resolution: resolution, yield: runtime.Gosched, inbox: newInbox()}
	if p, ok := r.(Peeker); ok {
		e.peek = p.PeekHandle()
	}
	if b, ok := host.(EventBufferer); ok {
		e.events = b.EventBuffer(minEvents)
	} else {
		e.events = make([]Event, minEvents)
	}
	return e
}

// Reactor gives the host access to descriptor registration.
func (e *Engine) Reactor() Reactor { return e.reactor }

// Watch records that the host registered (delta 1) or deregistered
// (delta -1) a descriptor; with none registered, a non-blocking iteration
// skips the poll system call.
func (e *Engine) Watch(delta int) { e.watched += delta }

// Run iterates until the host asks to stop or Dispatch fails.
func (e *Engine) Run() error {
	e.waitEnd = 0 // time between runs is not the loop's
	e.lastYield = nanotime()
	for {
		if err := e.RunOnce(); err != nil {
			return err
		}
		if e.host.Stopping() {
			return nil
		}
	}
}

// maybeYield hands the goroutine to the Go scheduler when yieldEvery has
// passed since it last did, by the clock reading now the iteration takes
// anyway (so the look costs a comparison, and a long iteration cannot
// carry the goroutine past sysmon's limit unseen). It returns the clock
// after the yield, which the iteration goes on with.
func (e *Engine) maybeYield(now int64) int64 {
	if now-e.lastYield < yieldEvery {
		return now
	}
	e.stats.Yields++
	e.yield()
	now = nanotime()
	e.lastYield = now
	return now
}

// fitEvents gives the event buffer room for every event that can be
// ready (eventsFor), asking the host once per size it needs.
func (e *Engine) fitEvents() {
	need := eventsFor(e.watched)
	if need <= len(e.events) || need <= e.eventsAsk {
		return
	}
	e.eventsAsk = need
	if b, ok := e.host.(EventBufferer); ok {
		e.events = b.EventBuffer(need)
		return
	}
	n := len(e.events)
	for n < need {
		n *= 2
	}
	e.events = make([]Event, n)
}

// RunOnce runs one iteration.
func (e *Engine) RunOnce() error {
	e.out = e.out[:0]
	e.fitEvents()
	e.takeNewTimers()
	e.dropCancelled()
	fake, faked := e.host.Clock()
	start := e.maybeYield(nanotime())
	if e.waitEnd != 0 {
		e.stats.BusyNs += start - e.waitEnd
	}
	n, released, err := e.poll(e.timeout(clock(start, fake, faked)))
	if err != nil {
		return err
	}
	end := nanotime()
	e.waitEnd = end
	e.stats.Iterations++
	e.stats.PollNs += end - start
	if released {
		e.stats.IdleNs += end - start
	}
	due := len(e.out)
	e.popDue(clock(end, fake, faked))
	due = len(e.out) - due
	e.stats.TimersFired += uint64(due)
	done := e.inbox.take()
	alone, err := e.host.Dispatch(e.events[:n], e.out, done, released, e.lookahead())
	e.stats.Iterations += uint64(alone.Batches)
	e.stats.Waits += uint64(alone.Polled)
	e.stats.WaitsSkipped += uint64(alone.Batches - alone.Polled)
	e.stats.Events += uint64(alone.Events)
	e.watched += alone.Watched
	if alone.LookedEmpty && e.peekSkips == 0 {
		e.peekSkips = 1
	}
	if e.tracing {
		e.record(Iteration{WaitStart: start, WaitEnd: end, Events: int32(n), Timers: int32(due),
			Completions: int32(len(done)), Blocking: int32(boolInt(released))})
	}
	return err
}

// lookahead is what the host needs to run the batches after this one by
// itself (Lookahead); none while a trace records every iteration.
func (e *Engine) lookahead() Lookahead {
	ahead := Lookahead{NextTimer: math.Inf(1), Posted: &e.inbox.nonEmpty, Peek: e.peek,
		YieldBy: float64(e.lastYield+yieldEvery) / 1e9}
	if top, ok := e.timers.Top(); ok {
		ahead.NextTimer = top.When
	}
	if !e.tracing {
		ahead.Batches = aloneMax
	}
	return ahead
}

// clock is the host's replacement time if it has one, else the monotonic
// reading ns (nanotime()) as Now() converts it: taken before the wait for
// its timeout and after it, so that the due timers are those of after
// the wait.
func clock(ns int64, fake float64, faked bool) float64 {
	if faked {
		return fake
	}
	return float64(ns) / 1e9
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (e *Engine) takeNewTimers() {
	for _, t := range e.host.TakeNewTimers() {
		if e.host.TimerCancelled(t.Slot) {
			e.out = append(e.out, t.Slot)
			continue
		}
		e.timers.Push(t.When, t.Slot)
	}
}

// dropCancelled sweeps the whole heap when cancelled timers are the
// majority, else only pops cancelled timers off the top so that they do
// not shorten the wait.
func (e *Engine) dropCancelled() {
	n := e.timers.Len()
	// Slots already in out are cancelled ones the host still counts.
	cancelled := e.host.CancelledTimers() - len(e.out)
	if n > compactMin && float64(cancelled) > compactShare*float64(n) {
		e.out = e.timers.Filter(e.keep, e.out)
		return
	}
	for {
		top, ok := e.timers.Top()
		if !ok || !e.host.TimerCancelled(top.Token) {
			return
		}
		e.out = append(e.out, e.timers.Pop().Token)
	}
}

func (e *Engine) keep(slot TimerSlot) bool { return !e.host.TimerCancelled(slot) }

// timeout follows asyncio: no wait with work ready, a completion posted or
// a stop pending, a wait until the earliest timer, or an unbounded wait.
func (e *Engine) timeout(now float64) time.Duration {
	if e.host.MustNotBlock() || e.inbox.pending() {
		return 0
	}
	top, ok := e.timers.Top()
	if !ok {
		return -1
	}
	wait := top.When - now
	if wait <= 0 {
		return 0
	}
	d := time.Duration(wait * float64(time.Second))
	if d > MaxTimeout || wait > MaxTimeout.Seconds() {
		return MaxTimeout
	}
	return d
}

// poll waits for descriptor events; released reports that the host's
// lock was given up for a wait that may block, so Dispatch must take it
// back. A wait that cannot block skips the system call when it can find
// nothing a program could count on: no descriptor is registered (a
// cross-thread wake-up needs no poll: its callback is already queued), or
// the host says its last batch was quiet. A wait that may block is made
// first with a zero timeout, the lock kept, while such looks keep finding
// events (peekFirst): then the events are there already, as when a client
// and its server share the loop, and the wait costs neither the lock's
// release nor the runtime's bookkeeping of a blocking system call.
func (e *Engine) poll(timeout time.Duration) (n int, released bool, err error) {
	switch {
	case timeout == 0 && (e.watched == 0 || e.host.Quiet()):
		e.stats.WaitsSkipped++
		return 0, false, nil
	case timeout == 0:
		n, err = e.reactor.Wait(e.events, 0)
	default:
		if e.peekFirst() {
			n, err = e.reactor.Wait(e.events, 0)
			e.stats.Peeks++
			if err != nil || n > 0 {
				e.peeked(err == nil)
				break
			}
			e.peeked(false)
			// The look may have drained a wake-up owed to a completion
			// posted since the timeout was chosen: it must not sleep then.
			if e.inbox.pending() {
				break
			}
			e.stats.Waits++
		}
		e.host.Release()
		released = true
		n, err = e.reactor.Wait(e.events, timeout)
	}
	if err != nil {
		if released {
			e.host.Reacquire()
		}
		return 0, false, errors.Join(errors.New("zloopgo: waiting for events failed"), err)
	}
	e.stats.Waits++
	if released {
		e.stats.WaitsBlocking++
	}
	e.stats.Events += uint64(n)
	if n == len(e.events) {
		e.stats.WaitsFull++
	}
	return n, released, nil
}

// peekMax bounds the waits that may block made without a look first,
// after a look found nothing: an idle loop (a server between requests)
// pays one look in that many sleeps at most.
const peekMax = 64

// peekFirst says whether this wait that may block is looked at first: the
// descriptors watched could be ready, and no look that found nothing
// asked to skip it.
func (e *Engine) peekFirst() bool {
	if e.watched == 0 {
		return false
	}
	if e.peekSkips > 0 {
		e.peekSkips--
		return false
	}
	return true
}

// peeked records what a look found: after one that found nothing, the
// next waits that may block (1, doubling up to peekMax while looks keep
// finding nothing) are made without one.
func (e *Engine) peeked(found bool) {
	if found {
		e.stats.PeeksFound++
		e.peekBackoff = 1
		return
	}
	e.peekSkips = max(e.peekBackoff, 1)
	e.peekBackoff = min(2*e.peekSkips, peekMax)
}

func (e *Engine) popDue(now float64) {
	if e.timers.Len() == 0 {
		return
	}
	end := now + e.resolution
	for {
		top, ok := e.timers.Top()
		if !ok || top.When >= end {
			return
		}
		e.out = append(e.out, e.timers.Pop().Token)
	}
}

// Reset forgets every timer, returning their slots for the host to
// release (used when the loop closes).
func (e *Engine) Reset() []TimerSlot {
	return e.timers.Drain(nil)
}

// Close refuses posts from now on and releases the reactor. It returns
// the completions posted but never dispatched, for the host to dispose of
// what they refer to.
func (e *Engine) Close() ([]Completion, error) {
	orphans := e.inbox.close()
	return orphans, e.reactor.Close()
}
