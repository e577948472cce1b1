// Command appload is the load generator of the application rows
// (scripts/benchmark/apps): HTTP/1.1 keep-alive requests, or WebSocket
// echoes, over -conns connections to one server, every answer checked
// (status and body, see check.go) before its time counts.
//
// Two ways to drive the server (drive.go):
//
//   - closed loop (-rate 0): each connection sends its next request as soon
//     as the previous answer has arrived; the result is the server's
//     maximum rate at that concurrency;
//   - open loop (-rate R): requests go out on a fixed schedule of R per
//     second in total, whether or not earlier ones were answered; a request
//     that had to wait for its connection's earlier answer is timed from
//     when it was due, not from when it could go out, so that a stalled
//     server shows in the tail instead of slowing the client down
//     (coordinated omission).
//
// Latencies go into an HDR histogram (github.com/HdrHistogram/hdrhistogram-go,
// 1 µs to 60 s, 3 significant digits). At the end it prints one line
//
//	APPLOAD {"requests":N,"seconds":T,"rate":R,"p50_us":...,"p999_us":...}
//
// and exits 0; on the first wrong answer or error it prints
// "APPLOAD-ERROR reason" and exits 1, so a failure is a result, never a
// faster figure. It knows nothing of loops or of which server it drives.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"net/url"
	"os"
	"time"
)

type options struct {
	target   *url.URL
	conns    int
	duration time.Duration
	warmup   time.Duration
	rate     float64
	requests int64 // > 0: exactly this many, closed loop, then stop (no duration, no warm-up)
	check    checker
}

func main() {
	raw := flag.String("url", "", "http://HOST:PORT/PATH or ws://HOST:PORT/PATH")
	conns := flag.Int("conns", 32, "connections, one request in flight on each")
	duration := flag.Duration("duration", time.Second, "measured time")
	warmup := flag.Duration("warmup", 250*time.Millisecond, "time driven the same way before measuring, not recorded")
	rate := flag.Float64("rate", 0, "requests per second in total (open loop); 0: closed loop")
	check := flag.String("check", "", "what every answer must be: "+checkKinds)
	requests := flag.Int64("requests", 0, "exactly this many requests in all, closed loop (for instruction counts)")
	flag.Parse()
	opts, err := parseOptions(*raw, *conns, *duration, *warmup, *rate, *check)
	if *requests > 0 {
		opts.requests, opts.warmup, opts.rate = *requests, 0, 0
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "appload:", err)
		os.Exit(2)
	}
	res, err := run(opts)
	if err != nil {
		fmt.Println("APPLOAD-ERROR", err)
		os.Exit(1)
	}
	line, _ := json.Marshal(res)
	fmt.Printf("APPLOAD %s\n", line)
}

func parseOptions(raw string, conns int, duration, warmup time.Duration, rate float64, check string) (options, error) {
	target, err := url.Parse(raw)
	if err != nil || target.Host == "" || (target.Scheme != "http" && target.Scheme != "ws") {
		return options{}, fmt.Errorf("-url %q: want http://HOST:PORT/PATH or ws://HOST:PORT/PATH", raw)
	}
	if conns < 1 || duration <= 0 || warmup < 0 || rate < 0 {
		return options{}, fmt.Errorf("-conns, -duration, -warmup and -rate must be positive")
	}
	chk, err := parseCheck(check)
	if err != nil {
		return options{}, err
	}
	if (target.Scheme == "ws") != chk.echo {
		return options{}, fmt.Errorf("-check %s does not fit a %s URL", check, target.Scheme)
	}
	return options{target: target, conns: conns, duration: duration, warmup: warmup, rate: rate, check: chk}, nil
}
