// Compile-time checks that the memory the engine hands to C (bridge.h) has
// the layout C expects: capi/engine.go casts []core.Event to zl_event*,
// zl_newtimer* to []core.NewTimer, zl_completion* to []core.Completion and
// uint64_t* to []core.TimerSlot without copying. bridge.h pins the C side
// with _Static_assert (the C compile fails); the constants below fail this
// package's Go compile (go build, go vet) when core's structures differ
// from the C ones.
//
// Each constant is (c - g) + (g - c) for a C and a Go size, offset or
// alignment, all of type uintptr: 0 when they are equal, and the compile
// error "constant ... overflows uintptr" when they differ.

package main

/*
#include "bridge.h"
*/
import "C"

import (
	"unsafe"

	"github.com/zloopgo/zloopgo/core"
)

// zl_event and core.Event (whose padding after Mask is a blank field).
const (
	_ = (unsafe.Sizeof(C.zl_event{}) - unsafe.Sizeof(core.Event{})) + (unsafe.Sizeof(core.Event{}) - unsafe.Sizeof(C.zl_event{}))
	_ = (unsafe.Alignof(C.zl_event{}) - unsafe.Alignof(core.Event{})) + (unsafe.Alignof(core.Event{}) - unsafe.Alignof(C.zl_event{}))
	_ = (unsafe.Offsetof(C.zl_event{}.token) - unsafe.Offsetof(core.Event{}.Token)) + (unsafe.Offsetof(core.Event{}.Token) - unsafe.Offsetof(C.zl_event{}.token))
	_ = (unsafe.Sizeof(C.zl_event{}.token) - unsafe.Sizeof(core.Event{}.Token)) + (unsafe.Sizeof(core.Event{}.Token) - unsafe.Sizeof(C.zl_event{}.token))
	_ = (unsafe.Offsetof(C.zl_event{}.mask) - unsafe.Offsetof(core.Event{}.Mask)) + (unsafe.Offsetof(core.Event{}.Mask) - unsafe.Offsetof(C.zl_event{}.mask))
	_ = (unsafe.Sizeof(C.zl_event{}.mask) - unsafe.Sizeof(core.Event{}.Mask)) + (unsafe.Sizeof(core.Event{}.Mask) - unsafe.Sizeof(C.zl_event{}.mask))
)

// zl_newtimer and core.NewTimer.
const (
	_ = (unsafe.Sizeof(C.zl_newtimer{}) - unsafe.Sizeof(core.NewTimer{})) + (unsafe.Sizeof(core.NewTimer{}) - unsafe.Sizeof(C.zl_newtimer{}))
	_ = (unsafe.Alignof(C.zl_newtimer{}) - unsafe.Alignof(core.NewTimer{})) + (unsafe.Alignof(core.NewTimer{}) - unsafe.Alignof(C.zl_newtimer{}))
	_ = (unsafe.Offsetof(C.zl_newtimer{}.when) - unsafe.Offsetof(core.NewTimer{}.When)) + (unsafe.Offsetof(core.NewTimer{}.When) - unsafe.Offsetof(C.zl_newtimer{}.when))
	_ = (unsafe.Sizeof(C.zl_newtimer{}.when) - unsafe.Sizeof(core.NewTimer{}.When)) + (unsafe.Sizeof(core.NewTimer{}.When) - unsafe.Sizeof(C.zl_newtimer{}.when))
	_ = (unsafe.Offsetof(C.zl_newtimer{}.token) - unsafe.Offsetof(core.NewTimer{}.Slot)) + (unsafe.Offsetof(core.NewTimer{}.Slot) - unsafe.Offsetof(C.zl_newtimer{}.token))
	_ = (unsafe.Sizeof(C.zl_newtimer{}.token) - unsafe.Sizeof(core.NewTimer{}.Slot)) + (unsafe.Sizeof(core.NewTimer{}.Slot) - unsafe.Sizeof(C.zl_newtimer{}.token))
)

// zl_completion and core.Completion.
const (
	_ = (unsafe.Sizeof(C.zl_completion{}) - unsafe.Sizeof(core.Completion{})) + (unsafe.Sizeof(core.Completion{}) - unsafe.Sizeof(C.zl_completion{}))
	_ = (unsafe.Alignof(C.zl_completion{}) - unsafe.Alignof(core.Completion{})) + (unsafe.Alignof(core.Completion{}) - unsafe.Alignof(C.zl_completion{}))
	_ = (unsafe.Offsetof(C.zl_completion{}.token) - unsafe.Offsetof(core.Completion{}.Request)) + (unsafe.Offsetof(core.Completion{}.Request) - unsafe.Offsetof(C.zl_completion{}.token))
	_ = (unsafe.Sizeof(C.zl_completion{}.token) - unsafe.Sizeof(core.Completion{}.Request)) + (unsafe.Sizeof(core.Completion{}.Request) - unsafe.Sizeof(C.zl_completion{}.token))
	_ = (unsafe.Offsetof(C.zl_completion{}.value) - unsafe.Offsetof(core.Completion{}.Value)) + (unsafe.Offsetof(core.Completion{}.Value) - unsafe.Offsetof(C.zl_completion{}.value))
	_ = (unsafe.Sizeof(C.zl_completion{}.value) - unsafe.Sizeof(core.Completion{}.Value)) + (unsafe.Sizeof(core.Completion{}.Value) - unsafe.Sizeof(C.zl_completion{}.value))
	_ = (unsafe.Offsetof(C.zl_completion{}.status) - unsafe.Offsetof(core.Completion{}.Status)) + (unsafe.Offsetof(core.Completion{}.Status) - unsafe.Offsetof(C.zl_completion{}.status))
	_ = (unsafe.Sizeof(C.zl_completion{}.status) - unsafe.Sizeof(core.Completion{}.Status)) + (unsafe.Sizeof(core.Completion{}.Status) - unsafe.Sizeof(C.zl_completion{}.status))
)

// zl_shared.timers_out (uint64_t *) and core.TimerSlot.
const _ = (unsafe.Sizeof(C.uint64_t(0)) - unsafe.Sizeof(core.TimerSlot(0))) + (unsafe.Sizeof(core.TimerSlot(0)) - unsafe.Sizeof(C.uint64_t(0)))
