//! Poly1305 on rv32 (QEMU): RFC 8439 §2.5.2, and a seeded randomized cross-check of the three limb
//! radices (radix 2^13: the portable model of the PULP dot-product loop), the sequential MAC (random chunking, unaligned buffers) and the lanes' parallel form
//! (random pieces dealt to 1..=8 lanes) against RustCrypto `poly1305`.
#![no_std]
#![no_main]

extern crate alloc;

use alloc::vec;
use alloc::vec::Vec;
use gap_rust_cipher_s::poly1305::{
    BlockKernel, Fe, Poly1305, Poly1305Key, Radix13, Radix26, Radix32,
};
use gap_rust_wrapper::{MacFactory, MacInput, MacLane, PolyMac};
use poly1305::universal_hash::KeyInit;
use rv32_qemu::{Rng, println};

const CASES: usize = 300;

fn reference(key: &[u8; 32], msg: &[u8]) -> [u8; 16] {
    poly1305::Poly1305::new(key.into())
        .compute_unpadded(msg)
        .into()
}

fn main() -> Result<(), &'static str> {
    // RFC 8439 §2.5.2.
    let key: [u8; 32] = [
        0x85, 0xd6, 0xbe, 0x78, 0x57, 0x55, 0x6d, 0x33, 0x7f, 0x44, 0x52, 0xfe, 0x42, 0xd5, 0x06,
        0xa8, 0x01, 0x03, 0x80, 0x8a, 0xfb, 0x0d, 0xb2, 0xfd, 0x4a, 0xbf, 0xf6, 0xaf, 0x41, 0x49,
        0xf5, 0x1b,
    ];
    let mut m = Poly1305::new(&key);
    m.update(b"Cryptographic Forum Research Group");
    let want = [
        0xa8, 0x06, 0x1d, 0xc1, 0x30, 0x51, 0x36, 0xc6, 0xc2, 0x2b, 0x8b, 0xaf, 0x0c, 0x01, 0x27,
        0xa9,
    ];
    if m.finalize() != want {
        return Err("RFC 8439 2.5.2 tag differs");
    }
    let mut rng = Rng::new(0x9017_1305_c4ec);
    let mut buf = vec![0u8; 3000];
    for case in 0..CASES {
        let mut key = [0u8; 32];
        rng.fill(&mut key);
        if case % 10 == 0 {
            key[..16].fill(0xff);
        }
        let len = rng.below(2000);
        let skew = rng.below(4);
        rng.fill(&mut buf);
        let msg = &buf[skew..skew + len];
        let want = reference(&key, msg);
        // Sequential, random chunking.
        let mut m = Poly1305::new(&key);
        let mut at = 0;
        while at < len {
            let e = (at + rng.below(100)).min(len);
            m.update(&msg[at..e]);
            at = e;
        }
        if m.finalize() != want {
            println!("case {case}: len {len} skew {skew}");
            return Err("sequential Poly1305 differs from RustCrypto");
        }
        // Both kernels on the whole blocks.
        let k = Poly1305Key::new(&key);
        let whole = &msg[..len & !15];
        let wt = reference(&key, whole);
        for (name, t) in [
            ("radix26", {
                let mut a = Fe::ZERO;
                Radix26::blocks(&k, &mut a, whole);
                k.tag(&a)
            }),
            ("radix32", {
                let mut a = Fe::ZERO;
                Radix32::blocks(&k, &mut a, whole);
                k.tag(&a)
            }),
            ("radix13", {
                let mut a = Fe::ZERO;
                Radix13::blocks(&k, &mut a, whole);
                k.tag(&a)
            }),
        ] {
            if t != wt {
                println!("case {case}: {name} len {len} skew {skew}");
                return Err("Poly1305 kernel differs from RustCrypto");
            }
        }
        // Lanes: the zero-padded polynomial of `msg` from pieces dealt to 1..=8 lanes.
        let mut h = Fe::ZERO;
        k.update_zero_padded(&mut h, msg);
        let lanes = 1 + rng.below(8);
        let mac = PolyMac {
            key: k.clone(),
            input: MacInput::Output,
        };
        let mut ls: Vec<Option<_>> = (0..lanes).map(|_| None).collect();
        for l in ls.iter_mut() {
            mac.lane_in(&(), len, l);
        }
        let (mut at, mut i) = (0, 0);
        while at < len {
            let e = (at + 1 + rng.below(300)).min(len);
            if let Some(l) = ls[i % lanes].as_mut() {
                l.absorb(at, &msg[at..e]);
            }
            at = e;
            i += 1;
        }
        let sum = ls
            .iter_mut()
            .filter_map(|l| l.as_mut().map(|l| mac.finish(&(), l, len)))
            .fold(mac.zero(), |a, b| mac.combine(a, b));
        if k.tag(&sum) != k.tag(&h) {
            println!("case {case}: lanes {lanes} len {len}");
            return Err("Poly1305 lanes differ from the whole polynomial");
        }
    }
    println!("poly1305_check: {CASES} cases OK");
    Ok(())
}
rv32_qemu::entry!(main);
