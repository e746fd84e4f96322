//go:build !linux || !cgo

package profilingreceiver // import "ebpf-profiler/go-receiver"

import (
	"errors"
	"runtime"
)

// startNativeAgent refuses: the profiler is a Linux eBPF library linked
// through cgo.
func startNativeAgent(string) (agent, error) {
	if runtime.GOOS != "linux" {
		return nil, errors.New("the eBPF profiler runs on Linux only (this build is for " + runtime.GOOS + ")")
	}
	return nil, errors.New("the eBPF profiler library is not linked: build with CGO_ENABLED=1 " +
		"(OCB: dist.cgo_enabled: true) after `make otelcol-ebpf-profiler` built libebpf_profiler.a")
}
