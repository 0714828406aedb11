//! The fuzz targets' bodies on stable, in `make test`: over the committed seed corpus
//! (`fuzz/corpus/<target>/`, regression inputs included), over freshly generated seeds, and over
//! proptest-random and mutated inputs. The long coverage-guided runs are `make fuzz` (nightly).

use std::path::PathBuf;

use gapstream_fuzz_targets::session::{DroneHarness, ReceiverHarness};
use gapstream_fuzz_targets::{Input, TARGETS, seeds, target};
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
        "jpegls_decode" => "jpegls",
        "stm32_uart" => "stm32",
        other => panic!("unknown target {other}"),
    };
    format!("{module}::{name}")
}

/// The session seeds are only worth having if they replay to an established session that moves
/// frames: checked on the generator's side and by replaying the bytes as the fuzz body does.
#[test]
fn session_seeds_replay_to_streaming_sessions() {
    let s = seeds::session_seeds();
    for (name, frames) in &s.receiver_frames {
        assert!(*frames >= 5, "receiver seed {name}: {frames} frames");
    }
    // The sequence-max regression seed: its base seed's frames and u64::MAX - 1, not u64::MAX.
    let frames = |n: &str| s.receiver_frames.iter().find(|(x, _)| x == n).unwrap().1;
    assert_eq!(
        frames("unauthenticated-sequence-max"),
        frames("unauthenticated-x25519") + 1
    );
    for (name, sealed, delivered) in &s.drone_frames {
        assert!(
            *sealed >= 5 && *delivered >= 5,
            "drone seed {name}: {sealed} sealed, {delivered} delivered"
        );
    }
    for seed in &s.seeds {
        let mut i = Input::new(&seed.bytes);
        let sel = i.byte();
        match seed.target {
            "receiver_session" => {
                let mut h = ReceiverHarness::new(sel, false);
                while let Some((ctl, body)) = i.record() {
                    h.step(ctl, body);
                }
                let want = s
                    .receiver_frames
                    .iter()
                    .find(|(n, _)| *n == seed.name)
                    .unwrap()
                    .1;
                assert_eq!(h.frames, want, "replaying receiver seed {}", seed.name);
            }
            "drone_session" => {
                let mut h = DroneHarness::new(sel);
                while let Some((ctl, body)) = i.record() {
                    h.step(ctl, body);
                }
                let want = s
                    .drone_frames
                    .iter()
                    .find(|(n, ..)| *n == seed.name)
                    .unwrap()
                    .1;
                assert_eq!(h.frames_sealed, want, "replaying drone seed {}", seed.name);
            }
            other => panic!("{other}"),
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
