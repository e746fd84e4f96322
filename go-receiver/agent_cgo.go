//go:build linux && cgo

package profilingreceiver // import "ebpf-profiler/go-receiver"

// libebpf_profiler.a is copied into lib/ by `make otelcol-ebpf-profiler`
// (mk/collector.mk), which also links its hash into staticlibSHA256 so
// that Go's build cache notices a new library. The path must be absolute:
// ${SRCDIR} is this directory.

/*
#cgo CFLAGS: -I${SRCDIR}/../include
#cgo LDFLAGS: ${SRCDIR}/lib/libebpf_profiler.a -lgcc_s -lutil -lrt -lpthread -lm -ldl
#include <stdlib.h>
#include "ebpf_profiler.h"
*/
import "C"

import (
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"time"
	"unsafe"
)

// nativeAgent is a handle of the Rust library.
type nativeAgent struct {
	p *C.ebpf_profiler
}

// lastError reads the library's message for the failed call just made.
// The caller must hold the OS thread (the message is thread-local).
func lastError(status int) error {
	msg := C.ebpf_profiler_last_error()
	if msg == nil {
		return fmt.Errorf("ebpf profiler library error %d", status)
	}
	return errors.New(C.GoString(msg))
}

func startNativeAgent(configJSON string) (agent, error) {
	if v := C.ebpf_profiler_abi_version(); v != C.EBPF_PROFILER_ABI_VERSION {
		return nil, fmt.Errorf("libebpf_profiler.a implements C ABI version %d, the receiver was built for %d",
			uint32(v), uint32(C.EBPF_PROFILER_ABI_VERSION))
	}
	cJSON := C.CString(configJSON)
	defer C.free(unsafe.Pointer(cJSON))

	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var p *C.ebpf_profiler
	if status := C.ebpf_profiler_start(cJSON, &p); status != C.EBPF_PROFILER_OK {
		return nil, lastError(int(status))
	}
	return &nativeAgent{p: p}, nil
}

func (a *nativeAgent) nextBatch(timeout time.Duration) ([]byte, batchStatus, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var b C.ebpf_profiler_batch
	status := C.ebpf_profiler_next_batch(a.p, C.uint32_t(timeout.Milliseconds()), &b)
	switch status {
	case C.EBPF_PROFILER_OK:
		defer C.ebpf_profiler_free_batch(&b)
		// Copied: pdata may keep references into the buffer.
		return C.GoBytes(unsafe.Pointer(b.data), C.int(b.len)), batchReady, nil
	case C.EBPF_PROFILER_TIMEOUT:
		return nil, batchTimeout, nil
	case C.EBPF_PROFILER_STOPPED:
		return nil, batchStopped, nil
	default:
		return nil, batchTimeout, lastError(int(status))
	}
}

func (a *nativeAgent) stats() (string, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	s := C.ebpf_profiler_stats(a.p)
	if s == nil {
		return "", lastError(int(C.EBPF_PROFILER_ERR_INVALID_ARGUMENT))
	}
	defer C.ebpf_profiler_free_string(s)
	return C.GoString(s), nil
}

func (a *nativeAgent) warnings() ([]string, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	s := C.ebpf_profiler_warnings(a.p)
	if s == nil {
		return nil, lastError(int(C.EBPF_PROFILER_ERR_INVALID_ARGUMENT))
	}
	defer C.ebpf_profiler_free_string(s)
	var out []string
	if err := json.Unmarshal([]byte(C.GoString(s)), &out); err != nil {
		return nil, fmt.Errorf("the profiler's warnings: %w", err)
	}
	return out, nil
}

func (a *nativeAgent) stop() error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if status := C.ebpf_profiler_stop(a.p); status != C.EBPF_PROFILER_OK {
		return lastError(int(status))
	}
	return nil
}

func (a *nativeAgent) free() {
	C.ebpf_profiler_free(a.p)
	a.p = nil
}
