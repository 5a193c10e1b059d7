//! docs/cli.md is what the binary prints: each `## \`entropy-lens <command>\`` section's block is
//! that command's `--help`, verbatim, and every command the binary lists has a section. Regenerate
//! the blocks with the loop at the top of the page after changing a flag.

mod common;

fn help(command: &str) -> String {
    let mut args: Vec<&str> = command.split_whitespace().collect();
    args.push("--help");
    common::ok(&args)
}

/// The body of the first ```text block after `heading`.
fn block_after(doc: &str, heading: &str) -> String {
    let at = doc
        .find(&format!("{heading}\n"))
        .unwrap_or_else(|| panic!("docs/cli.md has no {heading:?}"));
    let rest = &doc[at..];
    let open = rest.find("```text\n").expect("a text block") + "```text\n".len();
    let close = rest[open..].find("\n```").expect("closing fence");
    rest[open..open + close + 1].to_string()
}

#[test]
fn the_command_line_page_is_the_binarys_help() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/cli.md")).unwrap();
    let top = help("");
    // The commands the binary lists: the lines of its `Commands:` section.
    let commands: Vec<String> = top
        .split("Commands:\n")
        .nth(1)
        .expect("a Commands section")
        .lines()
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(String::from)
        .collect();
    assert!(commands.len() >= 10, "{commands:?}");
    assert_eq!(
        block_after(&doc, "## `entropy-lens`"),
        top,
        "docs/cli.md: entropy-lens --help"
    );
    for c in &commands {
        assert_eq!(
            block_after(&doc, &format!("## `entropy-lens {c}`")),
            help(c),
            "docs/cli.md: entropy-lens {c} --help differs; regenerate it"
        );
    }
}
