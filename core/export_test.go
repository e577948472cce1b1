// Hooks that only the tests of package core see.
package core

// SetYield replaces what a busy Run calls to hand its goroutine back to
// the scheduler.
func (e *Engine) SetYield(f func()) { e.yield = f }

// YieldEvery is how long a busy Run goes between yields, in seconds, and
// YieldCheckEvery how many iterations pass between looks at the clock.
const (
	YieldEvery      = yieldEvery
	YieldCheckEvery = yieldCheckEvery
)

// SkipPeeks makes the next n waits that may block go without a look first
// (Engine.poll), for tests of the blocking wait itself.
func (e *Engine) SkipPeeks(n int) { e.peekSkips = n }
