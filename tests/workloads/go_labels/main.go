// A Go workload for tests/go_labels.rs: two goroutines burn CPU in known
// chains, each under its own pprof labels (runtime/pprof.Do), and a third
// burns CPU without labels:
//
//   - labelledWorker -> pprof.Do(request=r1, tenant=blue) -> requestLeaf
//   - otherWorker    -> pprof.Do(request=r2)  -> otherLeaf
//   - main.main      -> plainLeaf (no labels)
//
// GOMAXPROCS is left alone; each goroutine locks itself to an OS thread
// so that the three run on three threads.
package main

import (
	"context"
	"os"
	"runtime"
	"runtime/pprof"
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

func main() {
	seconds := 30
	if len(os.Args) > 1 {
		if d, err := time.ParseDuration(os.Args[1]); err == nil {
			seconds = int(d.Seconds())
		}
	}
	go labelledWorker()
	go otherWorker()
	deadline := time.Now().Add(time.Duration(seconds) * time.Second)
	for time.Now().Before(deadline) {
		sink += plainLeaf(1 << 20)
	}
}
