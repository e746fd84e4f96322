# otelcol-ebpf-profiler: an OpenTelemetry Collector built with OCB whose
# `profiling` receiver (go-receiver/) links the Rust core
# (ffi/ -> libebpf_profiler.a) over the C ABI of include/ebpf_profiler.h.
# Included by the top-level Makefile. Targets:
#
#   otelcol-ebpf-profiler  build ./otelcol-ebpf-profiler (Rust staticlib, then OCB)
#   otelcol-ebpf-profiler-core  build ./otelcol-ebpf-profiler-core: the receiver
#                          beside the Collector core only (builder-core.yaml)
#   lint-go                gofmt and go vet of the receiver, cgo and no-cgo builds
#   test-go                the receiver's Go tests (config, factory, golden payload, cgo)
#   check-header           include/ebpf_profiler.h is what cbindgen makes now; it compiles as C and C++
#   update-header          regenerate include/ebpf_profiler.h
#   test-ffi-c             link the staticlib from C and drive its error paths
#   collector-e2e          collector -> sink collector end to end (root, BPF)
#   collector-core-e2e     the core-only distribution end to end (root, BPF)

include go-receiver/versions.env

COLLECTOR_CARGO ?= cargo
COLLECTOR_GO ?= go
# Deferred: go may be installed by .ci/collector.sh after make parsed this.
# One directory per OCB release, so that manifests of different releases
# (and other checkouts) do not reinstall each other's.
COLLECTOR_OCB_DIR = $(shell $(COLLECTOR_GO) env GOPATH)/ocb
COLLECTOR_OCB = $(COLLECTOR_OCB_DIR)/$(COLLECTOR_DIST_VERSION)/builder
COLLECTOR_CORE_OCB = $(COLLECTOR_OCB_DIR)/$(COLLECTOR_VERSION)/builder
COLLECTOR_TARGET_DIR = $(or $(CARGO_TARGET_DIR),target)
COLLECTOR_STATICLIB = $(COLLECTOR_TARGET_DIR)/release/libebpf_profiler.a
COLLECTOR_GO_LIB = go-receiver/lib/libebpf_profiler.a
COLLECTOR_LIBS = -lgcc_s -lutil -lrt -lpthread -lm -ldl
COLLECTOR_BUILD_DIR = build/otelcol-ebpf-profiler

.PHONY: otelcol-ebpf-profiler otelcol-ebpf-profiler-core collector-staticlib collector-ocb collector-core-ocb collector-core-e2e lint-go test-go check-header update-header test-ffi-c collector-e2e

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

# OCB of a release, installed with `go install` when missing: $(call
# install-ocb,PATH,VERSION).
define install-ocb
	@if ! [ -x "$(1)" ] || ! "$(1)" version 2>&1 | grep -q -- "$(2)"; then \
	  echo "installing OCB $(2) in $(dir $(1))"; \
	  GOBIN="$(dir $(1))" $(COLLECTOR_GO) install go.opentelemetry.io/collector/cmd/builder@$(2); \
	fi
endef

# OCB of the full distribution's release and of the core's.
collector-ocb:
	$(call install-ocb,$(COLLECTOR_OCB),$(COLLECTOR_DIST_VERSION))
collector-core-ocb:
	$(call install-ocb,$(COLLECTOR_CORE_OCB),$(COLLECTOR_VERSION))

otelcol-ebpf-profiler: collector-staticlib collector-ocb
	mkdir -p $(dir $(COLLECTOR_BUILD_DIR))
	"$(COLLECTOR_OCB)" --config builder-config.yaml --ldflags "$(COLLECTOR_LIB_LDFLAGS)"
	cp -f $(COLLECTOR_BUILD_DIR)/otelcol-ebpf-profiler ./otelcol-ebpf-profiler
	@echo "built ./otelcol-ebpf-profiler; run: ./otelcol-ebpf-profiler --feature-gates=service.profilesSupport --config local.example.yaml (as root)"

# The receiver beside the Collector core of COLLECTOR_VERSION only.
otelcol-ebpf-profiler-core: collector-staticlib collector-core-ocb
	mkdir -p build
	"$(COLLECTOR_CORE_OCB)" --config builder-core.yaml --ldflags "$(COLLECTOR_LIB_LDFLAGS)"
	cp -f build/otelcol-ebpf-profiler-core/otelcol-ebpf-profiler-core ./otelcol-ebpf-profiler-core

# Vet type-checks the cgo code against include/ebpf_profiler.h without
# linking, so it needs no staticlib (no Rust build): it runs before the tests.
lint-go:
	@command -v $(COLLECTOR_GO) >/dev/null || { echo "lint-go: $(COLLECTOR_GO) is not installed" >&2; exit 1; }
	@unformatted=$$("$$($(COLLECTOR_GO) env GOROOT)/bin/gofmt" -l go-receiver); \
	if [ -n "$$unformatted" ]; then echo "not gofmt-formatted (run gofmt -w):"; echo "$$unformatted"; exit 1; fi
	cd go-receiver && $(COLLECTOR_GO) vet ./...
	cd go-receiver && CGO_ENABLED=0 $(COLLECTOR_GO) vet ./...
	cd go-receiver && $(COLLECTOR_GO) vet -modfile=go.core.mod ./...

# The Go tests with the real library (cgo) and with the no-cgo stub (make
# lint vets both), at the full distribution's release (go.mod); then with
# the library at the current core's (go.core.mod, see versions.env).
test-go: collector-staticlib
	cd go-receiver && $(COLLECTOR_GO) test -race -count=1 -ldflags "$(COLLECTOR_LIB_LDFLAGS)" ./...
	cd go-receiver && CGO_ENABLED=0 $(COLLECTOR_GO) test -count=1 ./...
	cd go-receiver && $(COLLECTOR_GO) test -modfile=go.core.mod -count=1 -ldflags "$(COLLECTOR_LIB_LDFLAGS)" ./...

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

collector-core-e2e: otelcol-ebpf-profiler otelcol-ebpf-profiler-core
	tests/e2e/core_distribution_e2e.sh
