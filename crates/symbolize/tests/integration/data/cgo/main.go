// Go calling C calling back into Go: main -> c_entry -> c_middle ->
// goCallback. goCallback prints the Go frames as the runtime symbolizes
// them; c_middle records its return address (into c_entry).
package main

/*
#include <stdint.h>
void c_entry(int n);
uintptr_t c_return_address(void);
uintptr_t c_executable_start(void);
*/
import "C"

import (
	"fmt"
	"runtime"
)

//export goCallback
func goCallback(n C.int) {
	pcs := make([]uintptr, 64)
	k := runtime.Callers(1, pcs)
	frames := runtime.CallersFrames(pcs[:k])
	for {
		f, more := frames.Next()
		fmt.Printf("frame cgo %x %s %s %d\n", f.PC, f.Function, f.File, f.Line)
		if !more {
			break
		}
	}
}

func main() {
	C.c_entry(1) // MAIN_CALLS_C
	fmt.Printf("base %x\n", uint64(C.c_executable_start()))
	fmt.Printf("ra %x\n", uint64(C.c_return_address()))
}
