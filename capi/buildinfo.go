// What zloopgo.build_info() reports: the Go toolchain, the reactor and the
// processor (through cpuid), for bug reports and benchmark provenance.

package main

/*
#include <stdlib.h>
*/
import "C"

import (
	"encoding/json"
	"runtime"

	"github.com/klauspost/cpuid/v2"
	"github.com/zloopgo/zloopgo/core"
)

func buildInfo() map[string]any {
	cpu := cpuid.CPU
	return map[string]any{
		"go_version":     runtime.Version(),
		"goos":           runtime.GOOS,
		"goarch":         runtime.GOARCH,
		"reactor":        core.ReactorName,
		"gomaxprocs":     runtime.GOMAXPROCS(0),
		"cpu_brand":      cpu.BrandName,
		"cpu_vendor":     cpu.VendorString,
		"cpu_features":   cpu.FeatureSet(),
		"physical_cores": cpu.PhysicalCores,
		"logical_cores":  cpu.LogicalCores,
		"cache_l1d":      cpu.Cache.L1D,
		"cache_l2":       cpu.Cache.L2,
		"cache_l3":       cpu.Cache.L3,
	}
}

// zlgo_build_info returns build_info() as JSON in memory the caller frees.
//
//export zlgo_build_info
func zlgo_build_info() *C.char {
	b, err := json.Marshal(buildInfo())
	if err != nil {
		b = []byte(`{}`)
	}
	return C.CString(string(b))
}
