// The C layouts of the structures the engine and the adapter share
// (bridge.h), read through cgo so that layout_test.go can compare them with
// core.Event and core.NewTimer (a _test.go file cannot use cgo). Nothing
// calls this at run time.
package main

/*
#include "bridge.h"
*/
import "C"

import "unsafe"

// cField is one C field's offset and size.
type cField struct{ Offset, Size uintptr }

// cStruct is one C structure's size, alignment and fields by name.
type cStruct struct {
	Size, Align uintptr
	Fields      map[string]cField
}

// bridgeLayouts describes zl_event, zl_newtimer and zl_completion as the C
// compiler lays them out.
func bridgeLayouts() map[string]cStruct {
	var ev C.zl_event
	var nt C.zl_newtimer
	var co C.zl_completion
	return map[string]cStruct{
		"zl_event": {
			Size:  C.sizeof_zl_event,
			Align: unsafe.Alignof(ev),
			Fields: map[string]cField{
				"token": {unsafe.Offsetof(ev.token), unsafe.Sizeof(ev.token)},
				"mask":  {unsafe.Offsetof(ev.mask), unsafe.Sizeof(ev.mask)},
				"pad":   {unsafe.Offsetof(ev.pad), unsafe.Sizeof(ev.pad)},
			},
		},
		"zl_newtimer": {
			Size:  C.sizeof_zl_newtimer,
			Align: unsafe.Alignof(nt),
			Fields: map[string]cField{
				"when":  {unsafe.Offsetof(nt.when), unsafe.Sizeof(nt.when)},
				"token": {unsafe.Offsetof(nt.token), unsafe.Sizeof(nt.token)},
			},
		},
		"zl_completion": {
			Size:  C.sizeof_zl_completion,
			Align: unsafe.Alignof(co),
			Fields: map[string]cField{
				"token":  {unsafe.Offsetof(co.token), unsafe.Sizeof(co.token)},
				"value":  {unsafe.Offsetof(co.value), unsafe.Sizeof(co.value)},
				"status": {unsafe.Offsetof(co.status), unsafe.Sizeof(co.status)},
			},
		},
	}
}
