//! `--help`: the usage, words, flags and help that [`TASKS`] declares, rendered.

use std::fmt::Write as _;

use super::{Flag, Rest, TASKS, TaskSpec};

pub(super) fn words(spec: &TaskSpec, separator: &str) -> String {
    spec.words
        .iter()
        .map(|(word, _)| *word)
        .collect::<Vec<_>>()
        .join(separator)
}

/// `cargo xtask NAME [WORD] [--flag VALUE]... [-- REST]`.
pub(super) fn usage(spec: &TaskSpec) -> String {
    let mut out = format!("cargo xtask {}", spec.name);
    if !spec.words.is_empty() {
        let words = words(spec, "|");
        if spec.word_required {
            let _ = write!(out, " {words}");
        } else {
            let _ = write!(out, " [{words}]");
        }
    }
    for flag in spec.flags {
        let _ = write!(out, " [{}]", flag_usage(flag));
        if flag.repeats {
            out.push_str("...");
        }
    }
    match spec.rest {
        Rest::Nothing => {}
        Rest::AfterDashDash(what, _) => {
            let _ = write!(out, " [-- {what}]");
        }
        Rest::All(what, _, _) => {
            let _ = write!(out, " [{what}]");
        }
    }
    out
}

pub(super) fn flag_usage(flag: &Flag) -> String {
    match flag.value {
        Some(value) => format!("{} {value}", flag.name),
        None => flag.name.to_owned(),
    }
}

/// A two-column line: `left` padded to the help column, or alone on its line when too long.
fn row(out: &mut String, left: &str, help: &str) {
    const COLUMN: usize = 24;
    if left.chars().count() < COLUMN - 1 {
        let _ = writeln!(out, "  {left:<width$}{help}", width = COLUMN - 1);
    } else {
        let _ = writeln!(out, "  {left}\n  {:width$}{help}", "", width = COLUMN - 1);
    }
}

/// `cargo xtask --help`: every task and what it does.
pub(crate) fn overview() -> String {
    let mut out = String::from(
        "cargo xtask <task> [FLAGS]    (`cargo xtask <task> --help` lists a task's flags)\n\ntasks:\n",
    );
    for spec in TASKS {
        let mut left = spec.name.to_owned();
        match (spec.words.is_empty(), spec.word_required) {
            (true, _) => {}
            (false, true) => {
                let _ = write!(left, " {}", words(spec, "|"));
            }
            (false, false) => {
                let _ = write!(left, " [{}]", words(spec, "|"));
            }
        }
        if let Rest::All(what, _, _) = spec.rest {
            let _ = write!(left, " [{what}]");
        } else if !spec.flags.is_empty() {
            left.push_str(" [FLAGS]");
        }
        row(&mut out, &left, spec.about);
    }
    out
}

/// `cargo xtask NAME --help`: its usage, words, flags and what it passes on.
pub(crate) fn help(name: &str) -> String {
    let Some(spec) = TASKS.iter().find(|spec| spec.name == name) else {
        return overview();
    };
    let mut out = format!("{}\n\n{}\n", usage(spec), spec.about);
    if !spec.words.is_empty() {
        out.push('\n');
        for (word, help) in spec.words {
            row(&mut out, word, help);
        }
    }
    if !spec.flags.is_empty() {
        out.push_str("\nflags:\n");
        for flag in spec.flags {
            let mut help = flag.help.to_owned();
            if !flag.aliases.is_empty() {
                let _ = write!(help, " (also {})", flag.aliases.join(", "));
            }
            if flag.repeats {
                help.push_str("; may be repeated");
            }
            row(&mut out, &flag_usage(flag), &help);
        }
    }
    match spec.rest {
        Rest::Nothing => {}
        Rest::AfterDashDash(what, help) => {
            out.push('\n');
            row(&mut out, &format!("-- {what}"), help);
        }
        Rest::All(what, help, _) => {
            out.push('\n');
            row(&mut out, what, help);
        }
    }
    out
}
