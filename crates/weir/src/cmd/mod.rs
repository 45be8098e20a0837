//! One module per subcommand: its clap `Args` struct and a `run` function.

pub mod advise;
pub mod apply;
pub mod backends;
pub mod bench;
mod bench_commit;
mod bench_digest;
mod bench_live;
mod bench_plan;
pub mod bench_serve;
pub mod bench_sim;
pub mod bench_spark;
pub mod client;
pub mod commit_helper;
pub mod export;
pub mod import;
pub mod migrate;
pub mod plan;
mod plan_server;
pub mod routes;
pub mod runs;
pub mod serve;
mod serve_config;
pub mod shares;
pub mod simulate;
pub mod slo;
pub mod token;
pub mod validate;

/// Text from the server that a submitter chose (names, dates, reasons), made safe to print on
/// an operator's terminal: control characters (escape sequences that could move the cursor,
/// rewrite earlier lines or retitle the window) are shown escaped, `\u{1b}` for ESC.
pub fn safe(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(char::is_control) {
        return std::borrow::Cow::Borrowed(text);
    }
    std::borrow::Cow::Owned(
        text.chars()
            .map(|c| if c.is_control() { c.escape_default().to_string() } else { c.to_string() })
            .collect(),
    )
}

/// Like [`safe`] for multi-line text: newlines kept, every other control character escaped.
pub fn safe_lines(text: &str) -> String {
    text.lines().map(|l| safe(l).into_owned()).collect::<Vec<_>>().join("\n")
}

#[cfg(test)]
mod safe_tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(safe("nightly"), "nightly");
        assert_eq!(safe("a\u{1b}[2Jb"), "a\\u{1b}[2Jb");
        assert_eq!(safe("x\ry\n"), "x\\ry\\n");
        assert_eq!(safe_lines("one\ntwo\u{7}"), "one\ntwo\\u{7}");
    }
}
