//! Integration tests of `profiler-symbolize` against programs built here
//! with gcc, g++, rustc and go (each test skips, saying so, when its
//! toolchain is missing) and binutils (objcopy, strip).

mod support;

mod background;
mod demangle;
mod golang;
mod malformed;
mod memory;
mod native_c;
mod untrusted;

/// Counts heap per thread, for the `memory` tests.
#[global_allocator]
static ALLOC: memory::PerThread = memory::PerThread;
