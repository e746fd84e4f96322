// A Go workload for tests/go_labels.rs: two goroutines burn CPU in known
// chains, each under its own pprof labels (runtime/pprof.Do), and a third
// burns CPU without labels:
//
//   - labelledWorker -> pprof.Do(request=r1, tenant=blue) -> requestLeaf
//   - otherWorker    -> pprof.Do(request=r2)  -> otherLeaf
//   - manyWorker     -> pprof.Do(k00=v00 ... k11=v11, k05's value 70
//     bytes long) -> manyLeaf: more labels than the profiler keeps (10),
//     and a value longer than it keeps (63 bytes)
//   - main.main      -> plainLeaf (no labels)
//
// GOMAXPROCS is left alone; each goroutine locks itself to an OS thread
// so that the three run on three threads.
package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"time"
)

var sink int

//go:noinline
func requestLeaf(n int) int {
	s := 0
	for i := 0; i < n; i++ {
		s += i * i
	}
	return s
}

//go:noinline
func otherLeaf(n int) int {
	s := 1
	for i := 0; i < n; i++ {
		s ^= i * 3
	}
	return s
}

//go:noinline
func plainLeaf(n int) int {
	s := 2
	for i := 0; i < n; i++ {
		s += i ^ 5
	}
	return s
}

func labelledWorker() {
	runtime.LockOSThread()
	pprof.Do(context.Background(), pprof.Labels("request", "r1", "tenant", "blue"), func(context.Context) {
		for {
			sink += requestLeaf(1 << 20)
		}
	})
}

func otherWorker() {
	runtime.LockOSThread()
	pprof.Do(context.Background(), pprof.Labels("request", "r2"), func(context.Context) {
		for {
			sink += otherLeaf(1 << 20)
		}
	})
}

//go:noinline
func manyLeaf(n int) int {
	s := 3
	for i := 0; i < n; i++ {
		s += i & 7
	}
	return s
}

func manyWorker() {
	runtime.LockOSThread()
	var kv []string
	for i := 0; i < 12; i++ {
		value := fmt.Sprintf("v%02d", i)
		if i == 5 {
			value += strings.Repeat("x", 67)
		}
		kv = append(kv, fmt.Sprintf("k%02d", i), value)
	}
	pprof.Do(context.Background(), pprof.Labels(kv...), func(context.Context) {
		for {
			sink += manyLeaf(1 << 20)
		}
	})
}

func main() {
	seconds := 30
	if len(os.Args) > 1 {
		if d, err := time.ParseDuration(os.Args[1]); err == nil {
			seconds = int(d.Seconds())
		}
	}
	go labelledWorker()
	go otherWorker()
	go manyWorker()
	deadline := time.Now().Add(time.Duration(seconds) * time.Second)
	for time.Now().Before(deadline) {
		sink += plainLeaf(1 << 20)
	}
}
