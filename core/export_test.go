// Hooks that only the tests of package core see.

package core

import "time"

// SetYield replaces what a busy Run calls to hand its goroutine back to
// the scheduler.
func (e *Engine) SetYield(f func()) { e.yield = f }

// YieldEvery is how long a busy Run goes between yields, and AloneMax the
// most batches a Dispatch may run alone.
const (
	YieldEvery = time.Duration(yieldEvery)
	AloneMax   = aloneMax
)

// SkipPeeks makes the next n waits that may block go without a look first
// (Engine.poll), for tests of the blocking wait itself.
func (e *Engine) SkipPeeks(n int) { e.peekSkips = n }
