//go:build !race

// Without the race detector the inbox's hand-over annotations are no-ops
// (see inbox_race.go).
package core

import "unsafe"

func raceHandOver(unsafe.Pointer) {}
func raceTakeOver(unsafe.Pointer) {}
