//! Keeps `include/esp32_bridge.h` in sync with `src/capi.rs`: the same `esp32b_*` functions on both
//! sides with the same number of parameters, the same `ESP32B_*` constant values, the same buffer
//! size. (Struct layouts are checked by `_Static_assert`s in `tests/capi_test.c`, which `make
//! esp32-capi-test` compiles against the header and runs against the library.)
#![cfg(feature = "capi")]

use std::collections::BTreeMap;

const HEADER: &str = include_str!("../include/esp32_bridge.h");
const CAPI: &str = include_str!("../src/capi.rs");

fn strip_comments(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find("/*") {
        out.push_str(&rest[..i]);
        rest = &rest[i + rest[i..].find("*/").expect("closed comment") + 2..];
    }
    out.push_str(rest);
    out
}

/// name -> parameter count of `esp32b_*` prototypes in the header.
fn header_functions() -> BTreeMap<String, usize> {
    let text = strip_comments(HEADER);
    let mut out = BTreeMap::new();
    for decl in text.split(';') {
        let Some(open) = decl.find('(') else { continue };
        let Some(name) = decl[..open].split_whitespace().last() else {
            continue;
        };
        let name = name.trim_start_matches('*');
        if !name.starts_with("esp32b_") {
            continue;
        }
        let args = decl[open + 1..decl.rfind(')').unwrap()].trim();
        let n = if args == "void" || args.is_empty() {
            0
        } else {
            args.split(',').count()
        };
        out.insert(name.to_string(), n);
    }
    out
}

/// name -> parameter count of the `extern "C" fn esp32b_*` in capi.rs.
fn rust_functions() -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    let mut rest = CAPI;
    while let Some(i) = rest.find("extern \"C\" fn esp32b_") {
        let s = &rest[i + "extern \"C\" fn ".len()..];
        let open = s.find('(').unwrap();
        let name = s[..open].to_string();
        let mut depth = 0;
        let mut end = 0;
        for (k, c) in s[open..].char_indices() {
            match c {
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    if depth == 0 {
                        end = open + k;
                        break;
                    }
                }
                _ => {}
            }
        }
        let args = s[open + 1..end].trim().trim_end_matches(',');
        let n = if args.is_empty() {
            0
        } else {
            args.split(',').count()
        };
        out.insert(name, n);
        rest = &s[end..];
    }
    out
}

#[test]
fn the_same_functions_on_both_sides() {
    let h = header_functions();
    let r = rust_functions();
    assert!(r.len() >= 14, "{r:?}");
    assert_eq!(h, r);
}

#[test]
fn the_same_constants() {
    use esp32_bridge::capi::*;
    let text = strip_comments(HEADER);
    let define = |name: &str| -> i64 {
        let line = text
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("#define {name} ")))
            .unwrap_or_else(|| panic!("{name} not in the header"));
        let v = line.split_whitespace().nth(2).unwrap();
        v.trim_matches(|c| c == '(' || c == ')').parse().unwrap()
    };
    assert_eq!(define("ESP32B_EINVAL"), ESP32B_EINVAL as i64);
    assert_eq!(define("ESP32B_ENOCLIENT"), ESP32B_ENOCLIENT as i64);
    assert_eq!(define("ESP32B_EFULL"), ESP32B_EFULL as i64);
    assert_eq!(define("ESP32B_ECPX"), ESP32B_ECPX as i64);
    assert_eq!(define("ESP32B_UDP_REPLY_MAX"), ESP32B_UDP_REPLY_MAX as i64);
    assert_eq!(
        define("ESP32B_UDP_DATAGRAM_MAX"),
        esp32_bridge::capi::ESP32B_UDP_DATAGRAM_MAX as i64
    );
    assert_eq!(
        define("ESP32B_SPI_BUFFER_LEN"),
        esp32_bridge::spi_slave::BUFFER_LEN as i64
    );
}
