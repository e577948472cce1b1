package main

import "testing"

func TestRaiseLoneP(t *testing.T) {
	cases := []struct {
		name     string
		env      map[string]string
		goChose  int
		wantProc int
	}{
		{"one CPU, nothing set", nil, 1, 2},
		{"two CPUs", nil, 2, 2},
		{"many CPUs", nil, 16, 16},
		{"the program chose one", map[string]string{"GOMAXPROCS": "1"}, 1, 1},
		{"the program chose three", map[string]string{"GOMAXPROCS": "3"}, 3, 3},
		{"empty, which Go ignores", map[string]string{"GOMAXPROCS": ""}, 1, 2},
		{"zero, which Go ignores", map[string]string{"GOMAXPROCS": "0"}, 1, 2},
		{"not a number, which Go ignores", map[string]string{"GOMAXPROCS": "two"}, 1, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			procs := c.goChose
			getenv := func(k string) string { return c.env[k] }
			set := func(n int) int {
				prev := procs
				if n > 0 {
					procs = n
				}
				return prev
			}
			raiseLoneP(getenv, set)
			if procs != c.wantProc {
				t.Fatalf("GOMAXPROCS = %d, want %d", procs, c.wantProc)
			}
		})
	}
}
