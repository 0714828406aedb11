//! The crate documentation says where the `unsafe` code is: every source file that holds an
//! `unsafe` block, function or impl (other than calls from `engine.rs` and `link_section`
//! attributes, which the docs describe) is named there, and no file is named that has none.

use std::path::Path;

/// Files of `src/` with `unsafe` code of their own: blocks, `unsafe fn`, `unsafe impl`.
fn files_with_unsafe() -> Vec<String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut out = Vec::new();
    for e in std::fs::read_dir(&src).unwrap() {
        let p = e.unwrap().path();
        let text = std::fs::read_to_string(&p).unwrap();
        let code: String = text
            .lines()
            .map(|l| l.split("//").next().unwrap_or(""))
            .collect::<Vec<_>>()
            .join("\n");
        if code.contains("unsafe fn") || code.contains("unsafe impl") || code.contains("unsafe {") {
            out.push(p.file_name().unwrap().to_string_lossy().into_owned());
        }
    }
    out.sort();
    out
}

#[test]
fn finding6_crate_docs_name_every_file_with_unsafe_code() {
    let lib = include_str!("../src/lib.rs");
    let docs: String = lib
        .lines()
        .filter_map(|l| l.strip_prefix("//!"))
        .collect::<Vec<_>>()
        .join(" ");
    let files = files_with_unsafe();
    assert!(files.contains(&"source.rs".to_string()), "{files:?}");
    for f in &files {
        assert!(
            docs.contains(&format!("`{f}`")),
            "{f} has unsafe code but the crate docs do not name it"
        );
    }
    assert!(docs.contains("three modules"));
    let own: Vec<&String> = files.iter().filter(|f| *f != "engine.rs").collect();
    assert_eq!(own.len(), 3, "{files:?}");
}
