//! Readable names from mangled symbols: Rust (legacy `_ZN...17h<hash>E`
//! and v0 `_R...`) and C++ (Itanium ABI `_Z...`).

use std::borrow::Cow;

/// The readable form of a symbol name, or the name as it is when it is
/// not mangled (C, Go) or cannot be demangled.
///
/// Rust names lose their hash (`::h0123...`) and crate disambiguators, as
/// `rustc-demangle`'s alternate format prints them
/// (`std::rt::lang_start_internal`). C++ names keep their parameter list
/// and qualifiers (`Circle::area() const`), GCC clone suffixes become
/// `[clone .cold]`.
///
/// ```
/// use profiler_symbolize::demangle;
/// assert_eq!(demangle("_ZN3std2rt19lang_start_internal17h0123456789abcdefE"), "std::rt::lang_start_internal");
/// assert_eq!(demangle("_ZNK6Circle4areaEv"), "Circle::area() const");
/// assert_eq!(demangle("main"), "main");
/// ```
pub fn demangle(name: &str) -> Cow<'_, str> {
    // Rust first: legacy Rust names are valid Itanium names too, and the
    // C++ demangler would print the hash as a path component.
    if name.starts_with("_R") || name.starts_with("_ZN") || name.starts_with("__R") {
        if let Ok(d) = rustc_demangle::try_demangle(name) {
            return Cow::Owned(format!("{d:#}"));
        }
    }
    if name.starts_with("_Z") {
        if let Ok(symbol) = cpp_demangle::Symbol::new(name) {
            if let Ok(d) = symbol.demangle() {
                return Cow::Owned(d);
            }
        }
    }
    Cow::Borrowed(name)
}

#[cfg(test)]
mod tests {
    use super::demangle;

    #[test]
    fn rust_legacy_and_v0() {
        assert_eq!(demangle("_ZN10rust_chain7chain_a17h0123456789abcdefE"), "rust_chain::chain_a");
        // v0, with a crate disambiguator and a generic argument.
        assert_eq!(
            demangle("_RINvNtCs1234_4core3ptr13drop_in_placeNtCs5678_5alloc6StringEB4_"),
            "core::ptr::drop_in_place::<alloc::String>"
        );
        assert_eq!(demangle("_RNvCs1234_7mycrate4main"), "mycrate::main");
        // LLVM's suffix on a legacy name.
        assert_eq!(demangle("_ZN4core3fmt5write17h0123456789abcdefE.llvm.123456"), "core::fmt::write");
    }

    #[test]
    fn cpp() {
        assert_eq!(demangle("_ZNK6Circle4areaEv"), "Circle::area() const");
        assert_eq!(demangle("_ZN2ns6Widget7computeEi"), "ns::Widget::compute(int)");
        assert_eq!(demangle("_Z5twiceIiET_S0_"), "int twice<int>(int)");
        assert_eq!(demangle("_ZN2ns4workEv.cold"), "ns::work() [clone .cold]");
        // A C++ name without parameters reads the same both ways.
        assert_eq!(demangle("_ZN2ns7counterE"), "ns::counter");
    }

    #[test]
    fn others_unchanged() {
        for name in ["main", "chain_leaf", "_Zgarbage", "_R", "_Z", "", "runtime.main", "_ZN"] {
            assert_eq!(demangle(name), name);
        }
    }
}
