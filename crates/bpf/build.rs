//! Compiles the eBPF C programs in `ebpf/` with clang and generates the
//! libbpf-rs skeleton. `BPF_CLANG` overrides the compiler (default
//! `clang-19`, Debian's name; there is no plain `clang` on Debian 12).
//! The types the programs share with Rust are profiler-contract's.

use libbpf_cargo::SkeletonBuilder;
use std::env;
use std::path::PathBuf;

const PROGRAMS: &[&str] = &["profiler"];

fn main() {
    let ebpf_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap()).join("../../ebpf");
    let ebpf_dir = ebpf_dir.canonicalize().expect("ebpf/ exists");
    let out_dir = PathBuf::from(env::var("OUT_DIR").unwrap());
    let clang = env::var("BPF_CLANG").unwrap_or_else(|_| "clang-19".to_string());
    println!("cargo:rerun-if-env-changed=BPF_CLANG");
    println!("cargo:rerun-if-changed={}", ebpf_dir.display());
    // libbpf-sys (vendored) installs bpf_helpers.h & co. here.
    let libbpf_include = env::var("DEP_BPF_INCLUDE").expect("libbpf-sys sets DEP_BPF_INCLUDE");
    let bpf_args = [
        format!("-I{libbpf_include}"),
        "-Wall".into(),
        "-Wextra".into(),
        "-Werror".into(),
        "-Wno-unused-parameter".into(),
    ];

    for name in PROGRAMS {
        let source = ebpf_dir.join(format!("{name}.bpf.c"));
        let skeleton = out_dir.join(format!("{name}.skel.rs"));
        let mut builder = SkeletonBuilder::new();
        builder.source(&source).clang(&clang).clang_args(bpf_args.clone());
        if let Err(e) = builder.build_and_generate(&skeleton) {
            panic!("building {} with {clang} failed (install clang-19, or set BPF_CLANG): {e:#}", source.display());
        }
    }
}
