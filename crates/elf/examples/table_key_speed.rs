//! Measures how fast `TableKey`s are computed: `cargo run --release -p
//! profiler-elf --example table_key_speed -- FILE...`.
use profiler_elf::source::{open_regular, table_key_of_file, Purpose};
use std::time::Instant;

fn main() {
    for path in std::env::args().skip(1) {
        let opened = open_regular(path.as_ref(), Purpose::Executable).expect("open");
        let start = Instant::now();
        let key = table_key_of_file(&opened.file, opened.identity.size).expect("hash");
        let s = start.elapsed().as_secs_f64();
        let mb = opened.identity.size as f64 / 1e6;
        println!("{path}: {mb:.1} MB in {:.1} ms ({:.0} MB/s) {key:?}", s * 1e3, mb / s);
    }
}
