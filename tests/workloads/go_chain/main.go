// A Go workload for tests/go_unwinding.rs, which builds it stripped
// (-ldflags='-s -w') in a temporary directory. Three goroutines burn
// CPU, each at a known leaf:
//
//   - the main goroutine: main.main -> chain1 -> chain2 -> chain3 -> chainLeaf
//   - a goroutine sorting through the standard library:
//     sortWorker -> sort.Slice -> ... -> sortWorker.func1 -> lessLeaf
//   - a goroutine that makes garbage, so that the GC's background mark
//     workers run on the system stack (runtime.systemstack).
package main

import (
	"os"
	"sort"
)

var sink int

//go:noinline
func chainLeaf(n int) int {
	s := 0
	for i := 0; i < n; i++ {
		s += i * i
	}
	return s
}

//go:noinline
func chain3(n int) int { return chainLeaf(n) + 3 }

//go:noinline
func chain2(n int) int { return chain3(n) + 2 }

//go:noinline
func chain1(n int) int { return chain2(n) + 1 }

//go:noinline
func lessLeaf(a, b int) bool {
	s := 0
	for i := 0; i < 300; i++ {
		s += i ^ a
	}
	sink += s & 1
	return a < b
}

func sortWorker() {
	xs := make([]int, 2000)
	for {
		for i := range xs {
			xs[i] = (i * 7919) % len(xs)
		}
		sort.Slice(xs, func(i, j int) bool { return lessLeaf(xs[i], xs[j]) })
	}
}

type node struct {
	next  *node
	value [6]int
}

// garbage keeps a live list of about 8 MB and replaces it forever.
func garbage() {
	var live []*node
	for {
		var head *node
		for i := 0; i < 1<<17; i++ {
			head = &node{next: head}
		}
		live = append(live, head)
		if len(live) > 2 {
			live = live[1:]
		}
	}
}

func main() {
	go sortWorker()
	if len(os.Args) > 1 && os.Args[1] == "gc" {
		go garbage()
	}
	for {
		sink += chain1(1 << 16)
	}
}
