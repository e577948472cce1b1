// The drive loops against a local HTTP server: how many answers each
// counts, in the measured window and in all.

package main

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"
	"time"
)

func helloServer(t *testing.T) (*url.URL, *atomic.Int64) {
	t.Helper()
	var served atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		served.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"message":"Hello, World!"}`))
	}))
	t.Cleanup(srv.Close)
	u, err := url.Parse(srv.URL + "/json")
	if err != nil {
		t.Fatal(err)
	}
	return u, &served
}

func TestCountedAnswersEveryRequest(t *testing.T) {
	u, served := helloServer(t)
	opts := options{target: u, conns: 4, requests: 101, check: mustCheck(t, "json")}
	res, err := run(opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests != 101 || res.Answered != 101 || served.Load() != 101 {
		t.Errorf("requests %d, answered %d, served %d; want 101 each", res.Requests, res.Answered, served.Load())
	}
}

func TestClosedLoopAnsweredIncludesTheWarmUp(t *testing.T) {
	u, served := helloServer(t)
	opts := options{target: u, conns: 2, duration: 100 * time.Millisecond, warmup: 100 * time.Millisecond, check: mustCheck(t, "json")}
	res, err := run(opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests == 0 || res.Answered <= res.Requests {
		t.Errorf("requests %d, answered %d: the warm-up's answers are missing", res.Requests, res.Answered)
	}
	if res.Answered != served.Load() {
		t.Errorf("answered %d, the server served %d", res.Answered, served.Load())
	}
}
