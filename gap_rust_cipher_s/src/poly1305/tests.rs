use super::*;
use gap_rust_wrapper::{MacFactory, MacInput, MacLane, PolyMac};
use poly1305::universal_hash::KeyInit;
use proptest::prelude::*;

fn hex(s: &str) -> alloc::vec::Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

extern crate alloc;

/// RFC 8439 §2.5.2.
#[test]
fn rfc8439_2_5_2() {
    let key: [u8; 32] = hex("85d6be7857556d337f4452fe42d506a80103808afb0db2fd4abff6af4149f51b")
        .try_into()
        .unwrap();
    let msg = b"Cryptographic Forum Research Group";
    let mut m = Poly1305::new(&key);
    m.update(msg);
    assert_eq!(
        m.finalize().to_vec(),
        hex("a8061dc1305136c6c22b8baf0c0127a9")
    );
}

/// The reference crate's tag of `msg` (RFC 8439 §2.5, unpadded).
fn reference(key: &[u8; 32], msg: &[u8]) -> [u8; 16] {
    let m = poly1305::Poly1305::new(key.into());
    m.compute_unpadded(msg).into()
}

/// RFC 8439 §2.5.2's message through the radix-2^13 kernel.
#[test]
fn radix13_rfc8439_and_edges() {
    let mut keys = [[0u8; 32], [0xff; 32], [0u8; 32]];
    keys[2][0] = 1;
    for key in &keys {
        for n in [1usize, 2, 17, 100] {
            let k = Poly1305Key::new(key);
            let data = alloc::vec![0xffu8; 16 * n];
            let (mut a, mut b) = (Fe([M26; 5]), Fe([M26; 5]));
            Radix13::blocks(&k, &mut a, &data);
            Radix32::blocks(&k, &mut b, &data);
            assert_eq!(a.freeze(), b.freeze());
        }
    }
}

/// Near p: limbs all ones, keys with every r bit that clamping keeps, s = all ones.
#[test]
fn edge_keys_and_messages() {
    let mut keys = [[0u8; 32], [0xff; 32], [0u8; 32]];
    keys[2][0] = 1;
    for key in &keys {
        for msg in [
            &[0xffu8; 0][..],
            &[0xff; 1],
            &[0xff; 16],
            &[0xff; 17],
            &[0xff; 160],
            &[0; 64],
        ] {
            let mut m = Poly1305::new(key);
            m.update(msg);
            assert_eq!(m.finalize(), reference(key, msg), "{key:?} {}", msg.len());
        }
    }
}

proptest! {
    #[test]
    fn matches_rustcrypto(key in any::<[u8; 32]>(), msg in proptest::collection::vec(any::<u8>(), 0..600),
                          cuts in proptest::collection::vec(0usize..64, 0..6)) {
        let mut m = Poly1305::new(&key);
        let mut at = 0;
        for c in cuts {
            let e = (at + c).min(msg.len());
            m.update(&msg[at..e]);
            at = e;
        }
        m.update(&msg[at..]);
        prop_assert_eq!(m.finalize(), reference(&key, &msg));
    }

    /// Both kernels give the same accumulator (as field elements).
    #[test]
    fn kernels_agree(key in any::<[u8; 32]>(), blocks in proptest::collection::vec(any::<u8>(), 0..40),
                     start in any::<[u32; 5]>()) {
        let k = Poly1305Key::new(&key);
        let data = &blocks[..blocks.len() & !15];
        // Any carried accumulator.
        let start = Fe(start.map(|l| l & M26));
        let (mut a, mut b) = (start, start);
        Radix26::blocks(&k, &mut a, data);
        Radix32::blocks(&k, &mut b, data);
        prop_assert_eq!(a.freeze(), b.freeze());
    }

    /// The radix-2^13 kernel (the model of the PULP dot-product loop) agrees with radix 2^32,
    /// also over long runs of all-ones blocks (the largest limbs).
    #[test]
    fn radix13_agrees(key in any::<[u8; 32]>(), blocks in proptest::collection::vec(any::<u8>(), 0..800),
                      ones in 0usize..40, start in any::<[u32; 5]>()) {
        let k = Poly1305Key::new(&key);
        let mut data = blocks[..blocks.len() & !15].to_vec();
        data.extend(core::iter::repeat_n(0xff, 16 * ones));
        let start = Fe(start.map(|l| l & M26));
        let (mut a, mut b) = (start, start);
        Radix13::blocks(&k, &mut a, &data);
        Radix32::blocks(&k, &mut b, &data);
        prop_assert_eq!(a.freeze(), b.freeze());
    }

    /// Lanes over scattered pieces sum to the AEAD polynomial of the whole (zero-padded) text.
    #[test]
    fn lanes_sum_to_the_whole(key in any::<[u8; 32]>(), msg in proptest::collection::vec(any::<u8>(), 0..500),
                              lanes in 1usize..=8, step in 1usize..70) {
        let k = Poly1305Key::new(&key);
        let mut want = Fe::ZERO;
        k.update_zero_padded(&mut want, &msg);
        let mac = PolyMac { key: k.clone(), input: MacInput::Output };
        let mut ls: alloc::vec::Vec<Option<_>> = (0..lanes).map(|_| None).collect();
        for l in ls.iter_mut() {
            mac.lane_in(&(), msg.len(), l);
        }
        let (mut at, mut i) = (0, 0);
        while at < msg.len() {
            let e = (at + step + i % 5).min(msg.len());
            ls[i % lanes].as_mut().unwrap().absorb(at, &msg[at..e]);
            at = e;
            i += 1;
        }
        let sum = ls.iter_mut().map(|l| mac.finish(&(), l.as_mut().unwrap(), msg.len()))
            .fold(mac.zero(), |a, b| mac.combine(a, b));
        prop_assert_eq!(sum.freeze(), want.freeze());
    }

    #[test]
    fn square_is_mul_by_itself(limbs in any::<[u32; 5]>(), key in any::<[u8; 32]>()) {
        // 26-bit limbs, and a carried product (limb 1 may be above 2^26): what `mul_pow` squares.
        let h = Fe(limbs.map(|l| l >> 6));
        prop_assert_eq!(h.square().0, h.mul(&h).0);
        let k = Poly1305Key::new(&key);
        let p = h.mul(k.r());
        prop_assert_eq!(p.square().0, p.mul(&p).0);
    }

    #[test]
    fn mul_pow_is_repeated_mul(key in any::<[u8; 32]>(), n in 0u64..300) {
        let k = Poly1305Key::new(&key);
        let mut a = Fe::ONE;
        for _ in 0..n {
            a = a.mul(k.r());
        }
        prop_assert_eq!(Fe::ONE.mul_pow(k.r(), n).freeze(), a.freeze());
    }
}
