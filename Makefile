# ebpf-profiler build entry points. `make help` lists them.
SHELL := /bin/bash
CARGO ?= cargo


.PHONY: help deps agent quickstart lint lint-rust test test-rust test-bench bench bench-quick bench-accuracy bench-hostile clean

help:
	@echo "make deps        install the Debian packages the build needs (root)"
	@echo "make agent       build ./ebpf-profiler (release)"
	@echo "make quickstart  deps + agent + profile this machine for 10 s into profile.folded (root)"
	@echo "make lint        rustfmt, clippy (-D warnings), gofmt and go vet; builds nothing but clippy's check"
	@echo "make test        every test, BPF ones included (root)"
	@echo "make bench       overhead, memory, completeness, start-up, side by side with perf -> BENCHMARKS.md (root)"
	@echo "make bench-quick the same, reduced (< 3 min; CI runs it, never failing on a figure)"
	@echo "make bench-accuracy the agent against each runtime's own profiler on real programs -> BENCHMARKS.md (root)"
	@echo "make bench-hostile the release agent at 99 Hz beside each crafted runtime (issue 43) -> BENCHMARKS.md (root)"
	@echo "make test-runtimes the runtime chain tests on Debian trixie and sid's runtimes, in chroots (root)"
	@echo "make test-kernels the agent in VMs on the kernels of tests/kernels/kernels.txt (root)"
	@echo "make fuzz        the parsers' cargo-fuzz targets (FUZZ_SECONDS, FUZZ_TARGETS); fuzz-smoke: 60 s each"

deps:
	scripts/install-deps.sh

agent:
	$(CARGO) build --release --locked -p ebpf-profiler
	cp target/release/ebpf-profiler ./ebpf-profiler

quickstart: deps agent
	./ebpf-profiler --duration 10s --format folded --output profile.folded
	@echo "wrote profile.folded (one line per stack; feed it to flamegraph.pl or speedscope)"

# Format, lints and vet: what CI enforces before running any test. The Go
# half (lint-go) comes from mk/collector.mk.
lint: lint-rust lint-go

# The fuzz targets are their own workspace (built with nightly by
# fuzz-build): checked here on stable, so that an interface they call
# cannot change under them unseen.
lint-rust:
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets --locked -- -D warnings
	$(CARGO) check --manifest-path fuzz/Cargo.toml --locked --bins --target-dir target

# The Go receiver's tests (test-go) come from mk/collector.mk.
test: test-rust test-go test-bench

# All Rust tests; the ones in tests/ load the real eBPF programs (root).
test-rust:
	$(CARGO) test --locked --workspace --no-fail-fast

# The bench scripts' own tests (made-up results, no profiler runs).
test-bench:
	PYTHONDONTWRITEBYTECODE=1 python3 -m unittest discover -s bench -p 'test_*.py'

# Measures and writes BENCHMARKS.md; never asserts a figure.
bench: deps agent
	PYTHONDONTWRITEBYTECODE=1 python3 bench/bench.py

bench-quick: deps agent
	PYTHONDONTWRITEBYTECODE=1 python3 bench/bench.py --quick --output bench-quick.md

# Real programs (PyPI, Debian) profiled at once by the agent and by their
# runtime's own profiler (py-spy, perf); compares stacks and functions,
# never fails on a figure. BENCH_ACCURACY_FLAGS=--quick: CI's short run.
bench-accuracy: agent
	PYTHONDONTWRITEBYTECODE=1 python3 bench/accuracy.py $(BENCH_ACCURACY_FLAGS)

# The crafted runtimes of tests/hostile_runtimes.rs, each beside genuine
# workloads, with the release agent run as users run it; measures, never
# fails on a figure. On a shared machine: flock /tmp/measure.lock make bench-hostile.
bench-hostile: agent
	PYTHONDONTWRITEBYTECODE=1 python3 bench/hostile.py

clean:
	$(CARGO) clean
	rm -f ebpf-profiler profile.folded

-include mk/*.mk
