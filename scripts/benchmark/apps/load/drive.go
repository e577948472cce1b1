// How the connections are driven and timed: a goroutine per connection,
// closed loop (the next request when the last answer arrived) or open loop
// (requests due on a fixed schedule, each latency counted from when it was
// due), a warm-up that is not recorded, then the measured window; the
// latencies merged into one HDR histogram. It knows round trips as a
// function that returns a body or an error, not HTTP or WebSocket.

package main

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

type result struct {
	Mode       string  `json:"mode"`
	Conns      int     `json:"conns"`
	TargetRate float64 `json:"target_rate,omitempty"`
	Requests   int64   `json:"requests"`
	Answered   int64   `json:"answered"` // every checked answer, the warm-up's too: what the server did while this ran
	Seconds    float64 `json:"seconds"`
	Rate       float64 `json:"rate"`
	Late       int64   `json:"late"` // open loop: sent over 1 ms after due (their connection still waited for an earlier answer)
	P50us      float64 `json:"p50_us"`
	P90us      float64 `json:"p90_us"`
	P99us      float64 `json:"p99_us"`
	P999us     float64 `json:"p999_us"`
	MaxUs      float64 `json:"max_us"`
}

type roundTripper interface {
	roundTrip() ([]byte, error)
	Close() error
}

// lateness is how much later than due an open-loop request may go out
// before it counts as late (a sign that the client, not the server, fell
// behind).
const lateness = time.Millisecond

func newHistogram() *hdrhistogram.Histogram {
	return hdrhistogram.New(1, 60_000_000, 3) // µs
}

type worker struct {
	rt       roundTripper
	check    func([]byte) error
	hist     *hdrhistogram.Histogram
	requests int64
	answered int64
	late     int64
	err      error
}

func dial(opts options, id int) (roundTripper, error) {
	if opts.check.echo {
		return dialWS(opts.target, id, opts.check.n)
	}
	return dialHTTP(opts.target)
}

func run(opts options) (result, error) {
	workers := make([]*worker, opts.conns)
	for i := range workers {
		rt, err := dial(opts, i)
		if err != nil {
			return result{}, fmt.Errorf("connection %d: %w", i, err)
		}
		defer rt.Close()
		workers[i] = &worker{rt: rt, check: opts.check.check, hist: newHistogram()}
	}
	start := time.Now()
	measureFrom := start.Add(opts.warmup)
	end := measureFrom.Add(opts.duration)
	remaining := atomic.Int64{}
	remaining.Store(opts.requests)
	var wg sync.WaitGroup
	for i, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if opts.rate > 0 {
				// connection i's share of the schedule, staggered so that the
				// connections do not send in bursts
				every := time.Duration(float64(time.Second) * float64(opts.conns) / opts.rate)
				first := start.Add(every * time.Duration(i) / time.Duration(opts.conns))
				w.err = w.openLoop(first, every, measureFrom, end)
			} else if opts.requests > 0 {
				w.err = w.counted(&remaining)
			} else {
				w.err = w.closedLoop(measureFrom, end)
			}
		}()
	}
	wg.Wait()
	res := result{Mode: "closed", Conns: opts.conns, Seconds: opts.duration.Seconds()}
	if opts.requests > 0 {
		res.Mode, res.Seconds = "counted", time.Since(start).Seconds()
	}
	if opts.rate > 0 {
		res.Mode, res.TargetRate = "open", opts.rate
	}
	all := newHistogram()
	for i, w := range workers {
		if w.err != nil {
			return result{}, fmt.Errorf("connection %d: %w", i, w.err)
		}
		all.Merge(w.hist)
		res.Requests += w.requests
		res.Answered += w.answered
		res.Late += w.late
	}
	res.Rate = float64(res.Requests) / res.Seconds
	res.P50us = float64(all.ValueAtQuantile(50))
	res.P90us = float64(all.ValueAtQuantile(90))
	res.P99us = float64(all.ValueAtQuantile(99))
	res.P999us = float64(all.ValueAtQuantile(99.9))
	res.MaxUs = float64(all.Max())
	return res, nil
}

// one makes a round trip and checks its answer; its latency counts from
// `from`, and it is recorded when `slot` (when it was due, or sent in a
// closed loop) falls in the measured window.
func (w *worker) one(from, slot, measureFrom, end time.Time) error {
	body, err := w.rt.roundTrip()
	if err != nil {
		return err
	}
	if w.check != nil {
		if err := w.check(body); err != nil {
			return err
		}
	}
	w.answered++
	if !slot.Before(measureFrom) && slot.Before(end) {
		w.requests++
		us := time.Since(from).Microseconds()
		if err := w.hist.RecordValue(max(us, 1)); err != nil {
			return fmt.Errorf("a latency of %d µs: %w", us, err)
		}
	}
	return nil
}

func (w *worker) closedLoop(measureFrom, end time.Time) error {
	for {
		now := time.Now()
		if !now.Before(end) {
			return nil
		}
		if err := w.one(now, now, measureFrom, end); err != nil {
			return err
		}
	}
}

// openLoop sends on connection w's schedule. A request whose connection
// was still busy with an earlier one when it fell due is timed from when
// it was due: the wait is the server's doing. One whose connection was
// idle is timed from when it went out: a sleep overshoots by up to a
// millisecond (Go's poller waits in whole milliseconds), which is the
// client's doing, not the server's.
func (w *worker) openLoop(due time.Time, every time.Duration, measureFrom, end time.Time) error {
	for ; due.Before(end); due = due.Add(every) {
		from := due
		if wait := time.Until(due); wait > 0 {
			time.Sleep(wait)
			from = time.Now()
		} else if -wait > lateness && !due.Before(measureFrom) {
			w.late++
		}
		if err := w.one(from, due, measureFrom, end); err != nil {
			return err
		}
	}
	return nil
}

// counted makes requests until the shared count of remaining ones runs
// out: an exact number of requests, for counts per request.
func (w *worker) counted(remaining *atomic.Int64) error {
	for remaining.Add(-1) >= 0 {
		now := time.Now()
		if err := w.one(now, now, now, now.Add(time.Hour)); err != nil {
			return err
		}
	}
	return nil
}
