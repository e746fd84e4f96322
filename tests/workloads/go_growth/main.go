// A Go workload for tests/go_unwinding.rs (built stripped, run with
// GOMAXPROCS=2):
//
//   - the main goroutine starts goroutine after goroutine, each of which
//     recurses 100 deep with an 8 KB frame: its stack grows from its
//     first size to 1 MB by doublings, each a call to runtime.morestack,
//     which switches to the system stack and copies the stack there
//     (runtime.newstack, runtime.copystack, runtime.memmove);
//   - three goroutines spin in loops without calls, more than the two Ps
//     with the growers: the runtime preempts them asynchronously
//     (runtime.asyncPreempt, injected by a signal at the loop's pc);
//   - a goroutine runs garbage collections back to back: each stops the
//     world twice, preempting the spinning goroutines each time;
//   - two goroutines hand a value back and forth over unbuffered
//     channels: each blocks at every exchange, so the scheduler runs
//     (runtime.mcall -> runtime.park_m -> runtime.schedule, on the
//     system stack).
package main

import "runtime"

var sink int

//go:noinline
func deep(n int) int {
	var pad [8192]byte
	pad[n%8192] = byte(n)
	if n == 0 {
		return int(pad[0])
	}
	return deep(n-1) + int(pad[(n*7)%8192])
}

//go:noinline
func grower(done chan int) {
	done <- deep(100)
}

//go:noinline
func spinLeaf() int {
	s := 1
	// No call in the loop: only an asynchronous preemption stops it.
	for i := 0; i < 1<<40; i++ {
		s = s*31 + i ^ (s >> 7)
	}
	return s
}

func spin() {
	sink += spinLeaf()
}

//go:noinline
func pingPong(in <-chan int, out chan<- int) {
	for v := range in {
		out <- v + 1
	}
}

// startPingPong starts the pair (their go statements here, not in main,
// keep main's wrapper of grower named main.main.gowrap1).
func startPingPong() {
	ping, pong := make(chan int), make(chan int)
	go pingPong(ping, pong)
	go pingPong(pong, ping)
	ping <- 0
}

func main() {
	for i := 0; i < 3; i++ {
		go spin()
	}
	startPingPong()
	go func() {
		for {
			runtime.GC()
		}
	}()
	done := make(chan int)
	for {
		go grower(done)
		sink += <-done
	}
}
