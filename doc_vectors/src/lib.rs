//! Test support (a dev-dependency only): the byte layouts that `docs/*.md` give as fenced hex
//! blocks, read and checked both ways against what the code produces.
//!
//! A block is
//!
//! ````text
//! ```hex frame-header
//! 01 02 03 04   # `#` starts a comment
//! ```
//! ````
//!
//! with a tag (`hex`, `udp-hex`, …) and a name. [`check`] asserts that every vector the code
//! defines is in the document with exactly its bytes, that every block of the tag (and name
//! prefix) in the document is one the code defines, and that no name is there twice; on a
//! mismatch it prints the block the document should hold.

/// The blocks fenced as ```` ```<tag> <name> ```` in `doc`, in order: (name, bytes).
///
/// # Panics
/// On a line of a block that is not hex byte pairs (a test input, not user data).
pub fn blocks(doc: &str, tag: &str) -> Vec<(String, Vec<u8>)> {
    let opening = format!("```{tag} ");
    let mut out = Vec::new();
    let mut lines = doc.lines();
    while let Some(l) = lines.next() {
        let Some(name) = l.trim().strip_prefix(&opening) else {
            continue;
        };
        let name = name.trim();
        let mut digits = Vec::new();
        for l in lines.by_ref() {
            if l.trim() == "```" {
                break;
            }
            let text = l.split('#').next().unwrap_or_default();
            for t in text.split_whitespace() {
                for c in t.chars() {
                    let d = c
                        .to_digit(16)
                        .unwrap_or_else(|| panic!("```{tag} {name}: `{t}` is not hex"));
                    digits.push(d as u8);
                }
            }
        }
        assert!(
            digits.len() % 2 == 0,
            "```{tag} {name}: an odd number of hex digits"
        );
        let bytes = digits.chunks(2).map(|p| (p[0] << 4) | p[1]).collect();
        out.push((name.to_string(), bytes));
    }
    out
}

/// `bytes` as hex pairs, 16 to a line (the documents' layout).
pub fn hex_lines(bytes: &[u8]) -> String {
    let mut s = String::new();
    for (i, x) in bytes.iter().enumerate() {
        if i > 0 {
            s.push(if i % 16 == 0 { '\n' } else { ' ' });
        }
        s.push_str(&format!("{x:02x}"));
    }
    s
}

/// Checks the document `doc` (named `doc_name` in messages) against the code's `vectors`: the
/// blocks tagged `tag` whose names start with `prefix` ("" for all).
///
/// # Panics
/// On any difference, naming the block and printing what it should hold.
pub fn check(doc_name: &str, doc: &str, tag: &str, prefix: &str, vectors: &[(String, Vec<u8>)]) {
    let doc_blocks: Vec<_> = blocks(doc, tag)
        .into_iter()
        .filter(|(n, _)| n.starts_with(prefix))
        .collect();
    for (name, bytes) in vectors {
        let Some((_, d)) = doc_blocks.iter().find(|(n, _)| n == name) else {
            panic!(
                "{doc_name} lacks the vector {name}:\n```{tag} {name}\n{}\n```",
                hex_lines(bytes)
            );
        };
        assert!(
            d == bytes,
            "{doc_name}, block `{name}` differs from the code: the document says\n{}\nthe code makes\n{}",
            hex_lines(d),
            hex_lines(bytes)
        );
    }
    for (i, (name, _)) in doc_blocks.iter().enumerate() {
        assert!(
            vectors.iter().any(|(n, _)| n == name),
            "{doc_name}, block `{name}` is not checked by any test"
        );
        assert!(
            !doc_blocks[..i].iter().any(|(n, _)| n == name),
            "{doc_name}, block `{name}` is there twice"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str =
        "text\n```hex a-one\n01 02 # c\n0a0B\n```\n```udp-hex b\nff\n```\n```hex a-two\n```\n";

    fn v(name: &str, b: &[u8]) -> (String, Vec<u8>) {
        (name.to_string(), b.to_vec())
    }

    #[test]
    fn reads_blocks_of_one_tag() {
        assert_eq!(
            blocks(DOC, "hex"),
            [v("a-one", &[1, 2, 10, 11]), v("a-two", &[])]
        );
        assert_eq!(blocks(DOC, "udp-hex"), [v("b", &[0xff])]);
    }

    #[test]
    fn check_passes_when_both_sides_agree() {
        check(
            "d",
            DOC,
            "hex",
            "a-",
            &[v("a-two", &[]), v("a-one", &[1, 2, 10, 11])],
        );
    }

    #[test]
    #[should_panic(expected = "differs from the code")]
    fn a_changed_byte_fails() {
        check(
            "d",
            DOC,
            "hex",
            "a-",
            &[v("a-two", &[]), v("a-one", &[1, 2, 10, 12])],
        );
    }

    #[test]
    #[should_panic(expected = "lacks the vector a-three")]
    fn a_vector_missing_from_the_document_fails() {
        check(
            "d",
            DOC,
            "hex",
            "",
            &[
                v("a-one", &[1, 2, 10, 11]),
                v("a-two", &[]),
                v("a-three", &[1]),
            ],
        );
    }

    #[test]
    #[should_panic(expected = "is not checked")]
    fn a_block_no_test_knows_fails() {
        check("d", DOC, "hex", "", &[v("a-one", &[1, 2, 10, 11])]);
    }

    #[test]
    #[should_panic(expected = "there twice")]
    fn a_block_twice_fails() {
        let doc = format!("{DOC}```hex a-two\n```\n");
        check(
            "d",
            &doc,
            "hex",
            "",
            &[v("a-one", &[1, 2, 10, 11]), v("a-two", &[])],
        );
    }
}
