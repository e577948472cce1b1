// Package core is zloopgo's event-loop engine: the run-once iteration, the
// reactor contract (defined in core/poll, named here) and the monotonic
// clock.
//
// It knows nothing of Python, callbacks or cgo. What it schedules is named
// by opaque numbers its Host chooses (the CPython adapter in production,
// fakes in tests), one type per kind: a DescriptorToken per watched
// descriptor, a TimerSlot per timer, a RequestID per piece of work another
// goroutine completes. One iteration, in the order asyncio's
// BaseEventLoop._run_once uses:
//
//  1. take the timers the host scheduled since the last iteration;
//  2. drop cancelled timers (from the top of the heap, or all of them when
//     more than half the heap is cancelled);
//  3. pick the poll timeout: zero if the host has ready work, else until the
//     earliest timer, else forever;
//  4. wait for descriptor events, with the host's lock (the GIL) released
//     only if the wait may block, and such a wait first looked at with a
//     zero timeout, the lock kept, while those looks keep finding events;
//     a wait that cannot block is skipped when nothing is watched or the
//     host's last batch was quiet (it ran only callbacks that cannot have
//     made a descriptor ready);
//  5. pop the timers that are due;
//  6. hand events, timer slots and completions to the host in one call,
//     which runs the ready callbacks.
//
// Step 6 is the only call into the host that crosses into C on every
// iteration; step 4's release is one more, only when the wait may block
// (step 6 takes the lock back). In step 6 the host may also run the
// batches of the iterations that follow, while each of those would do
// nothing but make a wait that finds nothing and hand over the batch
// (Lookahead): the engine tells it the earliest deadline it holds, where
// its inbox says a completion is waiting and how to look at the reactor
// (Peek), which the host does where the engine would have waited, and counts
// each such batch as an iteration, whose wait was made by the host or
// skipped.
package core
