//! Flame graph SVG from [`FoldedStacks`], rendered by the `inferno`
//! crate. Kernel frames (`_[k]` suffix) get the kernel colours of the
//! "java" palette, as flamegraph.pl's `--color=java` does.

use crate::folded::FoldedStacks;
use inferno::flamegraph::{self, color::MultiPalette, Options, Palette};
use std::io::{self, Write};

/// Writes an interactive flame graph of `stacks` titled `title`.
pub fn write_svg(stacks: &FoldedStacks, title: &str, out: &mut dyn Write) -> io::Result<()> {
    let lines = stacks.lines();
    let mut options = Options::default();
    options.title = title.to_string();
    options.count_name = "samples".to_string();
    options.colors = Palette::Multi(MultiPalette::Java);
    if lines.is_empty() {
        // inferno refuses empty input; an empty profile is still a valid answer.
        return writeln!(
            out,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="600" height="40"><text x="10" y="25">{}: no samples</text></svg>"#,
            escape(title)
        );
    }
    flamegraph::from_lines(&mut options, lines.iter().map(String::as_str), out).map_err(io::Error::other)
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::folded::tests_support::trace;

    #[test]
    fn renders_every_frame_with_counts() {
        let mut stacks = FoldedStacks::default();
        for _ in 0..3 {
            stacks.add(&trace("dd", &["main", "copy", "read"], &["ksys_read", "vfs_read", "read_zero"]));
        }
        stacks.add(&trace("dd", &["main", "copy", "write"], &[]));
        let mut svg = Vec::new();
        write_svg(&stacks, "test profile", &mut svg).unwrap();
        let svg = String::from_utf8(svg).unwrap();
        assert!(svg.starts_with("<?xml"), "{}", &svg[..100]);
        assert!(svg.contains("test profile"));
        // inferno's tooltips: "<name> (<count> samples, <pct>%)"; the
        // java palette colours `_[k]` frames as kernel and drops the suffix.
        let titles: Vec<&str> = svg.match_indices("<title>").map(|(i, _)| &svg[i..i + 60]).collect();
        assert!(svg.contains("<title>read_zero (3 samples, 75.00%)"), "kernel frame missing: {titles:?}");
        assert!(svg.contains("<title>ksys_read (3 samples, 75.00%)"), "kernel frame missing: {titles:?}");
        assert!(svg.contains("write (1 samples, 25.00%)"), "user frame missing");
        assert!(svg.contains("dd (4 samples, 100.00%)"), "process frame missing");
    }

    #[test]
    fn empty_profile_is_a_valid_svg() {
        let mut svg = Vec::new();
        write_svg(&FoldedStacks::default(), "a <b>", &mut svg).unwrap();
        let svg = String::from_utf8(svg).unwrap();
        assert!(svg.contains("a &lt;b&gt;: no samples"), "{svg}");
    }
}
