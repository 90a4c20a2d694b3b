//! The numbers of a text, as a reader reads them: `1,062` is one number,
//! `p95` none, `503×3` two. A figure in the docs is found in its run when
//! the run has the same number, or one that rounds to it at the figure's
//! own precision (`42` is `41.99` shown whole; `2.8` is not `2,882`).

/// A number as written, without its sign and thousands separators.
#[derive(Debug, Clone, PartialEq)]
pub struct Number {
    /// The digits as written, `1,062.5` read as `1062.5`.
    pub text: String,
    /// Its value.
    pub value: f64,
    /// Digits after the decimal point.
    pub decimals: usize,
}

impl Number {
    /// Whether `self`, a figure of the docs, is `run`'s number as written
    /// or rounded to fewer decimals.
    pub fn is_shown_as(&self, run: &Number) -> bool {
        if self.text == run.text {
            return true;
        }
        if self.decimals > run.decimals {
            return false;
        }
        let scale = 10f64.powi(self.decimals as i32);
        // Half away from zero, as `format!("{:.N}")` rounds for display
        // (within a rounding error of the binary value).
        let rounded = (run.value * scale + 1e-9).round() / scale;
        (rounded - self.value).abs() < 0.5 / scale / 1000.0
    }
}

/// The numbers of `text`, left to right. Digits glued to a letter or an
/// underscore before them (`p95`, `x86_64`, `T204318Z`) are part of a name,
/// not numbers; a comma splits thousands only before exactly three digits.
pub fn numbers(text: &str) -> Vec<Number> {
    numbers_at(text).into_iter().map(|(_, n)| n).collect()
}

/// [`numbers`] with where each is written: the byte range of its digits
/// in `text`.
pub fn numbers_at(text: &str) -> Vec<(std::ops::Range<usize>, Number)> {
    let bytes = text.as_bytes();
    let digit_at = |i: usize| bytes.get(i).is_some_and(u8::is_ascii_digit);
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if !digit_at(i) {
            i += 1;
            continue;
        }
        // `p95`, `x86_64`, `T204318Z`, and the `.0` of `0.6.0`.
        let glued = i > 0 && {
            let b = bytes[i - 1];
            b.is_ascii_alphabetic() || b == b'_' || (b == b'.' && i > 1 && digit_at(i - 2))
        };
        let start = i;
        while digit_at(i) {
            i += 1;
        }
        let mut digits = text[start..i].to_owned();
        if i - start <= 3 {
            // `1,062,500`: a comma, exactly three digits, then no digit.
            while bytes.get(i) == Some(&b',')
                && (1..=3).all(|k| digit_at(i + k))
                && !digit_at(i + 4)
            {
                digits.push_str(&text[i + 1..i + 4]);
                i += 4;
            }
        }
        let mut decimals = 0;
        if bytes.get(i) == Some(&b'.') && digit_at(i + 1) {
            let from = i + 1;
            i = from;
            while digit_at(i) {
                i += 1;
            }
            decimals = i - from;
            digits.push('.');
            digits.push_str(&text[from..i]);
        }
        if glued {
            continue;
        }
        if let Ok(value) = digits.parse::<f64>() {
            out.push((
                start..i,
                Number {
                    text: digits,
                    value,
                    decimals,
                },
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(s: &str) -> Vec<String> {
        numbers(s).into_iter().map(|n| n.text).collect()
    }

    #[test]
    fn reads_thousands_decimals_and_lists() {
        assert_eq!(texts("1,062 req/s at 31.5 MiB"), ["1062", "31.5"]);
        assert_eq!(texts("pools of 3, 5, 10 or 20"), ["3", "5", "10", "20"]);
        assert_eq!(texts("--pool-sizes 5,10,20,40"), ["5", "10", "20", "40"]);
        assert_eq!(texts("503×3 and 10.0 → 10.3"), ["503", "3", "10.0", "10.3"]);
        assert_eq!(texts("4,138 (bound 4,352)"), ["4138", "4352"]);
        assert_eq!(texts("−7.7% and +2.2%"), ["7.7", "2.2"]);
        assert_eq!(texts("1,000,000 deliveries"), ["1000000"]);
        assert_eq!(texts("12,5"), ["12", "5"]);
    }

    #[test]
    fn digits_in_names_are_no_numbers() {
        assert_eq!(texts("p95 and p99 on x86_64"), Vec::<String>::new());
        assert_eq!(texts("demo-20261130T204318Z"), ["20261130"]);
        assert_eq!(texts("HTTP/1.1 v7"), ["1.1"]);
    }

    #[test]
    fn a_figure_is_its_run_number_or_that_number_rounded() {
        let n = |s: &str| numbers(s).remove(0);
        assert!(n("399").is_shown_as(&n("399")));
        assert!(n("42").is_shown_as(&n("41.99")));
        assert!(n("54").is_shown_as(&n("54.0")));
        assert!(n("31.6").is_shown_as(&n("31.62")));
        assert!(n("0.7").is_shown_as(&n("0.65")));
        assert!(!n("397").is_shown_as(&n("399")));
        assert!(!n("2.8").is_shown_as(&n("2882")));
        assert!(!n("41.99").is_shown_as(&n("42")));
        assert!(!n("31.7").is_shown_as(&n("31.62")));
    }
}
