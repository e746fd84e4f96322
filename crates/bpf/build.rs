//! Compiles the eBPF C programs in `ebpf/` with clang and generates the
//! libbpf-rs skeleton. `BPF_CLANG` overrides the compiler (default
//! `clang-19`, Debian's name; there is no plain `clang` on Debian 12).
//!
//! It also makes `ebpf/types.h` the one definition of the BPF/Rust
//! contract: bindgen turns the header into Rust (`contract.rs`: structs,
//! enums, limits), and the names it saw become a layout table
//! (`contract_layout.rs`) that the contract test compares with the BTF of
//! the header compiled for the BPF target (`contract.bpf.o`).

use bindgen::callbacks::{EnumVariantValue, FieldInfo, IntKind, ParseCallbacks};
use libbpf_cargo::SkeletonBuilder;
use std::collections::BTreeMap;
use std::env;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

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

    let seen = generate_contract(&ebpf_dir.join("types.h"), &out_dir);
    compile_contract_object(&seen, &ebpf_dir, &out_dir, &clang, &libbpf_include);
}

/// What bindgen saw in `types.h`: the fields of every struct, the
/// constants of every enum (by enum name).
#[derive(Debug, Default)]
struct Seen {
    structs: BTreeMap<String, Vec<String>>,
    enums: BTreeMap<String, Vec<(String, i64)>>,
}

#[derive(Debug)]
struct Collector(Arc<Mutex<Seen>>);

impl ParseCallbacks for Collector {
    fn int_macro(&self, name: &str, _value: i64) -> Option<IntKind> {
        // Frame words and signal-frame offsets are u64 on both sides,
        // rule ids u16 (struct delta_entry).
        if name.starts_with("FRAME_")
            || name.starts_with("UCONTEXT_")
            || name == "PYTHON_FRAME_OFFSET_MAX"
            || name == "PYTHON_FRAME_CODE_MASK"
            || name == "HOTSPOT_FRAME_OFFSET_MAX"
            || name == "HOTSPOT_NO_BCI"
            || name == "V8_FRAME_OFFSET_MAX"
            || name == "V8_FRAME_PC_MASK"
        {
            Some(IntKind::U64)
        } else if name.starts_with("RULE_ID_") {
            Some(IntKind::U16)
        } else {
            None
        }
    }

    fn enum_variant_name(&self, enum_name: Option<&str>, variant: &str, value: EnumVariantValue) -> Option<String> {
        let name = enum_name.unwrap_or("").trim_start_matches("enum ").to_string();
        let value = match value {
            EnumVariantValue::Boolean(b) => i64::from(b),
            EnumVariantValue::Signed(v) => v,
            EnumVariantValue::Unsigned(v) => v as i64,
        };
        self.0.lock().unwrap().enums.entry(name).or_default().push((variant.to_string(), value));
        None
    }

    fn field_visibility(&self, info: FieldInfo<'_>) -> Option<bindgen::FieldVisibilityKind> {
        let mut seen = self.0.lock().unwrap();
        let fields = seen.structs.entry(info.type_name.to_string()).or_default();
        if !fields.iter().any(|f| f == info.field_name) {
            fields.push(info.field_name.to_string());
        }
        None
    }
}

/// Writes `contract.rs` (bindgen over `types.h`) and `contract_layout.rs`.
fn generate_contract(header: &Path, out_dir: &Path) -> Seen {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let header_path = header.display().to_string();
    let bindings = bindgen::Builder::default()
        .header_contents("contract_wrapper.h", &format!("#include <linux/types.h>\n#include \"{header_path}\"\n"))
        .allowlist_file(regex_escape(&header_path))
        .prepend_enum_name(false)
        .derive_default(true)
        .derive_eq(true)
        .derive_hash(true)
        .layout_tests(true)
        .parse_callbacks(Box::new(Collector(seen.clone())))
        .generate()
        .unwrap_or_else(|e| panic!("bindgen over {header_path} failed (libclang comes with clang-19): {e}"));
    bindings.write_to_file(out_dir.join("contract.rs")).expect("write contract.rs");

    let seen = std::mem::take(&mut *seen.lock().unwrap());
    let mut table = String::from("// Generated by build.rs from the names bindgen saw in ebpf/types.h.\n");
    table.push_str("pub(crate) fn rust_structs() -> Vec<StructLayout> {\n    vec![\n");
    for (name, fields) in &seen.structs {
        let _ = writeln!(table, "        StructLayout {{\n            name: \"{name}\",\n            size: ::core::mem::size_of::<{name}>(),\n            fields: vec![");
        for field in fields {
            let _ = writeln!(
                table,
                "                FieldLayout {{ name: \"{field}\", offset: ::core::mem::offset_of!({name}, {field}), size: field_size(|s: &{name}| &s.{field}) }},"
            );
        }
        table.push_str("            ],\n        },\n");
    }
    table.push_str("    ]\n}\n\npub(crate) const RUST_ENUMS: &[(&str, &[(&str, i64)])] = &[\n");
    for (name, variants) in &seen.enums {
        let _ = write!(table, "    (\"{name}\", &[");
        for (variant, value) in variants {
            let _ = write!(table, "(\"{variant}\", {value}), ");
        }
        table.push_str("]),\n");
    }
    table.push_str("];\n");
    std::fs::write(out_dir.join("contract_layout.rs"), table).expect("write contract_layout.rs");
    seen
}

/// Compiles `types.h` for the BPF target with one variable of every
/// shared struct and enum, so that all of them reach the object's BTF:
/// the layouts the BPF programs see, for the contract test.
fn compile_contract_object(seen: &Seen, ebpf_dir: &Path, out_dir: &Path, clang: &str, libbpf_include: &str) {
    let mut source = String::from(
        "/* Generated by crates/bpf/build.rs: every shared type of types.h, for its BTF. */\n\
         #include \"include/vmlinux_min.h\"\n#include \"types.h\"\n",
    );
    for name in seen.structs.keys() {
        let _ = writeln!(source, "struct {name} contract_struct_{name};");
    }
    for name in seen.enums.keys() {
        let _ = writeln!(source, "enum {name} contract_enum_{name};");
    }
    let c_file = out_dir.join("contract.bpf.c");
    std::fs::write(&c_file, source).expect("write contract.bpf.c");
    let object = out_dir.join("contract.bpf.o");
    let status = Command::new(clang)
        .args(["-target", "bpf", "-g", "-O2", "-c", "-Wall", "-Werror"])
        .arg(bpf_target_arch_define())
        .arg(format!("-I{}", ebpf_dir.display()))
        .arg(format!("-I{libbpf_include}"))
        .arg(&c_file)
        .arg("-o")
        .arg(&object)
        .status()
        .unwrap_or_else(|e| panic!("running {clang}: {e}"));
    assert!(status.success(), "{clang} could not compile {}", c_file.display());
}

/// The `__TARGET_ARCH_*` define ebpf/arch.h selects on, as libbpf-cargo
/// passes it to the skeleton's compilation.
fn bpf_target_arch_define() -> String {
    let arch = env::var("CARGO_CFG_TARGET_ARCH").expect("cargo sets CARGO_CFG_TARGET_ARCH");
    let name = match arch.as_str() {
        "x86_64" => "x86",
        "aarch64" => "arm64",
        other => panic!("no eBPF build for {other} (ebpf/arch.h: x86_64, aarch64)"),
    };
    format!("-D__TARGET_ARCH_{name}")
}

/// `path` as a regex that matches only itself.
fn regex_escape(path: &str) -> String {
    path.chars().fold(String::new(), |mut s, c| {
        if "\\.+*?()|[]{}^$".contains(c) {
            s.push('\\');
        }
        s.push(c);
        s
    })
}
