//! Release numbers as runtimes print them ("3.1.7", "8.2.36-1+deb12u1").

/// The first three numbers of `text`, `major.minor.third`: each part
/// between dots counts by its leading 1 to 3 digits, anything after the
/// third number's digits is ignored ("3.4.0-preview1", "8.3.0RC1").
/// `None` when a part is missing, does not start with a digit, or does
/// not fit a `u8`.
pub(crate) fn leading_triple(text: &str) -> Option<(u8, u8, u8)> {
    let mut parts = text.split('.');
    let mut number = || -> Option<u8> {
        let part = parts.next()?;
        let digits = part.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 || digits > 3 {
            return None;
        }
        part[..digits].parse().ok()
    };
    Some((number()?, number()?, number()?))
}

#[cfg(test)]
mod tests {
    use super::leading_triple;

    #[test]
    fn parses_the_first_three_numbers() {
        assert_eq!(leading_triple("3.1.7"), Some((3, 1, 7)));
        assert_eq!(leading_triple("8.2.36"), Some((8, 2, 36)));
        assert_eq!(leading_triple("3.4.0-preview1"), Some((3, 4, 0)));
        assert_eq!(leading_triple("7.4.33-1+deb11u5"), Some((7, 4, 33)));
        assert_eq!(leading_triple("8.3.0RC1"), Some((8, 3, 0)));
        assert_eq!(leading_triple("1.2.3.4"), Some((1, 2, 3)));
        assert_eq!(leading_triple("8.2.255"), Some((8, 2, 255)));
    }

    #[test]
    fn refuses_what_is_not_three_numbers() {
        assert_eq!(leading_triple(""), None);
        assert_eq!(leading_triple("3.1"), None);
        assert_eq!(leading_triple("3.1."), None);
        assert_eq!(leading_triple("x.1.2"), None);
        assert_eq!(leading_triple("3.x.2"), None);
        assert_eq!(leading_triple(" 3.1.2"), None);
        assert_eq!(leading_triple("8.2.1000"), None, "more than 3 digits");
        assert_eq!(leading_triple("8.2.256"), None, "past u8");
        assert_eq!(leading_triple("3..1"), None);
    }
}
