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
		{"set but empty is still the program's", map[string]string{"GOMAXPROCS": ""}, 1, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			procs := c.goChose
			lookup := func(k string) (string, bool) { v, ok := c.env[k]; return v, ok }
			set := func(n int) int {
				prev := procs
				if n > 0 {
					procs = n
				}
				return prev
			}
			raiseLoneP(lookup, set)
			if procs != c.wantProc {
				t.Fatalf("GOMAXPROCS = %d, want %d", procs, c.wantProc)
			}
		})
	}
}
