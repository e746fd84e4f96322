# otelcol-ebpf-profiler: an OpenTelemetry Collector built with OCB whose
# `profiling` receiver (go-receiver/) links the Rust core
# (ffi/ -> libebpf_profiler.a) over the C ABI of include/ebpf_profiler.h.
# Included by the top-level Makefile. Targets:
#
#   otelcol-ebpf-profiler  build ./otelcol-ebpf-profiler (Rust staticlib, then OCB)
#   lint-go                gofmt and go vet of the receiver, cgo and no-cgo builds
#   test-go                the receiver's Go tests (config, factory, golden payload, cgo)
#   check-header           include/ebpf_profiler.h is what cbindgen makes now; it compiles as C and C++
#   update-header          regenerate include/ebpf_profiler.h
#   test-ffi-c             link the staticlib from C and drive its error paths
#   collector-e2e          collector -> sink collector end to end (root, BPF)

include go-receiver/versions.env

COLLECTOR_CARGO ?= cargo
COLLECTOR_GO ?= go
# Deferred: go may be installed by .ci/collector.sh after make parsed this.
COLLECTOR_OCB = $(shell $(COLLECTOR_GO) env GOPATH)/bin/builder
COLLECTOR_TARGET_DIR = $(or $(CARGO_TARGET_DIR),target)
COLLECTOR_STATICLIB = $(COLLECTOR_TARGET_DIR)/release/libebpf_profiler.a
COLLECTOR_GO_LIB = go-receiver/lib/libebpf_profiler.a
COLLECTOR_LIBS = -lgcc_s -lutil -lrt -lpthread -lm -ldl
COLLECTOR_BUILD_DIR = build/otelcol-ebpf-profiler

.PHONY: otelcol-ebpf-profiler collector-staticlib collector-ocb lint-go test-go check-header update-header test-ffi-c collector-e2e

# The Rust library, copied next to the Go package that links it. Go's build
# cache does not notice a changed .a (nor a changed constant no code uses),
# so the library's hash goes into the link flags (COLLECTOR_LIB_LDFLAGS):
# a new library relinks the collector and the test binaries, and the
# receiver logs which library it runs.
collector-staticlib:
	$(COLLECTOR_CARGO) build --release --locked -p profiler-ffi
	mkdir -p go-receiver/lib
	cp -f $(COLLECTOR_STATICLIB) $(COLLECTOR_GO_LIB)

# Expanded when a recipe runs, after collector-staticlib.
COLLECTOR_LIB_LDFLAGS = -X ebpf-profiler/go-receiver.staticlibSHA256=$(shell sha256sum $(COLLECTOR_GO_LIB) | cut -c1-64)

# OCB at the pinned version, installed with `go install` when missing.
collector-ocb:
	@if ! [ -x "$(COLLECTOR_OCB)" ] || ! "$(COLLECTOR_OCB)" version 2>&1 | grep -q -- "$(COLLECTOR_VERSION)"; then \
	  echo "installing OCB $(COLLECTOR_VERSION)"; \
	  $(COLLECTOR_GO) install go.opentelemetry.io/collector/cmd/builder@$(COLLECTOR_VERSION); \
	fi

otelcol-ebpf-profiler: collector-staticlib collector-ocb
	mkdir -p $(dir $(COLLECTOR_BUILD_DIR))
	"$(COLLECTOR_OCB)" --config builder-config.yaml --ldflags "$(COLLECTOR_LIB_LDFLAGS)"
	cp -f $(COLLECTOR_BUILD_DIR)/otelcol-ebpf-profiler ./otelcol-ebpf-profiler
	@echo "built ./otelcol-ebpf-profiler; run: sudo ./otelcol-ebpf-profiler --feature-gates=service.profilesSupport --config local.example.yaml"

# Vet type-checks the cgo code against include/ebpf_profiler.h without
# linking, so it needs no staticlib (no Rust build): it runs before the tests.
lint-go:
	@command -v $(COLLECTOR_GO) >/dev/null || { echo "lint-go: $(COLLECTOR_GO) is not installed" >&2; exit 1; }
	@unformatted=$$("$$($(COLLECTOR_GO) env GOROOT)/bin/gofmt" -l go-receiver); \
	if [ -n "$$unformatted" ]; then echo "not gofmt-formatted (run gofmt -w):"; echo "$$unformatted"; exit 1; fi
	cd go-receiver && $(COLLECTOR_GO) vet ./...
	cd go-receiver && CGO_ENABLED=0 $(COLLECTOR_GO) vet ./...

# The Go tests with the real library (cgo) and with the no-cgo stub (make
# lint vets both).
test-go: collector-staticlib
	cd go-receiver && $(COLLECTOR_GO) test -race -count=1 -ldflags "$(COLLECTOR_LIB_LDFLAGS)" ./...
	cd go-receiver && CGO_ENABLED=0 $(COLLECTOR_GO) test -count=1 ./...

check-header:
	@tmp=$$(mktemp --suffix=.h); trap 'rm -f "$$tmp"' EXIT; \
	EBPF_PROFILER_HEADER_OUT="$$tmp" $(COLLECTOR_CARGO) test --locked -q -p profiler-ffi --lib header_is_fresh >/dev/null && \
	diff -u include/ebpf_profiler.h "$$tmp" || { echo "include/ebpf_profiler.h is stale: run make update-header"; exit 1; }
	printf '#include "ebpf_profiler.h"\nint main(void) { return ebpf_profiler_abi_version() == EBPF_PROFILER_ABI_VERSION ? 0 : 1; }\n' \
	  | cc -std=c11 -Wall -Wextra -Werror -pedantic -Iinclude -x c -fsyntax-only -
	printf '#include "ebpf_profiler.h"\nint main() { return ebpf_profiler_abi_version() == EBPF_PROFILER_ABI_VERSION ? 0 : 1; }\n' \
	  | c++ -std=c++17 -Wall -Wextra -Werror -pedantic -Iinclude -x c++ -fsyntax-only -
	@echo "include/ebpf_profiler.h is fresh and compiles as C and C++"

update-header:
	EBPF_PROFILER_HEADER_OUT=$(CURDIR)/include/ebpf_profiler.h $(COLLECTOR_CARGO) test --locked -q -p profiler-ffi --lib header_is_fresh

test-ffi-c: collector-staticlib
	mkdir -p build
	cc -std=c11 -Wall -Wextra -Werror -Iinclude ffi/c-test/abi_smoke.c $(COLLECTOR_GO_LIB) $(COLLECTOR_LIBS) -o build/abi_smoke
	./build/abi_smoke

collector-e2e: otelcol-ebpf-profiler
	tests/e2e/collector_e2e.sh
