// Package profilingreceiver is the OpenTelemetry Collector receiver of
// type "profiling": a thin shell around the Rust profiler, which it links
// as a static library (libebpf_profiler.a) over the C ABI of
// include/ebpf_profiler.h.
//
// Start hands the configuration to the library as JSON; a goroutine then
// pulls serialized OTLP batches (ExportProfilesServiceRequest bytes),
// decodes them with pdata's pprofile and passes them to the next
// consumer. Shutdown stops the profiler, drains the last batch and frees
// the handle. Without Linux and cgo the receiver builds but refuses to
// start, with an error that says why.
package profilingreceiver // import "ebpf-profiler/go-receiver"
