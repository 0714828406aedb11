//! The engine on the host backend against the single-threaded RustCrypto reference.
use cipher::{
    BlockSizeUser, IvSizeUser, KeySizeUser, StreamCipherClosure, StreamCipherCore,
    StreamCipherSeekCore,
};
use cipher::{KeyIvInit, StreamCipher, StreamCipherSeek};
use gap_rust_sdk::host::{DmaStats, Fault, HostCluster, HostConfig};
use gap_rust_sdk::{Buf, Cluster};
use gap_rust_wrapper::{Blocks, Config, Engine, Error, KeyIv, Rounds, Source};
use proptest::prelude::*;

type ChaCha = chacha20::ChaCha20;
type AesCtr = ctr::Ctr128BE<aes::Aes128>;
type ChaChaCore = chacha20::ChaChaCore<chacha20::R20, chacha20::variants::Ietf>;
type AesCtrCore = ctr::CtrCore<aes::Aes128, ctr::flavors::Ctr128BE>;

/// RustCrypto's cores are not `Clone`; this one clones by rebuilding from the key and IV and
/// restoring the block position, so the fast path ([`Blocks`]) can be checked against the
/// reference (including RustCrypto's own end-of-keystream behaviour).
struct Rebuild<C: KeyIvInit> {
    key: cipher::Key<C>,
    iv: cipher::Iv<C>,
    core: C,
}

impl<C: KeyIvInit + StreamCipherSeekCore> Clone for Rebuild<C> {
    fn clone(&self) -> Self {
        let mut core = C::new(&self.key, &self.iv);
        core.set_block_pos(self.core.get_block_pos());
        Rebuild {
            key: self.key.clone(),
            iv: self.iv.clone(),
            core,
        }
    }
}
impl<C: KeyIvInit> KeySizeUser for Rebuild<C> {
    type KeySize = C::KeySize;
}
impl<C: KeyIvInit> IvSizeUser for Rebuild<C> {
    type IvSize = C::IvSize;
}
impl<C: KeyIvInit + BlockSizeUser> BlockSizeUser for Rebuild<C> {
    type BlockSize = C::BlockSize;
}
impl<C: KeyIvInit> KeyIvInit for Rebuild<C> {
    fn new(key: &cipher::Key<Self>, iv: &cipher::Iv<Self>) -> Self {
        Rebuild {
            key: key.clone(),
            iv: iv.clone(),
            core: C::new(key, iv),
        }
    }
}
impl<C: KeyIvInit + StreamCipherCore> StreamCipherCore for Rebuild<C> {
    fn remaining_blocks(&self) -> Option<usize> {
        self.core.remaining_blocks()
    }
    fn process_with_backend(&mut self, f: impl StreamCipherClosure<BlockSize = Self::BlockSize>) {
        self.core.process_with_backend(f)
    }
}
impl<C: KeyIvInit + StreamCipherSeekCore> StreamCipherSeekCore for Rebuild<C> {
    type Counter = C::Counter;
    fn get_block_pos(&self) -> Self::Counter {
        self.core.get_block_pos()
    }
    fn set_block_pos(&mut self, pos: Self::Counter) {
        self.core.set_block_pos(pos)
    }
}

#[derive(Clone, Copy, Debug)]
enum Which {
    ChaCha,
    Aes,
}

fn reference(which: Which, key: &[u8; 32], iv: &[u8; 16], offset: u64, data: &mut [u8]) {
    match which {
        Which::ChaCha => {
            let mut c = ChaCha::new_from_slices(key, &iv[..12]).unwrap();
            c.seek(offset);
            c.apply_keystream(data);
        }
        Which::Aes => {
            let mut c = AesCtr::new_from_slices(&key[..16], iv).unwrap();
            c.seek(offset);
            c.apply_keystream(data);
        }
    }
}

fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// The engine with configuration `cfg`; `fast` takes the block-level path ([`Blocks`]).
#[allow(clippy::too_many_arguments)]
fn run_engine_cfg(
    cl: &HostCluster,
    which: Which,
    fast: bool,
    key: &[u8; 32],
    iv: &[u8; 16],
    offset: u64,
    cfg: Config,
    in_place: bool,
    input: &[u8],
) -> Result<Vec<u8>, Error> {
    let mut eng = Engine::new(cl, cfg)?;
    let mut out = if in_place {
        input.to_vec()
    } else {
        vec![0x5a; input.len()]
    };
    fn go<F: gap_rust_wrapper::CipherFactory>(
        eng: &mut Engine<'_, HostCluster>,
        f: &F,
        offset: u64,
        in_place: bool,
        input: &[u8],
        out: &mut [u8],
    ) -> Result<(), Error> {
        if in_place {
            eng.apply(f, offset, out)
        } else {
            eng.apply_b2b(f, offset, input, out)
        }
    }
    let (k, v) = match which {
        Which::ChaCha => (&key[..], &iv[..12]),
        Which::Aes => (&key[..16], &iv[..]),
    };
    match (which, fast) {
        (Which::ChaCha, false) => go(
            &mut eng,
            &KeyIv::<ChaCha>::new(k, v),
            offset,
            in_place,
            input,
            &mut out,
        )?,
        (Which::Aes, false) => go(
            &mut eng,
            &KeyIv::<AesCtr>::new(k, v),
            offset,
            in_place,
            input,
            &mut out,
        )?,
        (Which::ChaCha, true) => go(
            &mut eng,
            &Blocks::<Rebuild<ChaChaCore>>::new(k, v),
            offset,
            in_place,
            input,
            &mut out,
        )?,
        (Which::Aes, true) => go(
            &mut eng,
            &Blocks::<Rebuild<AesCtrCore>>::new(k, v),
            offset,
            in_place,
            input,
            &mut out,
        )?,
    }
    Ok(out)
}

/// Any round policy within the buffer.
fn rounds_policy() -> impl Strategy<Value = Rounds> {
    prop_oneof![
        2 => Just(Rounds::Auto),
        1 => Just(Rounds::Ramp),
        1 => Just(Rounds::Fixed),
        1 => (1usize..20_000, 1usize..20_000).prop_map(|(first, round)| Rounds::Sized { first, round }),
    ]
}

/// Lengths biased to the edges of the round structure.
fn length(buffer: usize) -> impl Strategy<Value = usize> {
    let edges = vec![
        0,
        1,
        63,
        64,
        65,
        buffer - 1,
        buffer,
        buffer + 1,
        3 * buffer - 1,
        3 * buffer,
        3 * buffer + 1,
    ];
    prop_oneof![
        3 => proptest::sample::select(edges),
        1 => 0usize..=256 * 1024,
        1 => 0usize..=4 * buffer,
    ]
}

fn buffer_size() -> impl Strategy<Value = usize> {
    prop_oneof![
        2 => (6u32..=14).prop_map(|l| 1usize << l),
        1 => 64usize..=16 * 1024,
    ]
}

fn offset() -> impl Strategy<Value = u64> {
    prop_oneof![Just(0u64), Just(64), 0u64..200, 0u64..(1 << 30)]
}

/// Proptest cases of the main property (env `ENGINE_CASES` overrides; the default keeps the whole
/// file under a few seconds in debug on 2 cores).
const CASES: u32 = 512;

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn engine_equals_reference(
        (buffer, len) in buffer_size().prop_flat_map(|b| (Just(b), length(b))),
        cores in 1usize..=8,
        aes in any::<bool>(),
        fast in any::<bool>(),
        rounds in rounds_policy(),
        in_place in any::<bool>(),
        offset in offset(),
        key in any::<[u8; 32]>(),
        iv in any::<[u8; 16]>(),
        seed in any::<u64>(),
    ) {
        let which = if aes { Which::Aes } else { Which::ChaCha };
        let cl = HostCluster::new();
        let input = pattern(len, seed);
        let cfg = Config::new(cores, buffer).with_rounds(rounds);
        let out = run_engine_cfg(&cl, which, fast, &key, &iv, offset, cfg, in_place, &input).unwrap();
        let mut expect = input.clone();
        reference(which, &key, &iv, offset, &mut expect);
        prop_assert!(out == expect, "mismatch: {which:?} fast {fast} {rounds:?} len {len} buffer {buffer} cores {cores} in_place {in_place} offset {offset}");
        prop_assert_eq!(cl.l1().allocated(), 0, "L1 not freed exactly");
        // Every round fetched once and committed once; every wait was on a started transfer.
        let st = cl.dma_stats();
        prop_assert!(st.started >= 2 * cfg.round_count(len));
        prop_assert_eq!(st.bytes, 2 * len);
        prop_assert_eq!(st.waited, st.started);
        prop_assert_eq!(st.waited_idle, 0);
    }
}

fn cases() -> u32 {
    std::env::var("ENGINE_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(CASES)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases() / 2, ..ProptestConfig::default() })]

    /// No DMA: payload already in L1 (a `Buf` of the cluster's L1) or read in place from L2.
    #[test]
    fn direct_equals_reference(len in prop_oneof![0usize..=300, 0usize..=24 * 1024], cores in 1usize..=8,
                               aes in any::<bool>(), in_l1 in any::<bool>(), offset in offset(), key in any::<[u8; 32]>(),
                               iv in any::<[u8; 16]>()) {
        let which = if aes { Which::Aes } else { Which::ChaCha };
        let cl = HostCluster::new();
        let input = pattern(len, 7);
        let mut expect = input.clone();
        reference(which, &key, &iv, offset, &mut expect);
        let mut eng = Engine::new(&cl, Config::new(cores, 64)).unwrap();
        let mut l1 = Buf::zeroed(cl.l1(), if in_l1 { len } else { 0 }, 8).unwrap();
        let mut heap = input.clone();
        let data: &mut [u8] = if in_l1 { l1.copy_from_slice(&input); &mut l1 } else { &mut heap };
        match (which, offset % 2 == 0) {
            (Which::ChaCha, false) => eng.apply_direct(&KeyIv::<ChaCha>::new(&key, &iv[..12]), offset, data).unwrap(),
            (Which::Aes, false) => eng.apply_direct(&KeyIv::<AesCtr>::new(&key[..16], &iv), offset, data).unwrap(),
            (Which::ChaCha, true) => eng.apply_direct(&Blocks::<Rebuild<ChaChaCore>>::new(&key, &iv[..12]), offset, data).unwrap(),
            (Which::Aes, true) => eng.apply_direct(&Blocks::<Rebuild<AesCtrCore>>::new(&key[..16], &iv), offset, data).unwrap(),
        }
        prop_assert!(*data == expect[..]);
        prop_assert_eq!(cl.dma_stats().started, 0);
    }
}

/// A skipped DMA wait must make the equality check fail: proof that the host backend catches
/// ordering bugs.
#[test]
fn fault_injection_skipped_wait_is_caught() {
    let key = [7u8; 32];
    let iv = [9u8; 16];
    let input = pattern(40_000, 3);
    let mut expect = input.clone();
    reference(Which::ChaCha, &key, &iv, 0, &mut expect);
    for every in [1, 2, 3, 5] {
        for (cores, fast) in [(1, false), (8, false), (1, true), (8, true)] {
            let cl = HostCluster::new();
            let cfg = Config::new(cores, 4096);
            cl.inject(Fault::SkipWait(every));
            let out =
                run_engine_cfg(&cl, Which::ChaCha, fast, &key, &iv, 0, cfg, true, &input).unwrap();
            assert_ne!(
                out, expect,
                "skipping every {every}th DMA wait went unnoticed ({cores} cores, fast {fast})"
            );
            // The same engine without the fault is right again.
            cl.inject(Fault::None);
            let out =
                run_engine_cfg(&cl, Which::ChaCha, fast, &key, &iv, 0, cfg, true, &input).unwrap();
            assert_eq!(out, expect);
        }
    }
}

#[test]
fn zero_length_touches_nothing() {
    let cl = HostCluster::new();
    let mut eng = Engine::new(&cl, Config::new(8, 1024)).unwrap();
    let f = KeyIv::<ChaCha>::new(&[1; 32], &[2; 12]);
    eng.apply(&f, 0, &mut []).unwrap();
    eng.apply_b2b(&f, 12345, &[], &mut []).unwrap();
    eng.apply_direct(&f, 0, &mut []).unwrap();
    assert_eq!(
        cl.dma_stats(),
        DmaStats::default(),
        "a zero-length payload must issue no DMA"
    );
}

#[test]
fn one_engine_many_calls_and_core_changes() {
    let cl = HostCluster::new();
    let mut eng = Engine::new(&cl, Config::new(1, 1000)).unwrap();
    let (key, iv) = ([3u8; 32], [4u8; 16]);
    for (i, cores) in [1, 8, 3, 5, 2, 7, 4, 6].into_iter().enumerate() {
        eng.set_cores(cores).unwrap();
        let input = pattern(5000 + 777 * i, i as u64);
        let mut data = input.clone();
        eng.apply_keyiv::<AesCtr>(&key[..16], &iv, i as u64 * 13, &mut data)
            .unwrap();
        let mut expect = input;
        reference(Which::Aes, &key, &iv, i as u64 * 13, &mut expect);
        assert_eq!(data, expect, "{cores} cores");
    }
    assert_eq!(eng.set_cores(0), Err(Error::Config));
    assert_eq!(eng.set_cores(9), Err(Error::Config));
}

#[test]
fn bad_configurations_and_inputs_are_errors() {
    let cl = HostCluster::new();
    assert_eq!(
        Engine::new(&cl, Config::new(0, 64)).err(),
        Some(Error::Config)
    );
    assert_eq!(
        Engine::new(&cl, Config::new(9, 64)).err(),
        Some(Error::Config)
    );
    assert_eq!(
        Engine::new(&cl, Config::new(8, 0)).err(),
        Some(Error::Config)
    );
    assert_eq!(
        Engine::new(&cl, Config::new(8, 64).with_split_align(48)).err(),
        Some(Error::Config)
    );
    // Three 24 KiB buffers do not fit the 64 KiB L1: the allocation fails as on the chip, and
    // what was allocated before the failure is freed.
    assert!(matches!(
        Engine::new(&cl, Config::new(8, 24 * 1024)).err(),
        Some(Error::Alloc(_))
    ));
    assert_eq!(cl.l1().allocated(), 0);
    // One DMA command is at most 32 KiB - 1 on GAP8: a larger round is split into several commands.
    let big = HostCluster::with_config(HostConfig {
        l1_size: 256 * 1024,
        ..HostConfig::default()
    });
    let mut eng = Engine::new(&big, Config::new(2, 40 * 1024)).unwrap();
    let input = pattern(100_000, 1);
    let mut data = input.clone();
    let f = KeyIv::<ChaCha>::new(&[1; 32], &[2; 12]);
    eng.apply(&f, 0, &mut data).unwrap();
    let mut expect = input;
    reference(Which::ChaCha, &[1; 32], &[2; 16], 0, &mut expect);
    assert_eq!(data, expect);
    let st = big.dma_stats();
    assert_eq!((st.bytes, st.waited), (200_000, st.started));

    let mut eng = Engine::new(&cl, Config::new(4, 256)).unwrap();
    let mut out = vec![0u8; 99];
    assert_eq!(
        eng.apply_b2b(&f, 0, &[0u8; 100], &mut out),
        Err(Error::Length)
    );
    assert_eq!(
        eng.apply_keyiv::<ChaCha>(&[1; 31], &[2; 12], 0, &mut out),
        Err(Error::KeyIv)
    );
    // ChaCha20's keystream ends after 2^32 blocks of 64 bytes: running past it is an error that
    // writes nothing (as `Sequential`), whatever the core count.
    let end = 64u64 << 32;
    let mut data = vec![0xEEu8; 1000];
    assert_eq!(
        eng.apply(&f, end - 500, &mut data),
        Err(Error::CounterOverflow)
    );
    assert_eq!(
        eng.apply(&f, u64::MAX - 10, &mut data),
        Err(Error::CounterOverflow)
    );
    assert!(data.iter().all(|&b| b == 0xEE));
    assert_eq!(cl.dma_stats().started, 0);
}

/// The fast path refuses exactly what the generic path refuses at the end of the keystream
/// (RustCrypto's ChaCha20 stops one block before its 32-bit counter wraps), for aligned and
/// unaligned positions, and leaves the data alone when it does.
#[test]
fn fast_path_keystream_end_matches_the_generic_path() {
    let cl = HostCluster::new();
    let mut eng = Engine::new(&cl, Config::new(3, 256)).unwrap();
    let (key, iv) = ([1u8; 32], [2u8; 12]);
    let end = 64u64 << 32;
    for offset in [
        end - 1000,
        end - 128,
        end - 64,
        end - 65,
        end - 63,
        end,
        end + 1,
        u64::MAX - 3,
    ] {
        for len in [0usize, 1, 63, 64, 65, 128, 1000, 1001] {
            let mut slow = vec![0xEEu8; len];
            let mut fast = slow.clone();
            let a = eng.apply(&KeyIv::<ChaCha>::new(&key, &iv), offset, &mut slow);
            let b = eng.apply(
                &Blocks::<Rebuild<ChaChaCore>>::new(&key, &iv),
                offset,
                &mut fast,
            );
            assert_eq!(a, b, "offset {offset} len {len}");
            assert_eq!(slow, fast, "offset {offset} len {len}");
            if a.is_err() {
                assert!(fast.iter().all(|&x| x == 0xEE));
            }
        }
    }
    assert_eq!(
        eng.apply(
            &Blocks::<Rebuild<ChaChaCore>>::new(&key[..31], &iv),
            0,
            &mut [0u8; 4]
        ),
        Err(Error::KeyIv)
    );
}

/// An external-RAM payload behind the `Source` abstraction: a simulated device whose transfers,
/// like the host DMA's, land only when waited for (and poison their destination until then).
struct SimRam {
    mem: Vec<u8>,
    input: usize,
    output: usize,
    len: usize,
    requests: usize,
}

impl Source for SimRam {
    fn len(&self) -> usize {
        self.len
    }
    fn exchange<D: gap_rust_sdk::DmaRaw, const N: usize, T>(
        &mut self,
        _dma: &mut gap_rust_sdk::Dma<D, N>,
        fetch: Option<(usize, &mut [u8])>,
        commit: Option<(usize, &[u8])>,
        work: impl FnOnce() -> T,
    ) -> Result<T, Error> {
        // Start: destinations hold garbage until the request completes.
        let fetch = fetch.map(|(at, buf)| {
            buf.fill(0xA5);
            (at, buf)
        });
        if let Some((at, buf)) = &commit {
            self.mem[self.output + at..self.output + at + buf.len()].fill(0xA5);
        }
        let r = work();
        // Wait: the data lands.
        if let Some((at, buf)) = fetch {
            buf.copy_from_slice(&self.mem[self.input + at..self.input + at + buf.len()]);
            self.requests += 1;
        }
        if let Some((at, buf)) = commit {
            self.mem[self.output + at..self.output + at + buf.len()].copy_from_slice(buf);
            self.requests += 1;
        }
        Ok(r)
    }
}

#[test]
fn external_ram_source() {
    let cl = HostCluster::new();
    let (key, iv) = ([5u8; 32], [6u8; 16]);
    for (len, buffer, cores) in [(0, 64, 1), (1, 64, 8), (10_000, 1024, 3), (65_537, 4096, 8)] {
        let input = pattern(len, 11);
        let mut ram = SimRam {
            mem: vec![0; 2 * len + 100],
            input: 17,
            output: len + 50,
            len,
            requests: 0,
        };
        ram.mem[17..17 + len].copy_from_slice(&input);
        let mut eng = Engine::new(&cl, Config::new(cores, buffer)).unwrap();
        eng.apply_source(&KeyIv::<ChaCha>::new(&key, &iv[..12]), 0, &mut ram)
            .unwrap();
        let mut expect = input.clone();
        reference(Which::ChaCha, &key, &iv, 0, &mut expect);
        assert_eq!(&ram.mem[ram.output..ram.output + len], &expect[..]);
        assert_eq!(&ram.mem[17..17 + len], &input[..], "input left alone");
        assert_eq!(
            ram.requests,
            2 * Config::new(cores, buffer).round_count(len)
        );
    }
    assert_eq!(
        cl.dma_stats().started,
        0,
        "the RAM source does not use the cluster DMA"
    );
}
