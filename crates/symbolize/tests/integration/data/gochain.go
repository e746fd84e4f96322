// A known chain in main, main -> middle -> [inlined] -> leaf, and one in
// a goroutine through the standard library (sort.Slice calling back into
// a closure). Each prints its stack as the Go runtime symbolizes it, one
// "frame TAG PC FUNCTION FILE LINE" line per logical frame, innermost
// first; the test compares its own symbolization of the stripped binary
// with it.
package main

import (
	"fmt"
	"runtime"
	"sort"
)

//go:noinline
func report(tag string) {
	pcs := make([]uintptr, 64)
	n := runtime.Callers(2, pcs)
	frames := runtime.CallersFrames(pcs[:n])
	for {
		f, more := frames.Next()
		fmt.Printf("frame %s %x %s %s %d\n", tag, f.PC, f.Function, f.File, f.Line)
		if !more {
			break
		}
	}
}

//go:noinline
func leaf(n int) int {
	report("main") // LEAF_CALLS_REPORT
	return n + 1
}

func inlined(n int) int {
	return leaf(n) * 2 // INLINED_CALLS_LEAF
}

//go:noinline
func middle(n int) int {
	return inlined(n) + 1 // MIDDLE_CALLS_INLINED
}

func sortWithCallback(done chan<- bool) {
	xs := []int{5, 2, 8, 1, 9, 3}
	reported := false
	sort.Slice(xs, func(i, j int) bool {
		if !reported {
			reported = true
			report("goroutine") // LESS_CALLS_REPORT
		}
		return xs[i] < xs[j]
	})
	done <- true
}

func main() {
	fmt.Println(middle(3)) // MAIN_CALLS_MIDDLE
	done := make(chan bool)
	go sortWithCallback(done)
	<-done
}
