//! The engine's MAC pass on the host backend: every path (per-core pipelines, team rounds with
//! any buffer size, no DMA), both sides of the keystream, against the polynomial of the whole
//! reference output evaluated on one core.
use cipher::{KeyIvInit, StreamCipher, StreamCipherSeek};
use gap_rust_sdk::host::HostCluster;
use gap_rust_sdk::{Buf, Cluster};
use gap_rust_wrapper::{Config, Engine, KeyIv, MacInput, PolyMac, Polynomial, Rounds};
use proptest::prelude::*;

type ChaCha = chacha20::ChaCha20;

/// A polynomial MAC mod 2^61 - 1 with Poly1305's pad bit as `+ 1` per block.
#[derive(Clone)]
struct Toy(u128);
const P: u128 = (1 << 61) - 1;

impl Polynomial for Toy {
    type Acc = u128;
    fn zero(&self) -> u128 {
        0
    }
    fn blocks(&self, acc: &mut u128, blocks: &[u8]) {
        for b in blocks.chunks_exact(16) {
            self.block(acc, b.try_into().unwrap(), true);
        }
    }
    fn block(&self, acc: &mut u128, b: &[u8; 16], lead: bool) {
        let m = u128::from_le_bytes(*b) % P;
        *acc = (*acc + m + lead as u128) % P * self.0 % P;
    }
    fn shift(&self, acc: &mut u128, n: u64) {
        // Square and multiply (as a real field would).
        let (mut base, mut e, mut r) = (self.0, n, 1u128);
        while e > 0 {
            if e & 1 == 1 {
                r = r * base % P;
            }
            base = base * base % P;
            e >>= 1;
        }
        *acc = *acc * r % P;
    }
    fn add(&self, a: &mut u128, b: &u128) {
        *a = (*a + b) % P;
    }
}

fn whole(key: &Toy, data: &[u8]) -> u128 {
    let mut acc = 0;
    for c in data.chunks(16) {
        let mut b = [0u8; 16];
        b[..c.len()].copy_from_slice(c);
        key.block(&mut acc, &b, true);
    }
    acc
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

#[derive(Clone, Copy, Debug)]
enum Path {
    InPlace,
    B2b,
    DirectL1,
    DirectL2,
}

fn path() -> impl Strategy<Value = Path> {
    prop_oneof![
        Just(Path::InPlace),
        Just(Path::B2b),
        Just(Path::DirectL1),
        Just(Path::DirectL2)
    ]
}

fn rounds() -> impl Strategy<Value = Rounds> {
    prop_oneof![
        3 => Just(Rounds::Auto),
        1 => Just(Rounds::Fixed),
        1 => Just(Rounds::Ramp),
        1 => (1usize..300, 1usize..300).prop_map(|(a, b)| Rounds::Sized { first: a.min(b), round: a.max(b) }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    #[test]
    fn mac_of_every_path_equals_the_whole_polynomial(
        len in prop_oneof![0usize..300, 0usize..20_000],
        cores in 1usize..=8,
        buffer in prop_oneof![1usize..200, 200usize..9000],
        rounds in rounds(),
        offset in prop_oneof![Just(64u64), 0u64..200],
        path in path(),
        input_side in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let cl = HostCluster::new();
        let key = [3u8; 32];
        let nonce = [5u8; 12];
        let input = pattern(len, seed);
        let mut expect = input.clone();
        let mut c = ChaCha::new_from_slices(&key, &nonce).unwrap();
        c.seek(offset);
        c.apply_keystream(&mut expect);
        let toy = Toy((u128::from(seed) % P) | 1);
        // Opening absorbs the input (the ciphertext), sealing the output.
        let (side, want) = if input_side {
            (MacInput::Input, whole(&toy, &input))
        } else {
            (MacInput::Output, whole(&toy, &expect))
        };
        let mac = PolyMac { key: toy, input: side };
        let f = KeyIv::<ChaCha>::new(&key, &nonce);
        let Ok(mut eng) = Engine::new(&cl, Config::new(cores, buffer).with_rounds(rounds)) else {
            // Three buffers that do not fit the 64 KiB L1.
            return Ok(());
        };
        let (out, got) = match path {
            Path::InPlace => {
                let mut d = input.clone();
                let t = eng.apply_mac(&f, offset, &mut d, &mac).unwrap();
                (d, t)
            }
            Path::B2b => {
                let mut d = vec![0x5a; len];
                let t = eng.apply_b2b_mac(&f, offset, &input, &mut d, &mac).unwrap();
                (d, t)
            }
            Path::DirectL2 => {
                let mut d = input.clone();
                let t = eng.apply_direct_mac(&f, offset, &mut d, &mac).unwrap();
                (d, t)
            }
            Path::DirectL1 => {
                drop(eng);
                let mut eng = Engine::new(&cl, Config::new(cores, 64)).unwrap();
                let Ok(mut l1) = Buf::zeroed(cl.l1(), len, 8) else { return Ok(()) };
                l1.copy_from_slice(&input);
                let t = eng.apply_direct_mac(&f, offset, &mut l1, &mac).unwrap();
                (l1.to_vec(), t)
            }
        };
        prop_assert!(out == expect);
        prop_assert_eq!(got, want);
    }
}
