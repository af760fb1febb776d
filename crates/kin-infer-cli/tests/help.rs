//! Help equals behaviour (issue 35): clap's help is the one source of flag documentation.
//!
//! - every `--flag` in the README's "Using it" synopsis exists in that command's `--help`;
//! - every flag in every command's `--help` has a non-empty help string, and a row in
//!   docs/cli.md's table for that command with the same text and default;
//! - every command has a synopsis line in the README and a section in docs/cli.md.
//!
//! docs/cli.md's tables are generated from `--help`: after changing a flag, run
//! `KIN_WRITE_CLI_DOCS=1 cargo test -p kin-infer-cli --test help` and commit docs/cli.md.

mod common;

use common::*;
use std::collections::BTreeMap;

/// One flag as `--help` shows it.
#[derive(Debug, Clone)]
struct Flag {
    /// `--model`, `-h, --help`: as written before the value name.
    spec: String,
    /// The long name, `--model`.
    long: String,
    value: Option<String>,
    /// The author's text, clap's `[default: ..]`-style annotations removed; paragraphs joined
    /// by `<br>`.
    help: String,
    default: Option<String>,
}

fn help_of(args: &[&str]) -> String {
    let mut c = kin(args);
    c.env_remove("KIN_INFER_API_KEY").env("COLUMNS", "1000");
    let o = run(&mut c, "");
    assert_eq!(o.status.code(), Some(0), "{args:?}: {}", text(&o.stderr));
    text(&o.stdout)
}

/// The subcommands `kin-infer --help` lists (`help` aside), with their one-line about.
fn subcommands() -> Vec<(String, String)> {
    let h = help_of(&["--help"]);
    let mut out = Vec::new();
    let mut inside = false;
    for line in h.lines() {
        if line.starts_with("Commands:") {
            inside = true;
            continue;
        }
        if inside {
            if !line.starts_with("  ") {
                break;
            }
            let t = line.trim();
            let (name, about) = t.split_once(char::is_whitespace).unwrap_or((t, ""));
            if name != "help" {
                out.push((name.to_string(), about.trim().to_string()));
            }
        }
    }
    assert!(out.len() >= 9, "too few commands parsed from:\n{h}");
    out
}

/// Removes clap's trailing annotations (`[default: 8080]`, `[env: X=]`, `[possible values:
/// ..]`, `[aliases: ..]`) from a help line; returns the line and the default, if any.
fn strip_annotations(line: &str) -> (String, Option<String>) {
    let mut s = line.trim_end().to_string();
    let mut default = None;
    while s.ends_with(']') {
        let Some(open) = s
            .rfind(" [")
            .map(|i| i + 1)
            .or(s.starts_with('[').then_some(0))
        else {
            break;
        };
        let inner = &s[open + 1..s.len() - 1];
        let known = ["default: ", "env: ", "possible values: ", "aliases: "];
        if !known.iter().any(|k| inner.starts_with(k)) {
            break;
        }
        if let Some(d) = inner.strip_prefix("default: ") {
            default = Some(d.to_string());
        }
        s.truncate(open);
        s = s.trim_end().to_string();
    }
    (s, default)
}

/// Sets the last flag's help and default from its help lines.
fn finish(flags: &mut [Flag], lines: &mut Vec<String>) {
    if let Some(f) = flags.last_mut() {
        let mut text = Vec::new();
        for l in lines.drain(..) {
            let (t, d) = strip_annotations(&l);
            if d.is_some() {
                f.default = d;
            }
            if !t.trim().is_empty() {
                // Runs of spaces (an aligned list) read as one in a table cell.
                text.push(t.split_whitespace().collect::<Vec<_>>().join(" "));
            }
        }
        f.help = text.join("<br>");
    }
}

/// The flags of one `--help` text, in order.
fn parse_flags(help: &str) -> Vec<Flag> {
    let mut flags: Vec<Flag> = Vec::new();
    let mut lines: Vec<String> = Vec::new();
    let mut inside = false;
    for line in help.lines() {
        if line.starts_with("Options:") {
            inside = true;
            continue;
        }
        if !inside {
            continue;
        }
        let indent = line.len() - line.trim_start().len();
        let t = line.trim();
        if t.starts_with('-') && (2..=6).contains(&indent) {
            finish(&mut flags, &mut lines);
            // `--flag <VALUE>  help` (help on the line) or `--flag <VALUE>` (help below).
            let (spec_full, rest) = match t.find("  ") {
                Some(i) => (&t[..i], t[i..].trim()),
                None => (t, ""),
            };
            let long = spec_full
                .split([',', ' '])
                .find(|w| w.starts_with("--"))
                .unwrap_or_else(|| panic!("no long name in `{t}`"))
                .to_string();
            let (spec, value) = match spec_full.find(" <").or(spec_full.find(" [")) {
                Some(i) => (&spec_full[..i], Some(spec_full[i + 1..].to_string())),
                None => (spec_full, None),
            };
            flags.push(Flag {
                spec: spec.to_string(),
                long,
                value,
                help: String::new(),
                default: None,
            });
            lines = vec![rest.to_string()];
        } else if !t.is_empty() && indent > 6 && !flags.is_empty() {
            lines.push(t.to_string());
        } else if !t.is_empty() && indent <= 1 {
            // A new section (`Arguments:`, a footer): the options end.
            finish(&mut flags, &mut lines);
            inside = false;
        }
    }
    finish(&mut flags, &mut lines);
    flags
}

/// Every command's about line and flags, in `kin-infer --help`'s order.
fn all_flags_in_order() -> Vec<(String, (String, Vec<Flag>))> {
    subcommands()
        .into_iter()
        .map(|(c, about)| {
            let flags = parse_flags(&help_of(&[&c, "--help"]));
            assert!(
                flags.iter().any(|f| f.long == "--help"),
                "{c}: --help not parsed"
            );
            (c, (about, flags))
        })
        .collect()
}

fn all_flags() -> BTreeMap<String, (String, Vec<Flag>)> {
    all_flags_in_order().into_iter().collect()
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// The README's "Using it" synopsis: the first ```sh block under that heading.
fn synopsis() -> String {
    let readme = read("README.md");
    let at = readme
        .find("## Using it")
        .expect("README.md has a `## Using it` section");
    let rest = &readme[at..];
    let start = rest
        .find("```sh\n")
        .expect("a ```sh block under `## Using it`")
        + 6;
    let end = rest[start..].find("```").expect("the block ends") + start;
    rest[start..end].to_string()
}

/// Each `--flag` in `s` (a word: `--max-tokens`, not its prefix `--max`).
fn flags_in(s: &str) -> Vec<String> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(j) = s[i..].find("--") {
        let st = i + j;
        let mut e = st + 2;
        while e < b.len() && (b[e].is_ascii_alphanumeric() || b[e] == b'-') {
            e += 1;
        }
        let before_ok = st == 0 || !(b[st - 1].is_ascii_alphanumeric() || b[st - 1] == b'-');
        if before_ok && e > st + 2 && b[st + 2].is_ascii_lowercase() {
            out.push(s[st..e].to_string());
        }
        i = e.max(st + 2);
    }
    out
}

/// The synopsis's flags per command; `...` holds the global ones (`kin-infer ... --backend`).
fn synopsis_flags() -> BTreeMap<String, Vec<String>> {
    let mut by: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in synopsis().lines() {
        let code = line.split(" #").next().unwrap_or("");
        if let Some(rest) = code.strip_prefix("kin-infer ") {
            let cmd = rest.split_whitespace().next().unwrap_or("").to_string();
            current = Some(cmd);
        } else if !line.starts_with(' ') {
            current = None;
        }
        if let Some(c) = &current {
            by.entry(c.clone()).or_default().extend(flags_in(code));
        }
    }
    by
}

#[test]
fn every_synopsis_flag_exists_in_help() {
    let all = all_flags();
    let syn = synopsis_flags();
    let mut bad = Vec::new();
    for (cmd, flags) in &syn {
        let known: Vec<&str> = if cmd == "..." {
            // Global: in every command's help.
            let sets: Vec<Vec<&str>> = all
                .values()
                .map(|(_, f)| f.iter().map(|f| f.long.as_str()).collect())
                .collect();
            sets[0]
                .iter()
                .copied()
                .filter(|f| sets.iter().all(|s| s.contains(f)))
                .collect()
        } else {
            let Some((_, f)) = all.get(cmd) else {
                bad.push(format!(
                    "README synopsis names `kin-infer {cmd}`, no such command"
                ));
                continue;
            };
            f.iter().map(|f| f.long.as_str()).collect()
        };
        for f in flags {
            if !known.contains(&f.as_str()) {
                bad.push(format!(
                    "README synopsis: `kin-infer {cmd} {f}` is not in its --help"
                ));
            }
        }
    }
    for cmd in all.keys() {
        if !syn.contains_key(cmd) {
            bad.push(format!("README synopsis has no line for `kin-infer {cmd}`"));
        }
    }
    assert!(
        syn.contains_key("..."),
        "the synopsis lacks the global `kin-infer ...` line"
    );
    assert!(
        synopsis().contains("docs/cli.md"),
        "the synopsis must point to docs/cli.md, the full flag reference"
    );
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn every_flag_has_help() {
    let mut bad = Vec::new();
    for (cmd, (about, flags)) in all_flags() {
        if about.is_empty() {
            bad.push(format!("`kin-infer {cmd}` has no about line"));
        }
        for f in flags {
            if f.help.trim().is_empty() {
                bad.push(format!("`kin-infer {cmd} {}` has no help text", f.long));
            }
        }
    }
    // `--json` above all: what it prints must be said.
    for f in parse_flags(&help_of(&["--help"])) {
        if f.help.trim().is_empty() {
            bad.push(format!("`kin-infer {}` has no help text", f.long));
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn every_json_flag_says_what_it_prints() {
    let mut n = 0;
    for (cmd, (_, flags)) in all_flags() {
        for f in flags.iter().filter(|f| f.long == "--json") {
            n += 1;
            assert!(
                f.help.len() > 10,
                "`kin-infer {cmd} --json`: help `{}` says too little",
                f.help
            );
        }
    }
    assert!(n >= 7, "only {n} --json flags found");
}

fn cell(s: &str) -> String {
    s.replace('|', "\\|")
}

/// docs/cli.md's generated part, from the help of this build.
fn generated() -> String {
    let mut out = String::new();
    let global = parse_flags(&help_of(&["--help"]));
    out.push_str("## Every command\n\n| flag | default | |\n|---|---|---|\n");
    for f in &global {
        out.push_str(&row(f));
    }
    for (cmd, (about, flags)) in all_flags_in_order() {
        out.push_str(&format!("\n## `kin-infer {cmd}`\n\n{about}.\n\n"));
        out.push_str("| flag | default | |\n|---|---|---|\n");
        for f in flags
            .iter()
            .filter(|f| !global.iter().any(|g| g.long == f.long))
        {
            out.push_str(&row(f));
        }
    }
    out
}

fn row(f: &Flag) -> String {
    let flag = match &f.value {
        Some(v) => format!("{} {v}", f.spec),
        None => f.spec.clone(),
    };
    format!(
        "| `{}` | {} | {} |\n",
        cell(&flag),
        f.default
            .as_ref()
            .map_or(String::new(), |d| format!("`{}`", cell(d))),
        cell(&f.help)
    )
}

const BEGIN: &str = "<!-- generated from --help by crates/kin-infer-cli/tests/help.rs: begin -->\n";
const END: &str = "<!-- generated: end -->\n";

#[test]
fn docs_cli_md_matches_help() {
    let path = root().join("docs/cli.md");
    let doc = std::fs::read_to_string(&path).unwrap_or_default();
    let (head, tail) = match (doc.find(BEGIN), doc.find(END)) {
        (Some(b), Some(e)) if b < e => (doc[..b].to_string(), doc[e + END.len()..].to_string()),
        _ => (doc.clone(), String::new()),
    };
    let want = format!("{head}{BEGIN}\n{}\n{END}{tail}", generated());
    if std::env::var_os("KIN_WRITE_CLI_DOCS").is_some() {
        std::fs::write(&path, &want).unwrap();
        return;
    }
    if doc == want {
        return;
    }
    // Name the first rows that differ, then fail.
    let have: Vec<&str> = doc.lines().collect();
    let diff: Vec<String> = want
        .lines()
        .filter(|l| l.starts_with("| `") || l.starts_with("## "))
        .filter(|l| !have.contains(l))
        .take(10)
        .map(|l| format!("  want: {l}"))
        .collect();
    panic!(
        "docs/cli.md is not what --help says; run `KIN_WRITE_CLI_DOCS=1 cargo test -p \
         kin-infer-cli --test help` and commit docs/cli.md. Missing or changed:\n{}",
        diff.join("\n")
    );
}

#[test]
fn the_parsers_read_what_they_should() {
    assert_eq!(
        flags_in("x [--max-tokens N] --a|--b-c, ---no x--y --"),
        ["--max-tokens", "--a", "--b-c"]
    );
    assert_eq!(
        strip_annotations("Port [default: 8080] [env: P=]"),
        ("Port".to_string(), Some("8080".to_string()))
    );
    assert_eq!(strip_annotations("[default: a b]").0, "");
    assert_eq!(strip_annotations("a [b] [env: X=]").0, "a [b]");
    let f = parse_flags(
        "Options:\n      --port <PORT>  0 picks [default: 8080]\n      --json\n          One \
         object\n\n          More\n  -h, --help  Print help\n",
    );
    let got: Vec<_> = f
        .iter()
        .map(|f| (f.spec.as_str(), f.value.as_deref(), f.help.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            ("--port", Some("<PORT>"), "0 picks"),
            ("--json", None, "One object<br>More"),
            ("-h, --help", None, "Print help")
        ]
    );
    assert_eq!(f[0].default.as_deref(), Some("8080"));
}
