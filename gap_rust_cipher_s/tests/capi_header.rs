//! Keeps `include/gap_rust_cipher_s.h` in sync with `src/capi.rs`: every `GAPCS_*` constant has the
//! same value on both sides (the Rust side read from the compiled constants), and every
//! `extern "C"` function of capi.rs has a prototype in the header with the same C types, and the
//! other way round.
#![cfg(feature = "host")]

use gap_rust_cipher_s::capi::CONSTANTS;
use std::collections::BTreeMap;

const HEADER: &str = include_str!("../include/gap_rust_cipher_s.h");
const CAPI: &str = include_str!("../src/capi.rs");

/// Tokens of a C type: words and `*`, e.g. `const uint8_t *` -> ["const", "uint8_t", "*"].
fn tokens(ty: &str) -> Vec<String> {
    ty.replace('*', " * ")
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

/// `(return type, [parameter types])` of every `gapcs_*` prototype in the header.
fn header_prototypes() -> BTreeMap<String, (Vec<String>, Vec<Vec<String>>)> {
    // Drop comments and preprocessor lines, then split declarations at ';'.
    let mut text = String::new();
    let mut rest = HEADER;
    while let Some(i) = rest.find("/*") {
        text.push_str(&rest[..i]);
        rest = &rest[i + rest[i..].find("*/").expect("closed comment") + 2..];
    }
    text.push_str(rest);
    let text: String = text
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .collect::<Vec<_>>()
        .join(" ");
    let mut out = BTreeMap::new();
    for decl in text.split(';') {
        let Some(open) = decl.find('(') else { continue };
        let head = decl[..open].trim();
        let Some(name) = head
            .split_whitespace()
            .last()
            .map(|n| n.trim_start_matches('*'))
        else {
            continue;
        };
        if !name.starts_with("gapcs_") {
            continue;
        }
        let ret = tokens(&head[..head.len() - name.len()]);
        let args = decl[open + 1..decl.rfind(')').unwrap()].trim();
        let params = args
            .split(',')
            .filter(|p| !p.trim().is_empty() && p.trim() != "void")
            .map(|p| {
                // Drop the parameter name (the last identifier).
                let p = p.trim();
                let name_start = p
                    .rfind(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .map_or(0, |i| i + 1);
                tokens(&p[..name_start])
            })
            .collect();
        out.insert(name.to_owned(), (ret, params));
    }
    out
}

/// The C type tokens of a Rust FFI type of capi.rs.
fn c_type(rust: &str) -> Vec<String> {
    let rust = rust.trim();
    if let Some(inner) = rust.strip_prefix("*const ") {
        let mut t = vec!["const".to_owned()];
        t.extend(c_type(inner));
        t.push("*".into());
        return t;
    }
    if let Some(inner) = rust.strip_prefix("*mut ") {
        let mut t = c_type(inner);
        t.push("*".into());
        return t;
    }
    let c = match rust {
        "i32" => "int32_t",
        "u32" => "uint32_t",
        "u8" => "uint8_t",
        "u64" => "uint64_t",
        "usize" => "size_t",
        "c_char" => "char",
        "gapcs_engine" => "gapcs_engine",
        other => panic!("capi.rs uses a type the header test does not map: {other}"),
    };
    vec![c.to_owned()]
}

/// `(return type, [parameter types])` of every exported function of capi.rs.
fn rust_functions() -> BTreeMap<String, (Vec<String>, Vec<Vec<String>>)> {
    let mut out = BTreeMap::new();
    let mut rest = CAPI;
    const ATTR: &str = "#[unsafe(no_mangle)]";
    while let Some(i) = rest.find(ATTR) {
        rest = &rest[i + ATTR.len()..];
        let fn_at = rest.find("fn ").unwrap() + 3;
        let open = rest.find('(').unwrap();
        let name = rest[fn_at..open].trim().to_owned();
        let close = open + rest[open..].find(')').unwrap();
        let params = rest[open + 1..close]
            .split(',')
            .filter(|p| !p.trim().is_empty())
            .map(|p| c_type(p.split_once(':').expect("name: type").1))
            .collect();
        let body = close + rest[close..].find('{').unwrap();
        let ret = rest[close + 1..body].trim().trim_start_matches("->").trim();
        out.insert(name, (c_type(ret), params));
        rest = &rest[body..];
    }
    out
}

#[test]
fn constants_match() {
    let mut defines = BTreeMap::new();
    for line in HEADER.lines() {
        let mut it = line.split_whitespace();
        if it.next() == Some("#define") {
            if let (Some(name), Some(value)) = (it.next(), it.next()) {
                if name.starts_with("GAPCS_") {
                    defines.insert(
                        name.to_owned(),
                        value.parse::<i32>().expect("integer define"),
                    );
                }
            }
        }
    }
    let rust: BTreeMap<String, i32> = CONSTANTS.iter().map(|&(n, v)| (n.to_owned(), v)).collect();
    assert_eq!(
        defines, rust,
        "header #defines and capi.rs constants differ"
    );
}

#[test]
fn prototypes_match() {
    let header = header_prototypes();
    let rust = rust_functions();
    assert!(
        rust.len() >= 7,
        "parsed too few functions from capi.rs: {rust:?}"
    );
    assert_eq!(
        header, rust,
        "header prototypes and capi.rs functions differ"
    );
}
