// A cgo workload for tests/go_unwinding.rs (built with -ldflags=-w: no
// DWARF, the symbol table kept to name the C frames). Go calls C, which
// calls back into Go, on two threads:
//
//   - the main goroutine: main.main -> callC -> C c_outer -> c_inner ->
//     (exported) goCallback -> cbLeaf
//   - a thread created in C: c_thread_main -> c_thread_work ->
//     (exported) goThreadCallback -> threadLeaf
package main

/*
#include "callback.h"
*/
import "C"

var sink int

//go:noinline
func cbLeaf(n int) int {
	s := 0
	for i := 0; i < n; i++ {
		s += i * i
	}
	return s
}

//go:noinline
func threadLeaf(n int) int {
	s := 0
	for i := 0; i < n; i++ {
		s += i ^ (s >> 3)
	}
	return s
}

//export goCallback
//go:noinline
func goCallback(n C.long) C.long { return C.long(cbLeaf(int(n)) + 1) }

//export goThreadCallback
//go:noinline
func goThreadCallback(n C.long) C.long { return C.long(threadLeaf(int(n)) + 1) }

//go:noinline
func callC() int { return int(C.c_outer(1 << 16)) }

func main() {
	C.start_c_thread()
	for {
		sink += callC()
	}
}
