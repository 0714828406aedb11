//! The fuzz targets' bodies on stable, in `make test`: over the committed seed corpus
//! (`fuzz/corpus/<target>/`, regression inputs included), over freshly generated seeds, and over
//! proptest-random and mutated inputs. The long coverage-guided runs are `make fuzz` (nightly).

use std::path::PathBuf;

use gapstream_fuzz_targets::session::{Side, run};
use gapstream_fuzz_targets::{TARGETS, seeds, target};
use proptest::prelude::*;

fn corpus_dir(t: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/corpus")
        .join(t)
}

#[test]
fn every_target_runs_over_its_committed_corpus() {
    for (name, body) in TARGETS {
        let dir = corpus_dir(name);
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        assert!(!files.is_empty(), "no seeds in {}", dir.display());
        for f in files {
            let bytes = std::fs::read(&f).unwrap();
            eprintln!("{name}: {} ({} bytes)", f.display(), bytes.len());
            body(&bytes);
        }
    }
}

#[test]
fn every_target_has_a_fuzz_binary_and_generated_seeds() {
    let seeds = seeds::all();
    let fuzz = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz");
    let manifest = std::fs::read_to_string(fuzz.join("Cargo.toml")).unwrap();
    for (name, _) in TARGETS {
        assert!(
            seeds.iter().any(|s| s.target == *name),
            "no seed for {name}"
        );
        let src = std::fs::read_to_string(fuzz.join("fuzz_targets").join(format!("{name}.rs")))
            .unwrap_or_else(|e| panic!("fuzz/fuzz_targets/{name}.rs: {e}"));
        assert!(
            src.contains(&format!("gapstream_fuzz_targets::{}", name_path(name))),
            "fuzz/fuzz_targets/{name}.rs does not call its body"
        );
        assert!(
            manifest.contains(&format!("name = \"{name}\"")),
            "fuzz/Cargo.toml lacks {name}"
        );
    }
    for s in &seeds {
        target(s.target).expect("known target")(&s.bytes);
    }
}

/// `cpx_decoder` → `cpx::cpx_decoder` (the module a body lives in).
fn name_path(name: &str) -> String {
    let module = match name {
        "cpx_decoder" | "cpx_assembler" => "cpx",
        "wire_decode" | "frame_open" => "wire",
        "drone_session" | "receiver_session" => "session",
        "stock_stream" => "stock",
        "bridge_client" => "bridge",
        "fec_reassembly" => "fec",
        "jpegls_decode" => "jpegls",
        "jpeg_decode" => "jpeg",
        "stm32_uart" => "stm32",
        other => panic!("unknown target {other}"),
    };
    format!("{module}::{name}")
}

/// The session seeds are only worth having if they move frames from their snapshot: checked for
/// the seeds the generator writes and for the committed ones, replayed as the fuzz body runs them.
#[test]
fn session_seeds_replay_to_streaming_sessions() {
    let s = seeds::session_seeds();
    for (name, sealed, delivered) in &s.frames {
        assert!(
            *sealed >= 5 && *delivered >= 5,
            "session seed {name}: {sealed} sealed, {delivered} delivered to receiver 0"
        );
    }
    // The sequence-max regression seed: its clean run's frames and u64::MAX - 1, not u64::MAX.
    let delivered = |n: &str| {
        let n = format!("receiver_session/{n}");
        s.frames.iter().find(|(x, ..)| *x == n).unwrap().2
    };
    assert_eq!(
        delivered("unauthenticated-sequence-max"),
        delivered("unauthenticated") + 1
    );
    for (target, side) in [
        ("drone_session", Side::Drone),
        ("receiver_session", Side::Receiver),
    ] {
        for seed in s.seeds.iter().filter(|x| x.target == target) {
            let committed = std::fs::read(corpus_dir(target).join(format!("seed-{}", seed.name)))
                .unwrap_or_else(|e| panic!("{target}/seed-{}: {e} (make fuzz-corpus)", seed.name));
            assert_eq!(
                committed, seed.bytes,
                "{target}/seed-{} is stale (make fuzz-corpus)",
                seed.name
            );
            let w = run(side, &seed.bytes);
            let key = format!("{target}/{}", seed.name);
            let want = s.frames.iter().find(|(n, ..)| *n == key).unwrap();
            assert_eq!(
                (w.frames_sealed, w.frames_delivered[0]),
                (want.1, want.2),
                "replaying {target} seed {}",
                seed.name
            );
        }
    }
}

#[test]
fn bridge_seeds_move_messages_both_ways_and_register_through_the_gate() {
    use gapstream_fuzz_targets::bridge::run;
    for s in seeds::all().iter().filter(|s| s.target == "bridge_client") {
        let o = run(&s.bytes);
        assert!(o.to_gap8 >= 1 && o.to_clients >= 1, "{}: {o:?}", s.name);
        if s.name.contains("cookie") {
            assert_eq!(o.gate_registered, 1, "{}: {o:?}", s.name);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn random_inputs(t in 0..TARGETS.len(), bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        (TARGETS[t].1)(&bytes);
    }

    /// Seeds with a few bytes changed, cut short or extended: the cheap version of what libFuzzer
    /// does for hours.
    #[test]
    fn mutated_seeds(
        pick in any::<prop::sample::Index>(),
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
        cut in any::<prop::sample::Index>(),
        tail in proptest::collection::vec(any::<u8>(), 0..40),
    ) {
        let seeds = mutation_seeds();
        let s = &seeds[pick.index(seeds.len())];
        let mut b = s.bytes.clone();
        for (at, v) in &edits {
            let i = at.index(b.len());
            b[i] ^= v | 1;
        }
        if cut.index(4) == 0 {
            b.truncate(cut.index(b.len()));
        }
        b.extend_from_slice(&tail);
        target(s.target).unwrap()(&b);
    }
}

fn mutation_seeds() -> &'static [seeds::Seed] {
    static S: std::sync::OnceLock<Vec<seeds::Seed>> = std::sync::OnceLock::new();
    S.get_or_init(seeds::all)
}

/// The FEC seeds reach recovery, the corrupted-parity path and the bridge's coding: every
/// genuine block with at most m losses comes out (72 datagrams in 12 blocks), parity rebuilds the
/// lost ones, the corrupted parity is refused or rebuilds a datagram, the bridge's stream is
/// received.
#[test]
fn fec_seeds_recover_lost_packets_and_drive_the_bridge() {
    for s in seeds::all().iter().filter(|s| s.target == "fec_reassembly") {
        let st = gapstream_fuzz_targets::fec::fec_reassembly_stats(&s.bytes);
        eprintln!("{}: {st:?}", s.name);
        if s.name.starts_with("genuine") {
            let sent: usize = (0..12u32).map(|b| 3 + (b % 7) as usize).sum();
            assert!(st.delivered as usize >= sent, "{}: {st:?}", s.name);
            assert!(st.recovered >= 12, "{}: {st:?}", s.name);
            assert!(st.duplicates >= 12, "{}: {st:?}", s.name);
        } else {
            assert!(
                st.data_shards >= 50 && st.parity_shards >= 20,
                "{}: {st:?}",
                s.name
            );
            assert_eq!(st.unrecoverable_blocks, 0, "{}: {st:?}", s.name);
        }
    }
}
