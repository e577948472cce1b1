// Checks that the memory the engine hands to C (bridge.h) has the layout C
// expects: capi/engine.go casts []core.Event to zl_event* and zl_newtimer*
// to []core.NewTimer without copying.
//
// The test binary links the adapter's C files, which call CPython; see
// scripts/test for the environment `go test ./capi` needs.
package main

import (
	"testing"
	"unsafe"

	"github.com/zloopgo/zloopgo/core"
)

func TestBridgeLayoutsMatchCore(t *testing.T) {
	var ev core.Event
	var nt core.NewTimer
	var co core.Completion
	goLayouts := map[string]cStruct{
		"zl_event": {
			Size:  unsafe.Sizeof(ev),
			Align: unsafe.Alignof(ev),
			Fields: map[string]cField{
				"token": {unsafe.Offsetof(ev.Token), unsafe.Sizeof(ev.Token)},
				"mask":  {unsafe.Offsetof(ev.Mask), unsafe.Sizeof(ev.Mask)},
				// The blank padding field sits after Mask.
				"pad": {unsafe.Offsetof(ev.Mask) + unsafe.Sizeof(ev.Mask), unsafe.Sizeof(ev) - unsafe.Offsetof(ev.Mask) - unsafe.Sizeof(ev.Mask)},
			},
		},
		"zl_newtimer": {
			Size:  unsafe.Sizeof(nt),
			Align: unsafe.Alignof(nt),
			Fields: map[string]cField{
				"when":  {unsafe.Offsetof(nt.When), unsafe.Sizeof(nt.When)},
				"token": {unsafe.Offsetof(nt.Token), unsafe.Sizeof(nt.Token)},
			},
		},
		"zl_completion": {
			Size:  unsafe.Sizeof(co),
			Align: unsafe.Alignof(co),
			Fields: map[string]cField{
				"token":  {unsafe.Offsetof(co.Token), unsafe.Sizeof(co.Token)},
				"value":  {unsafe.Offsetof(co.Value), unsafe.Sizeof(co.Value)},
				"status": {unsafe.Offsetof(co.Status), unsafe.Sizeof(co.Status)},
			},
		},
	}
	cLayouts := bridgeLayouts()
	if len(cLayouts) != len(goLayouts) {
		t.Fatalf("C describes %d structures, Go %d", len(cLayouts), len(goLayouts))
	}
	for name, g := range goLayouts {
		c := cLayouts[name]
		if c.Size != g.Size || c.Align != g.Align {
			t.Errorf("%s: C size %d align %d, Go size %d align %d", name, c.Size, c.Align, g.Size, g.Align)
		}
		if len(c.Fields) != len(g.Fields) {
			t.Errorf("%s: C has %d fields, Go %d", name, len(c.Fields), len(g.Fields))
		}
		for field, gf := range g.Fields {
			if cf, ok := c.Fields[field]; !ok || cf != gf {
				t.Errorf("%s.%s: C offset/size %+v (present %v), Go %+v", name, field, cf, ok, gf)
			}
		}
	}
}
