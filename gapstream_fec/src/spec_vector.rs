//! `docs/stream.md` is checked here: its fenced blocks tagged ```` ```hex fec-<name> ```` must be
//! exactly what this crate produces for the inputs the document states, and every vector defined
//! here must be in the document.
//!
//! `cargo test -p gapstream_fec print_fec_vectors -- --ignored --nocapture` prints them.

use alloc::string::String;
use alloc::vec::Vec;

use crate::wire::{self, Control, Report};

const DOC: &str = include_str!("../../docs/stream.md");

/// The document's example block: three datagrams of different lengths, two parity shards.
pub(crate) const EXAMPLE: [&[u8]; 3] = [b"gap8", b"esp32 bridge", b"receiver"];

fn vectors() -> Vec<(String, Vec<u8>)> {
    let mut v = Vec::new();
    let dg = wire::block_datagrams(42, &EXAMPLE, 2, false).unwrap();
    for (i, d) in dg.into_iter().enumerate() {
        let kind = if i < 3 { "data" } else { "parity" };
        v.push((alloc::format!("fec-{kind}-{i}"), d));
    }
    v.push((
        "fec-request".into(),
        Control::Request.encode().0[..4].to_vec(),
    ));
    let r = Control::Report(Report {
        received: 1000,
        lost: 52,
        unrecoverable: 1,
        worst: 12,
    });
    let (b, n) = r.encode();
    v.push(("fec-report".into(), b[..n].to_vec()));
    v
}

#[test]
fn docs_stream_md_vectors_are_what_the_code_produces() {
    doc_vectors::check("docs/stream.md", DOC, "hex", "fec-", &vectors());
}

/// The example's parity recovers any two lost datagrams, and reed-solomon-erasure computes the
/// same parity symbols.
#[test]
fn the_example_block_is_a_reed_solomon_erasure_codeword() {
    let v = vectors();
    let l = v[3].1.len() - wire::HEADER_LEN;
    let mut shards: Vec<Vec<u8>> = EXAMPLE
        .iter()
        .map(|d| crate::code::data_symbol(d, l).unwrap())
        .collect();
    shards.push(alloc::vec![0; l]);
    shards.push(alloc::vec![0; l]);
    reed_solomon_erasure::galois_8::ReedSolomon::new(3, 2)
        .unwrap()
        .encode(&mut shards)
        .unwrap();
    assert_eq!(shards[3], v[3].1[wire::HEADER_LEN..]);
    assert_eq!(shards[4], v[4].1[wire::HEADER_LEN..]);
}

#[test]
#[ignore]
fn print_fec_vectors() {
    extern crate std;
    for (name, bytes) in vectors() {
        std::println!("```hex {name}\n{}\n```", doc_vectors::hex_lines(&bytes));
    }
}
